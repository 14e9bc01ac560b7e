package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// The notebook's shadow namespace, and a uid as OpenShift's restricted SCCs assign: no passwd
// entry in any image.
const (
	shadowNamespace = "user-shadow"
	openShiftUID    = 1000680000
)

// TestShadowOnTheRealNode runs the shadow's own Deployment, as shadowgate renders it for
// manifests/examples/notebook.yaml, from the project's shadow image on the real node, through
// the API server, the kubelet, containerd and runc, for the breaks a real image had: a uid
// without a passwd entry, TERM to PID 1, a port below 1024, an error log over 64 KiB on the
// read-only root, a restarted container's predecessor's Ready. No site runs here: the policy's login host is this machine's end of the
// node's link, on a port that refuses (or, for the restart, one that holds the connection
// without a word). Each case also runs a variant without its fix and shows it breaks there:
// the rendered objects with the fix's lines cut from the scripts ConfigMap (as the scripts
// were before ab3c71a: git show 2f909e7:inject/scripts/wait-for-node.sh), or with the sysctl
// at the kernel's default.
func TestShadowOnTheRealNode(t *testing.T) {
	_, k, node, _ := startNode(t)
	explain := func() string { return "the node's logs: " + strings.Join(node.LogPaths(), ", ") }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	site, err := harness.BuildSiteTools(root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.PushShadowImage(ctx, site.ShadowImage, ""); err != nil {
		t.Fatal(err)
	}

	// A port of this machine on the node's link that refuses: bound, then closed.
	l, err := net.Listen("tcp", node.HostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()

	s := shadowRenderer{t: t, k: k, loginHost: node.HostIP, loginPort: closedPort}
	k.CreateNamespaces(ctx, t, shadowNamespace)
	k.MustRun(ctx, t, `apiVersion: v1
kind: Secret
metadata: {name: hpc-ssh-key, namespace: user-shadow}
stringData: {id_ed25519: "not a key: the login node refuses the connection before ssh reads it\n"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: hpc-known-hosts, namespace: user-shadow}
data: {known_hosts: "login.hpc.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"}
`, "apply", "-f", "-")
	scripts := inject.ScriptsConfigMap(shadowNamespace)
	s.apply(ctx, scripts)

	t.Run("a uid without a passwd entry gets past ssh's user lookup", func(t *testing.T) {
		// The variant: ssh-forward.sh without any_uid, which ssh refuses as this uid.
		broken := variantScripts(t, scripts, "ssh-forward.sh", "\nany_uid\n")
		s.apply(ctx, broken)
		for _, c := range []struct {
			name, scripts, want, wantNot string
		}{
			{"anyuid-broken", broken.Name, fmt.Sprintf("No user exists for uid %d", openShiftUID), ""},
			{"anyuid", scripts.Name, `"message":"LoginUnreachable: `, "passwd"},
		} {
			dep := s.render(ctx, c.name, "node07", func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](openShiftUID)
				setScripts(d, c.scripts)
			})
			var last string
			harness.Eventually(t, 3*time.Minute, "ssh-forward of "+c.name+" as uid "+strconv.Itoa(openShiftUID)+" ends saying "+c.want, func() (bool, string) {
				last = terminated(ctx, t, k, dep, "ssh-forward")
				return strings.Contains(last, c.want), last
			}, explain)
			if c.wantNot != "" {
				if strings.Contains(last, c.wantNot) {
					t.Errorf("ssh-forward of %s ended with %q", c.name, last)
				}
				// ssh itself said why: the login node refused the connection.
				logs := k.Run(ctx, "", "-n", shadowNamespace, "logs", podOf(ctx, t, k, dep), "-c", "ssh-forward", "--previous").Output()
				if !strings.Contains(logs, fmt.Sprintf("port %d: Connection refused", closedPort)) {
					t.Errorf("ssh-forward of %s logged no refused connection to port %d:\n%s", c.name, closedPort, logs)
				}
			}
			s.delete(ctx, dep)
		}
	})

	t.Run("a deleted shadow waiting for its node ends without its grace period", func(t *testing.T) {
		// The variant: wait-for-node.sh without its TERM trap, as PID 1 that takes no TERM.
		broken := variantScripts(t, scripts, "wait-for-node.sh", "\nstop_on_term\n")
		s.apply(ctx, broken)
		for _, c := range []struct {
			name, scripts string
			grace         int64
			fixed         bool
		}{
			{"term-broken", broken.Name, 25, false},
			{"term", scripts.Name, 60, true},
		} {
			dep := s.render(ctx, c.name, "", func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(c.grace)
				setScripts(d, c.scripts)
			})
			pod := runningInit(ctx, t, k, dep, explain)
			harness.Eventually(t, 2*time.Minute, "wait-for-node of "+c.name+" waits for its node", func() (bool, string) {
				r := k.Run(ctx, "", "-n", shadowNamespace, "logs", pod, "-c", "wait-for-node")
				return strings.Contains(r.Stdout, "waiting for the compute node"), r.Output()
			}, explain)
			started := time.Now()
			k.MustRun(ctx, t, "", "-n", shadowNamespace, "delete", "pod", pod, "--wait=false")
			gone := func() (bool, string) {
				r := k.Run(ctx, "", "-n", shadowNamespace, "get", "pod", pod, "-o", "name", "--ignore-not-found")
				return r.Err == nil && r.Stdout == "", r.Output()
			}
			if c.fixed {
				harness.Eventually(t, 40*time.Second, "the deleted pod "+pod+" gone well within its grace period of 60 s", gone, explain)
				t.Logf("%s gone %s after its deletion", pod, time.Since(started).Round(time.Second))
				s.delete(ctx, dep)
				continue
			}
			// Without the trap the kubelet waits out the grace period: the pod is there
			// still at 15 s of 25.
			for time.Since(started) < 15*time.Second {
				if ok, _ := gone(); ok {
					t.Fatalf("the deleted pod %s of the variant without stop_on_term went within %s: the check of the fix proves nothing", pod, time.Since(started).Round(time.Second))
				}
				time.Sleep(time.Second)
			}
			s.delete(ctx, dep)
		}
	})

	t.Run("a port below 1024 binds as non-root with the rendered sysctl", func(t *testing.T) {
		listen := []string{"sh", "-c", "cat /proc/sys/net/ipv4/ip_unprivileged_port_start; exec timeout 2 socat -u TCP4-LISTEN:80,bind=127.0.0.1 STDOUT"}
		// Beside the rendered pod, two without its sysctl: one as rendered before the fix,
		// which on this node's containerd 2 binds anyway (it sets 0 in every sandbox,
		// enable_unprivileged_ports), and one at the kernel's default, 1024, where a runtime
		// that sets nothing (CRI-O, containerd 1.x, runc alone as in inject.TestShadowImage)
		// leaves it: there the bind is refused.
		for _, c := range []struct {
			name, sysctl string // sysctl: the pod's ip_unprivileged_port_start, "" for none
		}{
			{"lowport-unset", ""},
			{"lowport-kernel", "1024"},
			{"lowport", "80"},
		} {
			dep := s.render(ctx, c.name, "", func(d *appsv1.Deployment) {
				sc := d.Spec.Template.Spec.SecurityContext
				if len(sc.Sysctls) != 1 || sc.Sysctls[0].Name != "net.ipv4.ip_unprivileged_port_start" || sc.Sysctls[0].Value != "80" {
					t.Fatalf("the rendered pod's sysctls are %v, want net.ipv4.ip_unprivileged_port_start=80", sc.Sysctls)
				}
				if c.sysctl == "" {
					sc.Sysctls = nil
				} else {
					sc.Sysctls[0].Value = c.sysctl
				}
			})
			pod := runningInit(ctx, t, k, dep, explain)
			r := k.Run(ctx, "", append([]string{"-n", shadowNamespace, "exec", pod, "-c", "wait-for-node", "--"}, listen...)...)
			start, _, _ := strings.Cut(r.Stdout, "\n")
			switch c.sysctl {
			case "80":
				if start != "80" || !strings.Contains(r.Output(), "exit code 124") {
					t.Errorf("listening on port 80 as uid 65534 with the rendered sysctl: %v, %q; want ip_unprivileged_port_start 80 and socat listening until timeout ends it (124)", r.Err, r.Output())
				}
			case "1024":
				if start != "1024" || r.Err == nil || !strings.Contains(r.Output(), "Permission denied") {
					t.Fatalf("listening on port 80 as uid 65534 with ip_unprivileged_port_start at the kernel's 1024: %v, %q; want the bind refused (the check of the fix proves nothing)", r.Err, r.Output())
				}
			default:
				t.Logf("without the rendered sysctl this node's containerd sets ip_unprivileged_port_start itself: %q", r.Output())
			}
			s.delete(ctx, dep)
		}
	})

	t.Run("classify reads an error log over 64 KiB on the read-only root", func(t *testing.T) {
		// 1,400 refused connections, 78 KB, as an ssh-forward.err grows: classified in the
		// wait-for-node container, on the image's read-only root, as ssh-forward.sh does.
		const pipe = `cl_out=$(tr -d '\000' <"$1" 2>/dev/null | classify_lines) || true`
		// Through pipes alone (wait-for-node mounts nothing writable but /tmp): ssh-forward.sh's
		// functions, not its main part, and the log.
		classify := []string{"bash", "-c", `. <(awk '/^[a-z_]+\(\) \{ .*\}$/ { print; next } /^[a-z_]+\(\) \{$/, /^\}$/' /etc/interlink-shadow/scripts/ssh-forward.sh)
SHADOW_LOGIN_HOST=` + node.HostIP + `
classify <(for i in $(seq 1400); do echo "ssh: connect to host ` + node.HostIP + ` port 22: Connection refused"; done)
echo "reason=$cl_reason"`}
		// The variant: classify as it was, a here-document of the file, on a pod without the
		// /tmp emptyDir.
		broken := scripts.DeepCopy()
		if strings.Count(broken.Data["ssh-forward.sh"], pipe) != 1 {
			t.Fatalf("ssh-forward.sh holds %q %d times, want once", pipe, strings.Count(broken.Data["ssh-forward.sh"], pipe))
		}
		broken.Data["ssh-forward.sh"] = strings.Replace(broken.Data["ssh-forward.sh"], pipe, "cl_out=$(classify_lines <<EOF\n$(tr -d '\\000' <\"$1\" 2>/dev/null)\nEOF\n) || true", 1)
		broken.Name = inject.ScriptsConfigMapName(broken.Data)
		s.apply(ctx, broken)
		for _, c := range []struct {
			name, scripts, want string
			noTmp               bool
		}{
			{"classify-broken", broken.Name, "cannot create temp file for here-document", true},
			{"classify", scripts.Name, "reason=LoginUnreachable", false},
		} {
			dep := s.render(ctx, c.name, "", func(d *appsv1.Deployment) {
				setScripts(d, c.scripts)
				if c.noTmp {
					spec := &d.Spec.Template.Spec
					for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
						for i := range cs {
							cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" })
						}
					}
				}
			})
			pod := runningInit(ctx, t, k, dep, explain)
			r := k.Run(ctx, "", append([]string{"-n", shadowNamespace, "exec", pod, "-c", "wait-for-node", "--"}, classify...)...)
			if !strings.Contains(r.Output(), c.want) {
				t.Errorf("classify over 78 KB in %s: %v, %q; want %q", c.name, r.Err, r.Output(), c.want)
			}
			s.delete(ctx, dep)
		}
	})

	t.Run("a restarted ssh-forward is not Ready from its predecessor's status file", func(t *testing.T) {
		// The probe as it was (no check of the line's time against its container's start)
		// takes a Ready line of before the container for this run's; the rendered one does
		// not. Both run in a container that waits (wait-for-node, for a node never named),
		// on a line written a few seconds before that container's PID 1 started.
		oldProbe, ok := cutBetween(scripts.Data["tunnel-probe.sh"], "# The state directory outlives", "esac\n")
		if !ok {
			t.Fatal("tunnel-probe.sh holds no check of a line older than its container to remove")
		}
		waiting := s.render(ctx, "probe", "", nil)
		pod := runningInit(ctx, t, k, waiting, explain)
		probe := func(script string) harness.Result {
			return k.Run(ctx, "", "-n", shadowNamespace, "exec", pod, "-c", "wait-for-node", "--", "sh", "-c", `
f=/tmp/stale-test
started=$(sed -n 's/.*) //p' /proc/1/stat | cut -d ' ' -f 20)
boot=$(( $(date +%s) - $(cut -d . -f 1 /proc/uptime) ))
echo "$(( boot + started / $(getconf CLK_TCK) - 5 )) Ready: forwarding ports 80 to node07 through login" >"$f"
sh -c "$1" tunnel-probe "$f"`, "sh", script)
		}
		if r := probe(oldProbe); r.Err != nil {
			t.Fatalf("the probe without the container's start on a line of before it: %v, %q; want it Ready (the check of the fix proves nothing)", r.Err, r.Output())
		}
		if r := probe(scripts.Data["tunnel-probe.sh"]); r.Err == nil || !strings.HasPrefix(r.Stdout, "Connecting: ") {
			t.Errorf("the rendered probe on a line of before its container: %v, %q; want Connecting", r.Err, r.Output())
		}
		s.delete(ctx, waiting)

		// A login node that takes the connection and never answers: ssh-forward runs,
		// its tunnel down, until ssh's ConnectTimeout.
		hold, err := net.Listen("tcp", node.HostIP+":0")
		if err != nil {
			t.Fatal(err)
		}
		conns := make(chan net.Conn, 16)
		t.Cleanup(func() {
			hold.Close()
			for {
				select {
				case c := <-conns:
					c.Close()
				default:
					return
				}
			}
		})
		go func() {
			for {
				c, err := hold.Accept()
				if err != nil {
					return
				}
				select {
				case conns <- c:
				default:
					c.Close() // a restart's login beyond the test's few: refused as it ends
				}
			}
		}()
		held := s
		held.loginPort = hold.Addr().(*net.TCPAddr).Port
		dep := held.render(ctx, "stale", "node07", nil)
		harness.Eventually(t, 3*time.Minute, "ssh-forward of "+dep.Name+" running", func() (bool, string) {
			pod = podOf(ctx, t, k, dep)
			r := k.Run(ctx, "", "-n", shadowNamespace, "exec", pod, "-c", "ssh-forward", "--", "true")
			return r.Err == nil, r.Output()
		}, explain)
		// The predecessor's last word is Ready; it is killed, the kubelet restarts it.
		restarts := restartCount(ctx, t, k, pod, "ssh-forward")
		// The exec's stream may end with the container, so its error says nothing.
		_ = k.Run(ctx, "", "-n", shadowNamespace, "exec", pod, "-c", "ssh-forward", "--", "sh", "-c",
			`echo "$(date +%s) Ready: forwarding ports 80 to node07 through login" >/run/shadow/status/ssh-forward && kill 1`)
		harness.Eventually(t, 2*time.Minute, "ssh-forward of "+pod+" restarted", func() (bool, string) {
			n := restartCount(ctx, t, k, pod, "ssh-forward")
			return n > restarts, fmt.Sprintf("restartCount %d", n)
		}, explain)
		// The tunnel stays down: Ready stays False over three of the probe's periods (10 s).
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
			if ready := k.MustRun(ctx, t, "", "-n", shadowNamespace, "get", "pod", pod, "-o",
				`jsonpath={.status.containerStatuses[?(@.name=="ssh-forward")].ready}`); ready != "false" {
				t.Fatalf("ssh-forward of %s is Ready (%q) after its restart, with its tunnel down", pod, ready)
			}
		}
		s.delete(ctx, dep)
	})
}

