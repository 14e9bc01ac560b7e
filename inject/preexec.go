package inject

import (
	_ "embed"
	"fmt"
	"net/netip"
	"regexp"
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
// in a quoted here-document so the shell expands nothing in it; both without what only a
// reader of the source needs (minifiedShell, pythonWithoutDocs).
var preExecBody = splice("scripts/reverse-preexec.sh",
	minifiedShell("scripts/reverse-preexec.sh", after("scripts/reverse-preexec.sh", preExecFunctions, markerPreExecBegin)),
	markerRelayInsert, carriedRelay)

// carriedRelay is the relay as the snippet carries it, without its docstrings.
var carriedRelay = pythonWithoutDocs("relay/relay.py", relayPy)

// shellWord matches values that can stand between single quotes as they are. Everything the
// snippet is called with has been validated to this already; a value that is not is refused,
// never escaped.
var shellWord = regexp.MustCompile(`^[A-Za-z0-9._/+:,-]*$`)

// preExec renders the snippet for a pod whose relay listens on bind: the constant functions,
// then one call whose arguments are the validated values, each single-quoted.
func preExec(o *validate.Offload, bind netip.Addr) (string, error) {
	ports := make([]string, 0, len(o.Forwards))
	var names []string
	seen := map[string]bool{} // lower case: /etc/hosts matches names in any case
	for _, f := range o.Forwards {
		ports = append(ports, strconv.Itoa(f.ListenPort))
		if !hostsName(f.Host) {
			continue
		}
		for _, name := range hostsNames(f.Host, o.Namespace) {
			if key := strings.ToLower(name); !seen[key] {
				seen[key] = true
				names = append(names, name)
			}
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

// SocketRootProbe is a script for sh that chooses the socket directory's root as the snippet
// does in the job (shadowgate_reverse_root, for the longest bind address), with
// INTERLINK_SOCKET_DIR_ROOT set to root, empty for none, and prints the snippet's line saying
// which root it is, or why there is none. root must be a shellWord.
func SocketRootProbe(root string) (string, error) {
	if !shellWord.MatchString(root) {
		return "", fmt.Errorf("%q cannot be passed to the job's shell", root)
	}
	return "INTERLINK_SOCKET_DIR_ROOT='" + root + "'\n" + preExecBody + "shadowgate_reverse_root 127.254.254.254\n", nil
}

// hostsNames are the names /etc/hosts sends to the relay for a forward's host: the host, and
// for a Service's full name <svc>.<ns>.svc.cluster.local the shorter names cluster DNS
// would also resolve from a pod, <svc>.<ns>.svc and <svc>.<ns>, and <svc> when <ns> is the
// pod's own namespace, as the virtual kubelet maps them. A node has no cluster DNS, so a
// workload configured with a short name would otherwise fail there.
func hostsNames(host, namespace string) []string {
	names := []string{host}
	labels := strings.Split(host, ".")
	if len(labels) != 5 || !strings.EqualFold(strings.Join(labels[2:], "."), "svc.cluster.local") {
		return names
	}
	svc, ns := labels[0], labels[1]
	names = append(names, svc+"."+ns+".svc", svc+"."+ns)
	if strings.EqualFold(ns, namespace) {
		names = append(names, svc)
	}
	return names
}

// hostsName reports whether /etc/hosts can send a forward's host to the relay: an IP literal
// is not a name, and mapping localhost would take the job's own loopback services away.
func hostsName(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	return !strings.EqualFold(host, "localhost")
}
