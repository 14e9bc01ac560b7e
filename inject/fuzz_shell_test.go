package inject

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// remoteCommands are the command lines the scripts build from the compute node (the node
// ConfigMap's, so the virtual kubelet's or whoever can write it) and a port, and hand to a
// shell: ssh runs a ProxyCommand by the local shell once it has put the node in for %h, and
// sends a remote command to the login node's shell as one string. Each is written as in its
// script, which is checked to still hold it, so the model cannot drift from what runs; words
// is what it must parse to, the node and the port last.
var remoteCommands = []struct {
	script, template string
	words            func(connect, node, port string) []string
}{
	{"ssh-forward.sh", `${SHADOW_EXEC_CONNECT_COMMAND} '${node}' '${port}'`,
		func(connect, node, port string) []string { return append(strings.Fields(connect), node, port) }},
	{"reverse-hop.sh", `${SHADOW_EXEC_CONNECT_COMMAND:?} '${host}' '${port}'`,
		func(connect, node, port string) []string { return append(strings.Fields(connect), node, port) }},
	{"ssh-reverse.sh", `ProxyCommand=bash '${hop}' node %h %p`,
		func(_, node, port string) []string { return []string{"bash", hopScript, "node", node, port} }},
	{"reverse-hop.sh", `ProxyCommand=bash '$0' jump %h %p`,
		func(_, node, port string) []string { return []string{"bash", hopScript, "jump", node, port} }},
}

// hopScript is where ssh-reverse writes reverse-hop.sh, under the state directory.
const hopScript = stateDir + "/reverse/hop"

// checkRemoteCommands fills every remote command with an accepted compute node; connect is the
// policy's ExecConnectCommand in exec mode, and empty otherwise, where nothing runs it.
func checkRemoteCommands(connect, node, port string) error {
	// One pass over the template: what is put in is not replaced again.
	fill := strings.NewReplacer("ProxyCommand=", "", "${SHADOW_EXEC_CONNECT_COMMAND:?}", connect, "${SHADOW_EXEC_CONNECT_COMMAND}", connect,
		"${node}", node, "${host}", node, "%h", node, "${port}", port, "%p", port, "${hop}", hopScript, "$0", hopScript)
	for _, rc := range remoteCommands {
		if connect == "" && strings.Contains(rc.template, "SHADOW_EXEC_CONNECT_COMMAND") {
			continue
		}
		if !strings.Contains(string(mustRead(rc.script)), rc.template) {
			return fmt.Errorf("scripts/%s no longer builds %q: update remoteCommands to what it builds now", rc.script, rc.template)
		}
		want := rc.words(connect, node, port)
		if err := expectWords(fill.Replace(rc.template), want, len(want)-2, len(want)-1); err != nil {
			return fmt.Errorf("scripts/%s: %w", rc.script, err)
		}
	}
	return nil
}

// shellPolicy is a policy whose fields that reach a shell are given, for FuzzShellValues; mode
// picks the forward mode, authentication, node exec and sshd, so every container is rendered.
func shellPolicy(mode uint8, loginHost, user, extraOption, python, connect, principal string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a string always marshals
	forward, auth, nodeExec, sshd := "portforward", "publickey", "ssh", "node"
	if mode&1 != 0 {
		forward = "exec"
	}
	if mode&2 != 0 {
		auth = "kerberos"
	}
	if mode&4 != 0 {
		nodeExec = "srun"
	}
	if mode&8 != 0 {
		sshd = "userspace"
	}
	return fmt.Sprintf(`{"virtualNodes": {"hpc-vk": {"Network": {"EnableTunnel": true, "ShadowMode": "ssh", "SSH": {
  "LoginHost": %s, "User": %s, "ExtraOptions": [%s], "ForwardMode": %q, "ExecConnectCommand": %s,
  "Auth": %q, "KeySecret": "key", "KeytabSecret": "keytab", "Principal": %s, "KnownHostsConfigMap": "known-hosts",
  "Reverse": {"Enabled": true, "AllowSocks": true, "NodeExec": %q, "Sshd": %q, "PythonPath": %s}}}}}}`,
		q(loginHost), q(user), q(extraOption), forward, q(connect), auth, q(principal), nodeExec, sshd, q(python))
}

// shellSeed is one input of FuzzShellValues.
type shellSeed struct {
	forwards, bind, socks, extraPorts, node, loginHost, user, extraOption, python, connect, principal string
	mode                                                                                              uint8
}

// goodShellSeed is admitted everywhere, in portforward mode with public-key login.
var goodShellSeed = shellSeed{"minio:9000 6443:kubernetes.default:443", "", "1080", "9090:metrics", "node07.hpc.example.org",
	"login.hpc.example.org", "alice", "Compression=yes", "python3", "nc -q 1", "alice@EXAMPLE.ORG", 0}

// Modes of shellPolicy that FuzzShellValues must reach with a valid policy: exec mode runs the
// policy's ExecConnectCommand in the remote commands, alone and under Kerberos.
const (
	modeExec         uint8 = 1
	modeExecKerberos uint8 = 1 | 2
)