// shadowRenderer renders the notebook's shadow with a policy whose login node refuses, and
// applies it.
type shadowRenderer struct {
	t         *testing.T
	k         harness.Kubectl
	loginHost string
	loginPort int
}

// render renders manifests/examples/notebook.yaml, named name, exposing port 80, applies its
// shadow's objects with the Deployment adjusted by adjust, and writes node into its node
// ConfigMap.
func (s shadowRenderer) render(ctx context.Context, name, node string, adjust func(*appsv1.Deployment)) *appsv1.Deployment {
	t := s.t
	t.Helper()
	doc := fmt.Sprintf(`virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: %s
        Port: %d
        User: alice
        KeySecret: hpc-ssh-key
        KnownHostsConfigMap: hpc-known-hosts
        NodeDiscovery: configmap
`, s.loginHost, s.loginPort)
	pol, errs := validate.ParsePolicy([]byte(doc), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatalf("the policy: %v", errs.ToAggregate())
	}
	data, err := os.ReadFile("../../manifests/examples/notebook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Name = name
	pod.Spec.Containers[0].Ports[0].ContainerPort = 80
	r := inject.Render(&pod, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{Name: policy.ConfigMapName}})
	if !r.Decision.Allowed() || r.Shadow == nil {
		t.Fatalf("the notebook %s is not rendered with a shadow: %v", name, r.Decision.Errors.ToAggregate())
	}
	var dep *appsv1.Deployment
	var objs []runtime.Object
	for _, obj := range r.Shadow.Objects() {
		switch o := obj.(type) {
		case *corev1.Namespace:
			continue // created with the credentials
		case *appsv1.Deployment:
			dep = o
			if adjust != nil {
				adjust(o)
			}
		case *corev1.ConfigMap:
			if o.Data != nil {
				if _, ok := o.Data["compute-node"]; ok {
					o.Data["compute-node"] = node
				}
			}
		}
		objs = append(objs, obj)
	}
	if dep == nil {
		t.Fatalf("the notebook %s's shadow has no Deployment", name)
	}
	s.apply(ctx, objs...)
	return dep
}

