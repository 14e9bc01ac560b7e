package offload

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/doctor"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// credentialFile writes the key of the Secret or ConfigMap name in shadowgate-system, where
// the site's policy names its credentials, to a file of dir, as an admin would export it.
func credentialFile(t *testing.T, dir, kind, name, key string) string {
	t.Helper()
	jsonKey := strings.ReplaceAll(key, ".", `\.`)
	out := kubectl(t, "", "get", kind, name, "-n", "shadowgate-system", "-o", "jsonpath={.data."+jsonKey+"}")
	content := []byte(out)
	if kind == "secret" {
		var err error
		if content, err = base64.StdEncoding.DecodeString(out); err != nil {
			t.Fatalf("%s %s key %s: %v", kind, name, key, err)
		}
	}
	file := filepath.Join(dir, name+"-"+key)
	if err := os.WriteFile(file, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// doctorChecks runs shadowgate doctor -o json on the site's policy for one node with args and
// returns its checks by name and its exit code.
func doctorChecks(t *testing.T, node string, args ...string) (map[string]doctor.Check, int, string) {
	t.Helper()
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(site.local.Policy), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, site.bin, append([]string{"doctor", "--policy", policyFile, "--node", node, "-o", "json"}, args...)...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shadowgate doctor: %v", err)
	}
	var doc struct {
		Nodes []struct {
			Checks []doctor.Check `json:"checks"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Nodes) != 1 {
		t.Fatalf("shadowgate doctor -o json (exit %d): %v\n%s", code, err, out)
	}
	checks := map[string]doctor.Check{}
	for _, c := range doc.Nodes[0].Checks {
		checks[c.Name] = c
	}
	return checks, code, string(out)
}

// shadowgate doctor, run with the credentials the site's policy names, checks the local
// site's login nodes as their shadows reach them: the hpc node passes every check that can run,
// Slurm's squeue and srun --overlap included, and with a running job of the account (a pod's)
// the reverse tunnel's srun hop, SshdPath and PythonPath on the compute node, and the route to
// the job's port; each node with one thing wrong fails the check its shadow fails at, with the
// remedy, as TestTunnelFailuresShowOnTheOffloadedPod sees it fail on the pod.
func TestDoctorChecksTheSiteAsItsShadowsReachIt(t *testing.T) {
	dir := t.TempDir()
	key := credentialFile(t, dir, "secret", harness.SiteKeySecret, "id_ed25519")
	knownHosts := credentialFile(t, dir, "configmap", harness.SiteKnownHostsMap, "known_hosts")
	wrongKey := credentialFile(t, dir, "secret", harness.WrongKeySecret, "id_ed25519")
	wrongKnownHosts := credentialFile(t, dir, "configmap", harness.WrongKnownHostsMap, "known_hosts")
	keytab := credentialFile(t, dir, "secret", harness.SiteKeytabSecret, "user.keytab")
	krb5 := credentialFile(t, dir, "configmap", harness.SiteKrb5ConfigMap, "krb5.conf")

	// A running job of the account, on the compute node, listening on 8888.
	const ns = "doctor"
	uid, _, _ := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil))
	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	jobOut, err := site.local.HPC.Slurm("squeue", "-h", "--name="+uid, "-o", "%i").CombinedOutput()
	if err != nil {
		t.Fatalf("squeue: %v %s", err, jobOut)
	}
	job := strings.TrimSpace(string(jobOut))
	compute := site.local.HPC.ComputeAddress

	for name, c := range map[string]struct {
		node  string
		args  []string
		pass  []string // checks that must pass
		fail  string   // the one check that must fail, "" for none
		say   []string // parts of the failed check's detail and remedy
		exits int
	}{
		"The hpc login node passes every check, Slurm's and the reverse tunnel's srun hop included.": {
			node: harness.HPCNode, args: []string{"--key", key, "--known-hosts", knownHosts, "--job", job, "--compute-node", compute, "--port", "8888"},
			pass: []string{doctor.CheckReachable, doctor.CheckHostKey, doctor.CheckAuth, doctor.CheckForwarding, doctor.CheckRoute,
				doctor.CheckSqueue, doctor.CheckSrun, doctor.CheckNodeHop, doctor.CheckPythonPath},
		},
		"A port nothing listens on fails the route, telling to bind 0.0.0.0.": {
			node: harness.HPCNode, args: []string{"--key", key, "--known-hosts", knownHosts, "--compute-node", compute, "--port", "8999"},
			pass: []string{doctor.CheckAuth, doctor.CheckForwarding}, fail: doctor.CheckRoute, say: []string{"8999", "0.0.0.0"}, exits: 1,
		},
		"The surf login node refuses forwarding, with the exec-mode remedy.": {
			node: harness.NoForwardPortforwardNode, args: []string{"--key", key, "--known-hosts", knownHosts},
			pass: []string{doctor.CheckAuth}, fail: doctor.CheckForwarding, say: []string{"ForwardMode: exec"}, exits: 1,
		},
		"The surf login node in exec mode passes: its nc is there.": {
			node: harness.NoForwardNode, args: []string{"--key", key, "--known-hosts", knownHosts},
			pass: []string{doctor.CheckAuth, doctor.CheckExecCommand, doctor.CheckSqueue},
		},
		"Another host key pinned for the login node fails the host key check.": {
			node: harness.WrongHostKeyNode, args: []string{"--key", key, "--known-hosts", wrongKnownHosts},
			fail: doctor.CheckHostKey, say: []string{"HostKeyMismatch"}, exits: 1,
		},
		"A key the account does not authorize fails the login, naming the Secret.": {
			node: harness.WrongKeyNode, args: []string{"--key", wrongKey, "--known-hosts", knownHosts},
			pass: []string{doctor.CheckHostKey}, fail: doctor.CheckAuth, say: []string{harness.WrongKeySecret}, exits: 1,
		},
		"The Kerberos login node lets the keytab's principal in.": {
			node: harness.KerberosNode, args: []string{"--keytab", keytab, "--krb5-conf", krb5, "--known-hosts", knownHosts},
			pass: []string{doctor.CheckHostKey, doctor.CheckAuth, doctor.CheckForwarding},
		},
	} {
		t.Run(name, func(t *testing.T) {
			checks, code, out := doctorChecks(t, c.node, c.args...)
			if code != c.exits {
				t.Errorf("doctor exited %d, want %d:\n%s", code, c.exits, out)
			}
			for _, p := range c.pass {
				if checks[p].Status != doctor.Pass {
					t.Errorf("check %q is %s, want pass: %s", p, checks[p].Status, checks[p].Detail)
				}
			}
			for n, ch := range checks {
				if ch.Status == doctor.Fail && n != c.fail {
					t.Errorf("check %q failed: %s (%s)", n, ch.Detail, ch.Remedy)
				}
			}
			if c.fail != "" {
				f := checks[c.fail]
				said := f.Detail + " " + f.Remedy
				if f.Status != doctor.Fail || f.Remedy == "" {
					t.Errorf("check %q is %s with remedy %q, want a failure with its remedy", c.fail, f.Status, f.Remedy)
				}
				for _, s := range c.say {
					if !strings.Contains(said, s) {
						t.Errorf("check %q does not say %q: %s", c.fail, s, said)
					}
				}
			}
		})
	}
}

// `helm test`'s doctor Jobs, as the chart renders them for the site's policy, run on the real
// node: shadowgate's image copies its binary, and doctor runs in the shadow's image, read-only
// root and restricted security context, with the credentials the policy names. The hpc node's
// Job completes with every login check passed; the wrong key's fails its Job, naming the
// Secret in its log.
func TestTheChartsDoctorJobsCheckTheSiteFromTheNode(t *testing.T) {
	ctx := harness.TestContext(t, 6*time.Minute)
	helm, err := harness.BuildHelm(site.root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(site.local.Policy), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered, err := harness.HelmTemplate(ctx, helm, site.root, site.local.WebhookImage,
		"--set-file", "policy="+policyFile, "--show-only", "templates/tests/doctor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]string{}
	for _, doc := range strings.Split(rendered, "\n---\n") {
		for _, node := range []string{harness.HPCNode, harness.WrongKeyNode} {
			if strings.Contains(doc, "\n  name: shadowgate-doctor-"+node+"\n") {
				jobs[node] = doc
			}
		}
	}
	if len(jobs) != 2 {
		t.Fatalf("the chart renders no doctor Job for %s or %s:\n%s", harness.HPCNode, harness.WrongKeyNode, rendered)
	}
	for node, want := range map[string]struct {
		condition string
		say       []string
	}{
		harness.HPCNode:      {"Complete", []string{"✔ " + doctor.CheckReachable, "✔ " + doctor.CheckHostKey, "✔ " + doctor.CheckAuth, "✔ " + doctor.CheckForwarding}},
		harness.WrongKeyNode: {"Failed", []string{"✔ " + doctor.CheckHostKey, "✘ " + doctor.CheckAuth, harness.WrongKeySecret}},
	} {
		t.Run(node, func(t *testing.T) {
			t.Parallel()
			job := "job/shadowgate-doctor-" + node
			kubectl(t, jobs[node], "apply", "-f", "-")
			t.Cleanup(func() { kubectl(t, "", "delete", "-n", harness.ReleaseNamespace, job, "--wait=false") })
			r := site.kubectl.Run(ctx, "", "wait", "-n", harness.ReleaseNamespace, "--for=condition="+want.condition, "--timeout=4m", job)
			log := site.kubectl.Run(ctx, "", "logs", "-n", harness.ReleaseNamespace, job, "-c", "doctor").Output()
			if r.Err != nil {
				t.Fatalf("%s is not %s: %s\nits log:\n%s\n%s", job, want.condition, r.Output(), log,
					kubectl(t, "", "get", "events", "-n", harness.ReleaseNamespace))
			}
			for _, s := range want.say {
				if !strings.Contains(log, s) {
					t.Errorf("%s's log lacks %q:\n%s", job, s, log)
				}
			}
		})
	}
}
