package validate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ExtraPort is one entry of interlink.eu/wstunnel-extra-ports.
type ExtraPort struct {
	Port     int
	Name     string
	Protocol corev1.Protocol
}

// parseExtraPorts parses interlink.eu/wstunnel-extra-ports: comma-separated port[:name[:protocol]].
func parseExtraPorts(value string, p *field.Path) ([]ExtraPort, field.ErrorList) {
	const instead = "list only the ports the shadow must carry besides the containers' own"
	if len(value) > maxExtraPortsBytes {
		return nil, field.ErrorList{tooLong(p, len(value), maxExtraPortsBytes, instead)}
	}
	entries := strings.Split(value, ",")
	if len(entries) > maxExtraPorts {
		return nil, field.ErrorList{tooMany(p, len(entries), maxExtraPorts, instead)}
	}
	var (
		ports []ExtraPort
		errs  field.ErrorList
		seen  = map[string]bool{}
	)
	for i, raw := range entries {
		if len(errs) >= maxErrorsPerValue {
			errs = append(errs, stopped(p, i, len(entries)))
			break
		}
		entry := strings.TrimSpace(raw)
		parts := strings.Split(entry, ":")
		if len(parts) > 3 {
			errs = append(errs, field.Invalid(p, entry, "each entry is port[:name[:protocol]], as in 8080:http:TCP"))
			continue
		}
		port, why := parsePort(parts[0])
		if why != "" {
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port %q %s; each entry is port[:name[:protocol]]", parts[0], why)))
			continue
		}
		ep := ExtraPort{Port: port, Protocol: corev1.ProtocolTCP}
		if len(parts) > 1 && parts[1] != "" {
			ep.Name = parts[1]
			for _, msg := range validation.IsValidPortName(ep.Name) {
				errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port name %q: %s", ep.Name, msg)))
			}
		}
		if len(parts) > 2 {
			ep.Protocol = corev1.Protocol(strings.ToUpper(parts[2]))
			if ep.Protocol != corev1.ProtocolTCP && ep.Protocol != corev1.ProtocolUDP {
				errs = append(errs, field.NotSupported(p, parts[2], []string{"TCP", "UDP"}))
				continue
			}
		}
		key := fmt.Sprintf("%d/%s", ep.Port, ep.Protocol)
		if seen[key] {
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port %s is listed twice; list each port once", key)))
			continue
		}
		seen[key] = true
		ports = append(ports, ep)
	}
	return ports, errs
}