func (s shadowRenderer) apply(ctx context.Context, objs ...runtime.Object) {
	s.t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	if err != nil {
		s.t.Fatal(err)
	}
	s.k.MustRun(ctx, s.t, string(data), "apply", "-f", "-")
}

// delete deletes a Deployment and does not wait: its pods go with their grace periods.
func (s shadowRenderer) delete(ctx context.Context, dep *appsv1.Deployment) {
	s.k.MustRun(ctx, s.t, "", "-n", dep.Namespace, "delete", "deployment", dep.Name, "--wait=false")
}

// setScripts mounts the scripts ConfigMap name in place of the rendered one.
func setScripts(d *appsv1.Deployment, name string) {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, inject.ScriptsConfigMapPrefix) {
			d.Spec.Template.Spec.Volumes[i].ConfigMap.Name = name
		}
	}
}

// variantScripts is scripts with the one occurrence of fix in file replaced by a newline.
func variantScripts(t *testing.T, scripts *corev1.ConfigMap, file, fix string) *corev1.ConfigMap {
	t.Helper()
	v := scripts.DeepCopy()
	if strings.Count(v.Data[file], fix) != 1 {
		t.Fatalf("%s holds %q %d times, want once", file, fix, strings.Count(v.Data[file], fix))
	}
	v.Data[file] = strings.Replace(v.Data[file], fix, "\n", 1)
	v.Name = inject.ScriptsConfigMapName(v.Data)
	return v
}

