package inject

import (
	"embed"
	"strings"
)

// The shadow's scripts are constant text: every value reaches them through the container's
// environment, so none is ever spliced into a script.
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

// script is one embedded script and the shell named by its #! line.
type script struct {
	name, shell, text string
}

var (
	scriptWaitForNode = shadowScript("wait-for-node.sh")
	scriptForward     = shadowScript("ssh-forward.sh")
	scriptExecRelay   = shadowScript("exec-relay.sh")
	scriptKerberos    = shadowScript("kerberos.sh")
)

// commonFunctions are the functions of scripts/common.sh, after its own header.
var commonFunctions = func() string {
	_, body, _ := strings.Cut(string(mustRead("common.sh")), "\n\n")
	return body
}()

// shadowScript is a script the shadow runs, with the common functions put in after its header
// comment, so the rendered script still opens with what it is.
func shadowScript(name string) script {
	s := mustScript(name)
	header := 0
	for rest := s.text; strings.HasPrefix(rest, "#"); {
		line, after, ok := strings.Cut(rest, "\n")
		if !ok {
			break
		}
		header += len(line) + 1
		rest = after
	}
	s.text = s.text[:header] + "\n" + commonFunctions + "\n" + s.text[header:]
	return s
}

// mustScript is a script as it is in scripts/: reverse-node.sh, which travels to the compute
// node on its own.
func mustScript(name string) script {
	text := string(mustRead(name))
	first, _, _ := strings.Cut(text, "\n")
	shell, ok := strings.CutPrefix(first, "#!")
	if !ok {
		panic("scripts/" + name + " has no #! line")
	}
	return script{name: name, shell: shell, text: text}
}

func mustRead(name string) []byte {
	data, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded at build time: only a typo in the name gets here
	}
	return data
}