// shellSeeds are the good seed in every forward mode, authentication, node exec and sshd, and
// hostile values in each field.
func shellSeeds() []shellSeed {
	var seeds []shellSeed
	for mode := range uint8(16) {
		s := goodShellSeed
		s.mode = mode
		seeds = append(seeds, s)
	}
	hostile := []string{"$(id)", "`id`", "a;id", "a\nid", "a'b", `a"b`, "-oProxyCommand=id", "a b", "${HOME}", "$((1+1))", "*", "a|b", "a&b", ">x", "~root"}
	for i, h := range hostile {
		s := goodShellSeed
		s.mode = uint8(i)
		switch i % 5 {
		case 0:
			s.forwards, s.node = h+":9000", h
		case 1:
			s.bind, s.user = h, h
		case 2:
			s.socks, s.extraPorts, s.extraOption = h, h, "Compression="+h
		case 3:
			s.loginHost, s.python = h, h
		case 4:
			s.connect, s.principal = "nc "+h, h
		}
		seeds = append(seeds, s)
	}
	return seeds
}

// FuzzShellValues renders the shadow and the pre-exec snippet from fuzzed annotation values
// and fuzzed policy and node ConfigMap values, and holds whatever is admitted to the shell
// property: every value reaches a shell as one literal word (shellproperty_test.go).
func FuzzShellValues(f *testing.F) {
	good := goodShellSeed
	for _, s := range shellSeeds() {
		f.Add(s.forwards, s.bind, s.socks, s.extraPorts, s.node, s.loginHost, s.user, s.extraOption, s.python, s.connect, s.principal, s.mode)
	}
	base, errs := validate.ParsePolicy([]byte(shellPolicy(0, good.loginHost, good.user, good.extraOption, good.python, good.connect, good.principal)), validate.CredentialRules{})
	if len(errs) > 0 {
		f.Fatalf("the fuzz target's base policy is refused: %v", errs.ToAggregate())
	}
	f.Fuzz(func(t *testing.T, forwards, bind, socks, extraPorts, node, loginHost, user, extraOption, python, connect, principal string, mode uint8) {
		pol, errs := validate.ParsePolicy([]byte(shellPolicy(mode, loginHost, user, extraOption, python, connect, principal)), validate.CredentialRules{})
		if len(errs) > 0 {
			pol = base // the annotations still get their turn
		}
		ssh := pol.VirtualNodes["hpc-vk"].Network.SSH
		verdict := validate.NodeConfigMap(&corev1.ConfigMap{Data: map[string]string{validate.ComputeNodeKey: node}})
		if node != "" && verdict.Allowed() {
			connect := ""
			if ssh.ForwardMode == policy.ForwardModeExec {
				connect = ssh.ExecConnectCommand
			}
			if err := checkRemoteCommands(connect, node, "8888"); err != nil {
				t.Fatal(err)
			}
		}
		pod := offloadedPod("trainer", "user", corev1.ContainerPort{ContainerPort: 8888})
		pod.Annotations = map[string]string{}
		for k, v := range map[string]string{validate.AnnotationReverseForwards: forwards, validate.AnnotationReverseBind: bind,
			validate.AnnotationReverseSocksPort: socks, validate.AnnotationExtraPorts: extraPorts} {
			if v != "" {
				pod.Annotations[k] = v
			}
		}
		decideAndRender(t, pod, pol)
	})
}

// The seeds reach the remote commands of exec mode, which run the policy's ExecConnectCommand,
// with a valid policy and an accepted compute node, alone and under Kerberos: otherwise the
// fuzzer starts from seeds that check those commands only with the connect command left out.
func TestShellSeedsReachExecModeRemoteCommands(t *testing.T) {
	reached := map[uint8]bool{}
	for _, s := range shellSeeds() {
		pol, errs := validate.ParsePolicy([]byte(shellPolicy(s.mode, s.loginHost, s.user, s.extraOption, s.python, s.connect, s.principal)), validate.CredentialRules{})
		node := validate.NodeConfigMap(&corev1.ConfigMap{Data: map[string]string{validate.ComputeNodeKey: s.node}})
		if len(errs) > 0 || s.node == "" || !node.Allowed() {
			continue
		}
		ssh := pol.VirtualNodes["hpc-vk"].Network.SSH
		if ssh.ForwardMode == policy.ForwardModeExec {
			reached[s.mode&modeExecKerberos] = true
			if err := checkRemoteCommands(ssh.ExecConnectCommand, s.node, "8888"); err != nil {
				t.Errorf("seed %+v: %v", s, err)
			}
		}
	}
	for mode, name := range map[uint8]string{modeExec: "exec mode", modeExecKerberos: "exec mode under Kerberos"} {
		if !reached[mode] {
			t.Errorf("no seed reaches the remote commands of %s with a valid policy", name)
		}
	}
}