// cutBetween is text without the lines from the one starting with begin to the first end
// after it, inclusive.
func cutBetween(text, begin, end string) (string, bool) {
	i := strings.Index(text, begin)
	if i < 0 {
		return "", false
	}
	j := strings.Index(text[i:], end)
	if j < 0 {
		return "", false
	}
	return text[:i] + text[i+j+len(end):], true
}

// podOf is the name of the Deployment's one pod not being deleted, or "".
func podOf(ctx context.Context, t *testing.T, k harness.Kubectl, dep *appsv1.Deployment) string {
	t.Helper()
	r := k.Run(ctx, "", "-n", dep.Namespace, "get", "pods", "-l", "interlink.eu/shadow="+dep.Name, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}`)
	for _, line := range strings.Split(r.Stdout, "\n") {
		if f := strings.Fields(line); len(f) == 1 {
			return f[0]
		}
	}
	return ""
}

// runningInit waits for the Deployment's pod to run its init container, wait-for-node.
func runningInit(ctx context.Context, t *testing.T, k harness.Kubectl, dep *appsv1.Deployment, explain func() string) string {
	t.Helper()
	var pod string
	harness.Eventually(t, 3*time.Minute, "wait-for-node of "+dep.Name+" running", func() (bool, string) {
		pod = podOf(ctx, t, k, dep)
		if pod == "" {
			return false, "no pod"
		}
		r := k.Run(ctx, "", "-n", dep.Namespace, "get", "pod", pod, "-o", `jsonpath={.status.initContainerStatuses[?(@.name=="wait-for-node")].state.running.startedAt}`)
		return r.Err == nil && r.Stdout != "", r.Output()
	}, explain)
	return pod
}

// terminated is how the container of the Deployment's pod last ended: its reason, exit code
// and message, or "".
func terminated(ctx context.Context, t *testing.T, k harness.Kubectl, dep *appsv1.Deployment, container string) string {
	t.Helper()
	pod := podOf(ctx, t, k, dep)
	if pod == "" {
		return ""
	}
	r := k.Run(ctx, "", "-n", dep.Namespace, "get", "pod", pod, "-o", fmt.Sprintf(
		`jsonpath={.status.containerStatuses[?(@.name=="%[1]s")].state.terminated}{.status.containerStatuses[?(@.name=="%[1]s")].lastState.terminated}`, container))
	return r.Stdout
}

func restartCount(ctx context.Context, t *testing.T, k harness.Kubectl, pod, container string) int {
	t.Helper()
	out := k.MustRun(ctx, t, "", "-n", shadowNamespace, "get", "pod", pod, "-o",
		fmt.Sprintf(`jsonpath={.status.containerStatuses[?(@.name=="%s")].restartCount}`, container))
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("restartCount of %s in %s: %q", container, pod, out)
	}
	return n
}
