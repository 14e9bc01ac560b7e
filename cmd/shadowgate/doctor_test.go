package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/doctor"
	"github.com/interlink-hq/shadowgate/internal/sshtest"
)

// doctorPolicy writes a policy whose node site-vk logs in to srv, with a pinned host key and
// ConfigMap node discovery, beside a wstunnel node doctor does not check.
func doctorPolicy(t *testing.T, srv *sshtest.Server) string {
	t.Helper()
	doc := fmt.Sprintf(`virtualNodes:
  site-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: %s
        Port: %d
        User: %s
        KeySecret: site-key
        KnownHostsConfigMap: site-known-hosts
        NodeDiscovery: configmap
  wst-vk:
    Network:
      ShadowMode: wstunnel
`, srv.Host, srv.Port, srv.User)
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestDoctorCommand(t *testing.T) {
	sshtest.Require(t, "ssh", "sshd", "ssh-keygen", "nc")
	cases := map[string]struct {
		sshd []string
		args func(policy string, srv *sshtest.Server) []string
		code int
		// stdout and stderr hold these.
		stdout, stderr []string
	}{
		"a permissive login node passes every check that runs and exits 0, the skips naming their flags": {
			args: func(p string, srv *sshtest.Server) []string {
				return []string{"--policy", p, "--key", srv.ClientKey, "--known-hosts", srv.KnownHosts}
			},
			code:   0,
			stdout: []string{"virtual node site-vk", "✔ " + doctor.CheckAuth, "✔ " + doctor.CheckForwarding, "- " + doctor.CheckRoute, "--compute-node"},
		},
		"a login node that refuses forwarding fails with ✘ and the exec-mode remedy under it, exit 1": {
			sshd: []string{"AllowTcpForwarding no"},
			args: func(p string, srv *sshtest.Server) []string {
				return []string{"--policy", p, "--node", "site-vk", "--key", srv.ClientKey, "--known-hosts", srv.KnownHosts}
			},
			code:   1,
			stdout: []string{"✘ " + doctor.CheckForwarding, "\n      The login node refuses TCP forwarding", "sets ForwardMode: exec", "✔ " + doctor.CheckExecCommand},
		},
		"an unknown --node is bad input naming it": {
			args: func(p string, srv *sshtest.Server) []string { return []string{"--policy", p, "--node", "nope"} },
			code: 2, stderr: []string{`--node "nope"`, "no such virtual node", "site-vk"},
		},
		"a node that is not ShadowMode ssh is bad input": {
			args: func(p string, srv *sshtest.Server) []string { return []string{"--policy", p, "--node", "wst-vk"} },
			code: 2, stderr: []string{"wst-vk", "ShadowMode ssh"},
		},
		"an unreadable --key is bad input naming the flag": {
			args: func(p string, srv *sshtest.Server) []string {
				return []string{"--policy", p, "--key", "/nonexistent/id"}
			},
			code: 2, stderr: []string{`--key "/nonexistent/id"`, "no such file"},
		},
		"--compute-node without --port is bad input naming both": {
			args: func(p string, srv *sshtest.Server) []string {
				return []string{"--policy", p, "--compute-node", "node07"}
			},
			code: 2, stderr: []string{"--compute-node and --port go together"},
		},
		"an unreadable policy is bad input": {
			args: func(p string, srv *sshtest.Server) []string { return []string{"--policy", "/nonexistent/policy.yaml"} },
			code: 2, stderr: []string{"cannot read the policy"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := sshtest.StartSSHD(t, tc.sshd...)
			code, stdout, stderr := runCLI(t, "", append([]string{"doctor"}, tc.args(doctorPolicy(t, srv), srv)...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q", s)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q", s)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

func TestDoctorJSONListsEveryCheckWithStatusDetailAndRemedy(t *testing.T) {
	sshtest.Require(t, "ssh", "sshd", "ssh-keygen", "nc")
	srv := sshtest.StartSSHD(t, "AllowTcpForwarding no")
	code, stdout, stderr := runCLI(t, "", "doctor", "--policy", doctorPolicy(t, srv), "--key", srv.ClientKey, "--known-hosts", srv.KnownHosts, "-o", "json")
	if code != 1 {
		t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	var got struct {
		Nodes []struct {
			Node   string
			Checks []struct{ Name, Status, Detail, Remedy string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(got.Nodes) != 1 || got.Nodes[0].Node != "site-vk" {
		t.Fatalf("nodes %+v, want site-vk alone (wst-vk is no SSH node)", got.Nodes)
	}
	checks := got.Nodes[0].Checks
	if len(checks) != 14 {
		t.Errorf("%d checks, want all 14", len(checks))
	}
	found := false
	for _, c := range checks {
		if c.Detail == "" {
			t.Errorf("%s has no detail", c.Name)
		}
		if c.Name == doctor.CheckForwarding {
			found = true
			if c.Status != "fail" || !strings.Contains(c.Remedy, "ForwardMode: exec") {
				t.Errorf("forwarding is %s with remedy %q, want fail with the exec-mode remedy", c.Status, c.Remedy)
			}
		}
	}
	if !found {
		t.Errorf("no %s check in:\n%s", doctor.CheckForwarding, stdout)
	}
}
