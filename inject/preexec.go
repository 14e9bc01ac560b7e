package inject

import (
	_ "embed"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/interlink-hq/shadowgate/validate"
)

// The marker lines around the snippet in slurm-job.vk.io/pre-exec: prepare finds its own
// block by them, so it is prepended exactly once however often the webhook is invoked.
const (
	markerBegin = "# >>> shadowgate: reverse tunnel (added by the admission webhook; do not edit) >>>"
	markerEnd   = "# <<< shadowgate: reverse tunnel <<<"
	// snippetCall is the snippet's function; its one call ends the block.
	snippetCall = "shadowgate_reverse_tunnel"
)

var (
	//go:embed scripts/reverse-preexec.sh
	preExecFunctions string
	//go:embed relay/relay.py
	relayPy string
)

// preExecBody is the constant part of the snippet: the functions after the file's
// markerPreExecBegin line, with the relay's source in place of its markerRelayInsert line,
// in a quoted here-document so the shell expands nothing in it.
var preExecBody = splice("scripts/reverse-preexec.sh",
	after("scripts/reverse-preexec.sh", preExecFunctions, markerPreExecBegin),
	markerRelayInsert, relayPy)

// shellWord matches values that can stand between single quotes as they are. Everything the
// snippet is called with has been validated to this already; a value that is not is refused,
// never escaped.
var shellWord = regexp.MustCompile(`^[A-Za-z0-9._/+:,-]*$`)

// preExec renders the snippet for a pod whose relay listens on bind: the constant functions,
// then one call whose arguments are the validated values, each single-quoted.
func preExec(o *validate.Offload, bind netip.Addr) (string, error) {
	ports := make([]string, 0, len(o.Forwards))
	var names []string
	for _, f := range o.Forwards {
		ports = append(ports, strconv.Itoa(f.ListenPort))
		if hostsName(f.Host) && !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, f.Host) }) {
			names = append(names, f.Host)
		}
	}
	socks := ""
	if o.SocksPort > 0 {
		socks = strconv.Itoa(o.SocksPort)
	}
	args := []string{bind.String(), o.Node.Network.SSH.Reverse.PythonPath,
		strings.Join(ports, ","), socks, strings.Join(names, ",")}
	quoted := make([]string, len(args))
	for i, a := range args {
		if !shellWord.MatchString(a) {
			return "", fmt.Errorf("%q cannot be passed to the job's shell", a)
		}
		quoted[i] = "'" + a + "'"
	}
	return markerBegin + "\n" + preExecBody +
		snippetCall + " " + strings.Join(quoted, " ") + " || exit 1\n" +
		markerEnd + "\n", nil
}

// hostsName reports whether /etc/hosts can send a forward's host to the relay: an IP literal
// is not a name, and mapping localhost would take the job's own loopback services away.
func hostsName(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	return !strings.EqualFold(host, "localhost")
}
