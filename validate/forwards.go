package validate

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// minUnprivilegedPort is the lowest port the unprivileged sshd on the compute node can bind.
const minUnprivilegedPort = 1024

// Forward is one endpoint of interlink.eu/reverse-forwards.
type Forward struct {
	// ListenPort is the port the job connects to on the bind address.
	ListenPort int
	// Host is the name the job uses; /etc/hosts maps it to the bind address.
	Host string
	// Port is the port dialled inside the cluster.
	Port int
	// DialHost is what the shadow dials: Host, or Host.<pod namespace> for a bare Service name,
	// since the shadow usually runs in another namespace.
	DialHost string
	// Entry is the annotation's entry this endpoint was parsed from, for messages.
	Entry string
}

// bracketed matches an endpoint whose host is an IPv6 literal: [listen:][addr]:port.
var bracketed = regexp.MustCompile(`^(?:([^:\[\]]+):)?\[([^\[\]]*)\]:([^:\[\]]*)$`)

// ParseForwards parses interlink.eu/reverse-forwards: space-separated host:port or
// listen-port:host:port entries. Every bad entry is reported, each naming the entry.
func ParseForwards(value, namespace string, p *field.Path) ([]Forward, field.ErrorList) {
	const instead = "list only the endpoints the job needs, or use the SOCKS proxy (interlink.eu/reverse-socks-port) where the site allows it"
	if len(value) > maxForwardsBytes {
		return nil, field.ErrorList{tooLong(p, len(value), maxForwardsBytes, instead)}
	}
	entries := strings.Fields(value)
	switch {
	case len(entries) == 0:
		return nil, field.ErrorList{field.Invalid(p, value,
			"lists no endpoint; give space-separated host:port or listen-port:host:port entries, or remove the annotation")}
	case len(entries) > maxForwards:
		return nil, field.ErrorList{tooMany(p, len(entries), maxForwards, instead)}
	}
	var (
		forwards []Forward
		errs     field.ErrorList
		seen     = map[int]string{}
		// free is where the search for a free listen port to suggest resumes: every port
		// below it is taken, so all suggestions together cost one pass.
		free = suggestFrom
	)
	for i, entry := range entries {
		if len(errs) >= maxErrorsPerValue {
			errs = append(errs, stopped(p, i, len(entries)))
			break
		}
		f, entryErrs := parseForward(entry, namespace, p)
		if len(entryErrs) > 0 {
			errs = append(errs, entryErrs...)
			continue
		}
		if first, dup := seen[f.ListenPort]; dup {
			for _, taken := seen[free]; taken; _, taken = seen[free] {
				free++
			}
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf(
				"listen port %d is already taken by %q; give this endpoint another listen port, as in %d:%s:%d",
				f.ListenPort, first, free, f.Host, f.Port)))
			free++ // the next endpoint over a taken port gets another suggestion
			continue
		}
		seen[f.ListenPort] = entry
		forwards = append(forwards, f)
	}
	return forwards, errs
}

func parseForward(entry, namespace string, p *field.Path) (Forward, field.ErrorList) {
	var listen, host, port string
	if m := bracketed.FindStringSubmatch(entry); m != nil {
		listen, host, port = m[1], m[2], m[3]
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return Forward{}, field.ErrorList{field.Invalid(p, entry, "brackets are only for an IPv6 address, as in [fd00::1]:8080")}
		}
	} else {
		parts := strings.Split(entry, ":")
		switch len(parts) {
		case 2:
			host, port = parts[0], parts[1]
		case 3:
			listen, host, port = parts[0], parts[1], parts[2]
		default:
			return Forward{}, field.ErrorList{field.Invalid(p, entry,
				"each entry is host:port or listen-port:host:port (an IPv6 address in brackets)")}
		}
	}
	var errs field.ErrorList
	if why := hostProblem(host); why != "" {
		errs = append(errs, field.Invalid(p, entry, why))
	}
	portNum, why := parsePort(port)
	if why != "" {
		errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port %q %s", port, why)))
	}
	listenNum := portNum
	if listen != "" {
		if listenNum, why = parsePort(listen); why != "" {
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("listen port %q %s", listen, why)))
		}
	}
	if len(errs) > 0 {
		return Forward{}, errs
	}
	if listenNum < minUnprivilegedPort {
		what := "listen port"
		if listen == "" {
			what = "port"
		}
		return Forward{}, field.ErrorList{field.Invalid(p, entry, fmt.Sprintf(
			"%s %d is below %d and cannot be bound by the unprivileged sshd on the compute node; give a listen port, as in %d:%s:%d, and connect to that port",
			what, listenNum, minUnprivilegedPort, suggestListen(portNum), host, portNum))}
	}
	return Forward{ListenPort: listenNum, Host: host, Port: portNum, DialHost: dialHost(host, namespace), Entry: entry}, nil
}

// hostProblem says what is wrong with a forward's host, or "": the shared host rule for a host
// the shadow dials.
func hostProblem(host string) string {
	if ok, why := syntax.Host(host, syntax.DialedByShadow); !ok {
		return fmt.Sprintf("host %q is %s; give a Service name such as minio.user.svc.cluster.local or a Service IP", host, why)
	}
	return ""
}

// dialHost qualifies a bare Service name with the pod's namespace: the shadow usually runs in
// <namespace>-shadow, where the bare name would resolve to another Service or to nothing.
func dialHost(host, namespace string) string {
	if strings.Contains(host, ".") || strings.EqualFold(host, "localhost") {
		return host
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	return host + "." + namespace
}

// parsePort accepts only decimal digits in 1-65535, so nothing else can ride along. It returns
// why s is not a port, or "".
func parsePort(s string) (int, string) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, "is not a port number"
	}
	n, _ := strconv.Atoi(s) // at most five digits: cannot overflow
	if n < 1 || n > 65535 {
		return 0, "is out of range 1-65535"
	}
	return n, ""
}

// suggestListen proposes an unprivileged listen port for a privileged Service port (443 -> 6443).
func suggestListen(port int) int {
	if port < minUnprivilegedPort {
		return port + 6000
	}
	return port
}

// suggestFrom is the first listen port suggested to an endpoint whose listen port is taken.
const suggestFrom = 10000
