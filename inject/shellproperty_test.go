package inject

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"mvdan.cc/sh/v3/syntax"

	"github.com/interlink-hq/shadowgate/validate"
	hostsyntax "github.com/interlink-hq/shadowgate/validate/syntax"
)

// The shell property every fuzz target of this package holds what it renders to: a value from
// a pod author, a node ConfigMap or the policy reaches a shell only as a literal word, never as
// a command name, inside a substitution, expansion or redirection, or as an extra option; the
// scripts run by `sh -c` are exactly the embedded ones, and values reach them only through the
// environment.

// literalWords parses cmd as one POSIX shell command and returns its words, failing unless it
// is a single plain command whose every word is literal text, unquoted or single-quoted: no
// parameter, command, arithmetic or process substitution, no glob, no assignment or redirection.
func literalWords(cmd string) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return nil, fmt.Errorf("%q does not parse: %w", cmd, err)
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("%q is %d commands, not one", cmd, len(f.Stmts))
	}
	return callWords(cmd, f.Stmts[0])
}

// callWords returns the literal words of a statement that is one plain command.
func callWords(cmd string, st *syntax.Stmt) ([]string, error) {
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, fmt.Errorf("%q is not one plain command", cmd)
	}
	words := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		var value strings.Builder
		for _, part := range w.Parts {
			switch p := part.(type) {
			case *syntax.Lit:
				if strings.ContainsAny(p.Value, "*?[~{") {
					return nil, fmt.Errorf("%q: unquoted %q would be expanded", cmd, p.Value)
				}
				value.WriteString(p.Value)
			case *syntax.SglQuoted:
				if p.Dollar {
					return nil, fmt.Errorf("%q: $'...' interprets escapes", cmd)
				}
				value.WriteString(p.Value)
			default:
				return nil, fmt.Errorf("%q: a word holds a %T, not literal text", cmd, part)
			}
		}
		words = append(words, value.String())
	}
	return words, nil
}

// expectWords fails unless cmd is exactly the literal words want, and every word at userAt
// (the places user values go) is not an option.
func expectWords(cmd string, want []string, userAt ...int) error {
	got, err := literalWords(cmd)
	if err != nil {
		return err
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		return fmt.Errorf("%q is the words %q, want %q", cmd, got, want)
	}
	for _, i := range userAt {
		if strings.HasPrefix(want[i], "-") {
			return fmt.Errorf("%q: the value %q would be read as an option", cmd, want[i])
		}
	}
	return nil
}

// checkPreExec holds the snippet MutatePod put in pod's pre-exec to the shell property: the
// block is the constant functions and one call of the snippet, whose arguments are the pod's
// relay address and the policy's python, the ports, the SOCKS port and the names, each one
// single-quoted literal word that is not an option, then `|| exit 1`.
func checkPreExec(pod *corev1.Pod, o *validate.Offload) error {
	preExec := pod.Annotations[validate.AnnotationPreExec]
	blocks := snippetBlocks(preExec)
	if len(blocks) != 1 {
		return fmt.Errorf("the pre-exec holds %d snippet blocks, want 1", len(blocks))
	}
	block := preExec[blocks[0][0]:blocks[0][1]]
	head, tail := markerBegin+"\n"+preExecBody, markerEnd+"\n"
	if !strings.HasPrefix(block, head) || !strings.HasSuffix(block, tail) {
		return fmt.Errorf("the snippet block is not the constant functions and one call:\n%s", block)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(block), "pre-exec")
	if err != nil {
		return fmt.Errorf("the snippet does not parse: %w", err)
	}
	call := strings.TrimSuffix(block[len(head):len(block)-len(tail)], "\n")
	last := f.Stmts[len(f.Stmts)-1]
	or, ok := last.Cmd.(*syntax.BinaryCmd)
	if !ok || or.Op != syntax.OrStmt || strings.Contains(call, "\n") {
		return fmt.Errorf("the snippet's call %q is not one `call || exit 1` line", call)
	}
	words, err := callWords(call, or.X)
	if err != nil {
		return err
	}
	if exit, err := callWords(call, or.Y); err != nil || strings.Join(exit, " ") != "exit 1" {
		return fmt.Errorf("the snippet's call %q does not end in `|| exit 1` (%v)", call, err)
	}
	if len(words) != 6 || words[0] != snippetCall || words[1] != o.Bind.String() || words[2] != o.Node.Network.SSH.Reverse.PythonPath {
		return fmt.Errorf("the snippet's call %q is not %s with the relay address %s and python %q", call, snippetCall, o.Bind, o.Node.Network.SSH.Reverse.PythonPath)
	}
	for _, w := range words[1:] {
		if strings.HasPrefix(w, "-") {
			return fmt.Errorf("the snippet's call %q passes %q, which would be read as an option", call, w)
		}
	}
	return nil
}

// embeddedScripts are the scripts a shadow container may run, by the `-c` text that runs
// them from the scripts volume (runScript).
var embeddedScripts = func() map[string]script {
	m := map[string]script{}
	for _, s := range []script{scriptWaitForNode, scriptWaitReason, scriptForward, scriptKerberos, scriptReverse} {
		m[runScript(s, "")[2]] = s
	}
	return m
}()

