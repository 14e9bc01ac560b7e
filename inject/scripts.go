package inject

import (
	"embed"
	"fmt"
	"strings"
)

// The shadow's scripts are constant text: every value reaches them through the container's
// environment, so none is ever spliced into a script. What is spliced is other embedded text,
// at marker lines that each must appear exactly once (splice, after): a marker that is
// missing or doubled stops the program at start, naming the file and the marker, rather than
// render a script without its functions.
//
// Names in the scripts: SHADOW_* is the environment a script reads, set by the Deployment or
// by the script that starts it; lower-case names are a script's own. The pre-exec snippet
// runs in the job's shell, beside the job's own names, so its variables start sg_rev_ and
// its functions shadowgate_reverse_.
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

// The marker lines of scripts/ (TestScriptMarkers holds every file to the ones it has).
const (
	// markerCommonBegin is the line of common.sh after which its shared functions start.
	markerCommonBegin = "# --- shadowgate: begin common ---"
	// markerCommonInsert is the line of a script the shadow runs that the functions replace.
	markerCommonInsert = "# --- shadowgate: insert common ---"
	// markerPreExecBegin is the line of reverse-preexec.sh after which the snippet starts.
	markerPreExecBegin = "# --- shadowgate: begin pre-exec ---"
	// markerRelayInsert is the line of reverse-preexec.sh that relay/relay.py replaces.
	markerRelayInsert = "@RELAY@"
)

// script is one embedded script and the shell named by its #! line.
type script struct {
	name, shell, text string
}

var (
	scriptWaitForNode = shadowScript("wait-for-node.sh")
	scriptForward     = shadowScript("ssh-forward.sh")
	scriptExecRelay   = mustScript("exec-relay.sh")
	scriptKerberos    = shadowScript("kerberos.sh")
	scriptWaitReason  = mustScript("wait-reason.sh")
)

// commonFunctions are the functions of scripts/common.sh, after its markerCommonBegin line,
// without their comments (shellWithoutComments): spliced into five scripts, with them they would
// bring the scripts ConfigMap past the 256 KiB that `kubectl apply` keeps of an object in its
// last-applied annotation (TestTheScriptsConfigMapCanBeAppliedByKubectl).
var commonFunctions = shellWithoutComments("scripts/common.sh", after("scripts/common.sh", string(mustRead("common.sh")), markerCommonBegin))

// shadowScript is a script the shadow runs, with the common functions in place of its
// markerCommonInsert line, which follows its header comment, so the rendered script still
// opens with what it is.
func shadowScript(name string) script {
	s := mustScript(name)
	s.text = splice("scripts/"+name, s.text, markerCommonInsert, commonFunctions)
	return s
}

// mustScript is a script as it is in scripts/: reverse-node.sh, which travels to the compute
// node on its own.
func mustScript(name string) script {
	text := string(mustRead(name))
	first, _, _ := strings.Cut(text, "\n")
	shell, ok := strings.CutPrefix(first, "#!")
	if !ok {
		panic("inject: scripts/" + name + " has no #! line")
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

// splice returns text with its one line that is exactly marker replaced by insert, a whole
// number of lines; file names text in the panic when there is not exactly one such line.
func splice(file, text, marker, insert string) string {
	if insert == "" || !strings.HasSuffix(insert, "\n") {
		panic(fmt.Sprintf("inject: the text for marker line %q of %s does not end in a newline", marker, file))
	}
	start, end := markerLine(file, text, marker)
	return text[:start] + insert + text[end:]
}

// after returns what follows the one line of text that is exactly marker.
func after(file, text, marker string) string {
	_, end := markerLine(file, text, marker)
	return text[end:]
}

// markerLine returns where the one line of text that is exactly marker starts, and where the
// line after it does; it panics, naming file and marker, unless there is exactly one.
func markerLine(file, text, marker string) (start, end int) {
	found := 0
	for i := 0; i < len(text); {
		line, next := text[i:], len(text)
		if n := strings.IndexByte(line, '\n'); n >= 0 {
			line, next = line[:n], i+n+1
		}
		if line == marker {
			found++
			start, end = i, next
		}
		i = next
	}
	switch {
	case found != 1:
		panic(fmt.Sprintf("inject: %s has %d lines %q, want exactly one", file, found, marker))
	case !strings.HasSuffix(text[:end], "\n"):
		panic(fmt.Sprintf("inject: %s ends in its line %q, which needs a newline after it", file, marker))
	}
	return start, end
}
