package inject

import (
	"os/exec"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// reverseShadow mutates and renders a pod with the trainer's forwards under a policy whose
// SSH block ends in sshExtra (indented for it).
func reverseShadow(t *testing.T, sshExtra string, ports ...corev1.ContainerPort) (*corev1.Pod, *Shadow) {
	t.Helper()
	doc := `
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
` + sshExtra
	pod := offloadedPod("trainer", "user", ports...)
	pod.Annotations = map[string]string{validate.AnnotationReverseForwards: "minio:9000 6443:kubernetes.default.svc.cluster.local:443"}
	pol := mustPolicy(t, doc)
	o, _ := validate.Pod(pod, validate.Config{Policy: pol})
	mutateInPlace(pod, o)
	s, _ := render(t, doc, pod)
	return pod, s
}

func TestReverseContainer(t *testing.T) {
	const publickey = "        KeySecret: hpc-ssh-key\n"
	const kerberos = "        Auth: kerberos\n        KeytabSecret: keytab\n        Principal: alice@EXAMPLE.ORG\n"
	t.Run("a pod with reverse forwards and no TCP port has a shadow of ssh-reverse alone", func(t *testing.T) {
		_, s := reverseShadow(t, publickey+"        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}}\n")
		if s.Service != nil {
			t.Error("a Service without a port to front")
		}
		var names []string
		for _, c := range s.Deployment.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		if strings.Join(names, " ") != ContainerReverse {
			t.Errorf("containers %v, want ssh-reverse alone", names)
		}
	})
	t.Run("it sits beside ssh-forward when the pod also exposes a port", func(t *testing.T) {
		_, s := reverseShadow(t, publickey+"        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}}\n", corev1.ContainerPort{ContainerPort: 8888})
		container(t, s.Deployment, containerForward)
		container(t, s.Deployment, ContainerReverse)
	})
	t.Run("it dials a bare Service name in the pod's namespace, on the recorded bind address", func(t *testing.T) {
		pod, s := reverseShadow(t, publickey+"        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}}\n")
		c := container(t, s.Deployment, ContainerReverse)
		if got, want := envValue(c, envReverseForwards), "9000 minio.user 9000\n6443 kubernetes.default.svc.cluster.local 443"; got != want {
			t.Errorf("%s = %q, want %q", envReverseForwards, got, want)
		}
		if got := envValue(c, envReverseBind); got != pod.Annotations[validate.AnnotationReverseBind] || got == "" {
			t.Errorf("%s = %q, not the recorded %q", envReverseBind, got, pod.Annotations[validate.AnnotationReverseBind])
		}
		if got := envValue(c, envReverseJobName); got != string(pod.UID) {
			t.Errorf("%s = %q, want the pod UID", envReverseJobName, got)
		}
	})
	for name, c := range map[string]struct {
		ssh      string
		delegate bool
	}{
		"Kerberos delegates the ticket on the login hop with NodeExec srun": {kerberos + "        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}, NodeExec: srun}\n", true},
		"Kerberos does not delegate it with NodeExec ssh":                   {kerberos + "        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}, NodeExec: ssh}\n", false},
		"public keys have nothing to delegate":                              {publickey + "        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}, NodeExec: srun}\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			_, s := reverseShadow(t, c.ssh)
			ctr := container(t, s.Deployment, ContainerReverse)
			if got := envValue(ctr, envReverseLoginOptions) == "GSSAPIDelegateCredentials=yes"; got != c.delegate {
				t.Errorf("%s = %q", envReverseLoginOptions, envValue(ctr, envReverseLoginOptions))
			}
			if strings.Contains(envValue(ctr, envSSHOptions), "GSSAPIDelegateCredentials=yes") {
				t.Error("every hop delegates the ticket")
			}
		})
	}
}

// TestReverseScriptsPassSyntaxChecksAndShellcheck checks the scripts ssh-reverse runs and
// writes out, as the container gets them, with the shell of their #! line.
func TestReverseScriptsPassSyntaxChecksAndShellcheck(t *testing.T) {
	sshtest.Require(t, "shellcheck", "bash", "sh")
	_, s := reverseShadow(t, "        KeySecret: hpc-ssh-key\n        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}}\n")
	c := container(t, s.Deployment, ContainerReverse)
	for name, text := range map[string]string{
		"ssh-reverse":        commandScript(t, s.Scripts, c.Command),
		envReverseHop:        mountedScript(t, s.Scripts, envValue(c, envReverseHop)),
		envReverseNodeScript: mountedScript(t, s.Scripts, envValue(c, envReverseNodeScript)),
	} {
		t.Run(name, func(t *testing.T) {
			shell := shebang(t, text)
			for _, check := range [][]string{{shell, "-n"}, {"shellcheck", "--shell=" + path.Base(shell), "-"}} {
				cmd := exec.Command(check[0], check[1:]...)
				cmd.Stdin = strings.NewReader(text)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s: %v\n%s", strings.Join(check, " "), err, out)
				}
			}
		})
	}
}

// ssh-reverse checks what reaches a shell before it runs anything: the job name squeue looks
// for with srun, and the poll interval, which the node's shell sleeps too.
func TestReverseScriptRefusesValuesItWouldPassOn(t *testing.T) {
	sshtest.Require(t, "bash")
	for name, c := range map[string]struct {
		nodeExec, env, want string
	}{
		"srun with an empty job name, which squeue -n would take for any job": {"srun", envReverseJobName + "=", "SHADOW_REVERSE_JOB_NAME holds ''"},
		"a poll interval that is not a number":                                {"ssh", "SHADOW_POLL_INTERVAL=1;reboot", "SHADOW_POLL_INTERVAL holds '1;reboot', not a number of seconds"},
		"a poll interval of a number and more":                                {"ssh", "SHADOW_POLL_INTERVAL=1.5.2", "not a number of seconds"},
	} {
		t.Run(name, func(t *testing.T) {
			_, s := reverseShadow(t, "        KeySecret: hpc-ssh-key\n        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}, NodeExec: "+c.nodeExec+"}\n")
			mounts := map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir()}
			p := runContainer(t, container(t, s.Deployment, ContainerReverse), mounts, c.env)
			if code := p.wait(t, 15*time.Second); code == 0 || !strings.Contains(p.out.String(), c.want) {
				t.Errorf("exit code %d, output:\n%s\nwant it to fail saying %q", code, p.out, c.want)
			}
		})
	}
}