// scriptEnv are the variables that name a script the shadow runs: each must be the constant
// path of the embedded one in the scripts volume.
var scriptEnv = map[string]string{
	envExecRelay:         scriptPath(scriptExecRelay),
	envReverseHop:        scriptPath(scriptReverseHop),
	envReverseNodeScript: scriptPath(scriptReverseNode),
}

// checkContainers holds a shadow Deployment to the shell property: every container runs one
// embedded script from the scripts volume by `<its shell> -c '. <file>' <container name>`,
// without args; the variables that name scripts name the embedded ones; every ssh option is one Key=Value word, which
// the scripts pass as one -o argument, so none can become a second option. o is what the pod
// asked of its node, which the shadow was built from.
func checkContainers(d *appsv1.Deployment, o *validate.Offload) error {
	for _, c := range append(append([]corev1.Container{}, d.Spec.Template.Spec.InitContainers...), d.Spec.Template.Spec.Containers...) {
		if len(c.Command) != 4 || c.Command[1] != "-c" || c.Command[3] != c.Name || len(c.Args) > 0 {
			return fmt.Errorf("container %s runs %q %q, not `<shell> -c '. <file>' %s`", c.Name, c.Command, c.Args, c.Name)
		}
		if s, ok := embeddedScripts[c.Command[2]]; !ok || s.shell != c.Command[0] {
			return fmt.Errorf("container %s runs a script that is not one of the embedded ones by its own shell", c.Name)
		}
		for _, e := range c.Env {
			if want, ok := scriptEnv[e.Name]; ok && e.Value != want {
				return fmt.Errorf("container %s: %s does not name the embedded script", c.Name, e.Name)
			}
			if err := checkEnvValue(e, o); err != nil {
				return fmt.Errorf("container %s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// scriptDialHost is what common.sh's valid_dial_host lets through, the shared host rule for a
// host the shadow dials (TestScriptHostRuleAgreesWithGo): the scripts die on anything else, so
// an admitted value outside it is a tunnel that never comes up.
func scriptDialHost(host string) bool {
	ok, _ := hostsyntax.Host(host, hostsyntax.DialedByShadow)
	return ok
}

// fixedSSHOptions are the options the shadow sets before and after the policy's ExtraOptions:
// sshOptionsBefore of them (login, host keys, authentication, ExitOnForwardFailure), then the
// policy's, then the keep-alive and connect timeout.
const fixedSSHOptions, sshOptionsBefore = 13, 10

// checkEnvValue holds the variables that carry several values, or a host, to what the scripts
// split them into, line by line, and to what they were built from, so a value that smuggled a
// newline into them shows as a line too many or a line that is not the value: each ssh option
// one Key=Value word (passed as one -o argument, so none can become a second option), the
// policy's user and each of its ExtraOptions exactly one whole line; each reverse forward one
// "<listen port> <host> <port>" line with a host the scripts accept, one per forward the pod
// asked for (none for a pod that asks only for SOCKS); the login host one such host.
func checkEnvValue(e corev1.EnvVar, o *validate.Offload) error {
	ssh := &o.Node.Network.SSH
	switch e.Name {
	case envSSHOptions:
		lines := strings.Split(e.Value, "\n")
		if len(lines) != fixedSSHOptions+len(ssh.ExtraOptions) {
			return fmt.Errorf("%d ssh option lines, want %d fixed and the policy's %d ExtraOptions: %q", len(lines), fixedSSHOptions, len(ssh.ExtraOptions), lines)
		}
		if lines[0] != "User="+ssh.User {
			return fmt.Errorf("ssh option %q is not the policy's user %q, whole", lines[0], ssh.User)
		}
		for i, opt := range ssh.ExtraOptions {
			if lines[sshOptionsBefore+i] != opt {
				return fmt.Errorf("ssh option line %q is not the policy's ExtraOption %q, whole", lines[sshOptionsBefore+i], opt)
			}
		}
		for _, opt := range lines {
			key, _, ok := strings.Cut(opt, "=")
			if !ok || key == "" || strings.HasPrefix(opt, "-") || strings.ContainsAny(opt, " \t\r\v\f*?[") {
				return fmt.Errorf("ssh option %q is not one Key=Value word", opt)
			}
		}
	case envReverseForwards:
		var lines []string
		if e.Value != "" {
			lines = strings.Split(e.Value, "\n")
		}
		if len(lines) != len(o.Forwards) {
			return fmt.Errorf("%d reverse forward lines for the pod's %d forwards: %q", len(lines), len(o.Forwards), lines)
		}
		for i, line := range lines {
			f := strings.Split(line, " ")
			if len(f) != 3 || !scriptDialHost(f[1]) || strings.Trim(f[0]+f[2], "0123456789") != "" {
				return fmt.Errorf("reverse forward %q is not <listen port> <host> <port> as ssh-reverse reads it", line)
			}
			want := o.Forwards[i]
			if f[0] != strconv.Itoa(want.ListenPort) || f[1] != want.DialHost || f[2] != strconv.Itoa(want.Port) {
				return fmt.Errorf("reverse forward %q is not the pod's forward %d to %s:%d", line, want.ListenPort, want.DialHost, want.Port)
			}
		}
	case envLoginHost:
		if !scriptDialHost(e.Value) {
			return fmt.Errorf("login host %q is not a host the scripts accept", e.Value)
		}
	}
	return nil
}
