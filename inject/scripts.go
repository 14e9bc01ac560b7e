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
	scriptWaitForNode = mustScript("wait-for-node.sh")
	scriptForward     = mustScript("ssh-forward.sh")
	scriptExecRelay   = mustScript("exec-relay.sh")
	scriptKerberos    = mustScript("kerberos.sh")
)

func mustScript(name string) script {
	data, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded at build time: only a typo in the name gets here
	}
	text := string(data)
	first, _, _ := strings.Cut(text, "\n")
	shell, ok := strings.CutPrefix(first, "#!")
	if !ok {
		panic("scripts/" + name + " has no #! line")
	}
	return script{name: name, shell: shell, text: text}
}
