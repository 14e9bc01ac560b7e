package validate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodPort is one port a pod declares: a container's, a native sidecar's (an init container
// with restartPolicy: Always), or an entry of interlink.eu/wstunnel-extra-ports, in that order.
type PodPort struct {
	Name     string
	Port     int32
	Protocol corev1.Protocol // "" is TCP
	// Sidecar is the native sidecar's name, for a sidecar's port.
	Sidecar string
	At      *field.Path
}

// TCP says whether the port carries TCP, the one protocol the SSH shadow forwards.
func (p PodPort) TCP() bool { return p.Protocol == "" || p.Protocol == corev1.ProtocolTCP }

// PodPorts are the ports spec and extra (o.ExtraPorts) declare, each at its path under at. The
// ports of an ordinary init container are not among them: it has exited before the workload
// starts, so nothing would answer on them.
func PodPorts(spec *corev1.PodSpec, extra []ExtraPort, at Paths) []PodPort {
	var ports []PodPort
	containers := at.Spec.Child("containers")
	for i, c := range spec.Containers {
		for j, p := range c.Ports {
			ports = append(ports, PodPort{Name: p.Name, Port: p.ContainerPort, Protocol: p.Protocol, At: containers.Index(i).Child("ports").Index(j)})
		}
	}
	initContainers := at.Spec.Child("initContainers")
	for i, c := range spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for j, p := range c.Ports {
			ports = append(ports, PodPort{Name: p.Name, Port: p.ContainerPort, Protocol: p.Protocol, Sidecar: c.Name, At: initContainers.Index(i).Child("ports").Index(j)})
		}
	}
	extraAt := at.Meta.Child("annotations").Key(AnnotationExtraPorts)
	for _, p := range extra {
		ports = append(ports, PodPort{Name: p.Name, Port: int32(p.Port), Protocol: p.Protocol, At: extraAt})
	}
	return ports
}

// parseFrontDoorPorts reads AnnotationFrontDoorPorts of a pod on o's node: FrontDoorNone, or
// each entry a TCP port the pod declares (PodPorts), once. A node without a front door refuses the annotation:
// the pod would believe its ports published.
func (o *Offload) parseFrontDoorPorts(value string, spec *corev1.PodSpec, at Paths) field.ErrorList {
	p := at.Meta.Child("annotations").Key(AnnotationFrontDoorPorts)
	if !o.Node.Network.HasFrontDoor() {
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"virtual node %s publishes no port outside the cluster: its policy has no front door (Network.WildcardDNS on an SSH shadow with EnableTunnel); remove the annotation, "+
				"and reach the pod through its shadow Service, or ask the cluster admin for a front door", o.NodeName))}
	}
	const instead = "list only the ports to publish, such as 8888"
	if len(value) > maxExtraPortsBytes {
		return field.ErrorList{tooLong(p, len(value), maxExtraPortsBytes, instead)}
	}
	if strings.TrimSpace(value) == FrontDoorNone {
		o.FrontDoorPorts = []int32{}
		return nil
	}
	entries := strings.Fields(strings.ReplaceAll(value, ",", " "))
	if len(entries) > maxExtraPorts {
		return field.ErrorList{tooMany(p, len(entries), maxExtraPorts, instead)}
	}
	if len(entries) == 0 {
		return field.ErrorList{field.Invalid(p, value, "lists no port: "+instead+", "+FrontDoorNone+" to publish none, or remove the annotation to publish every port the shadow forwards")}
	}
	tcp := tcpPorts(spec, o.ExtraPorts, at)
	var errs field.ErrorList
	for i, entry := range entries {
		if len(errs) >= maxErrorsPerValue {
			errs = append(errs, stopped(p, i, len(entries)))
			break
		}
		n, why := parsePort(entry)
		switch {
		case why != "":
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port %q %s; list port numbers, such as 8888", entry, why)))
		case !slices.Contains(tcp, int32(n)):
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf(
				"port %d is not a TCP port the pod declares (its containers', native sidecars' and %s's TCP ports: %s); publish one of those, or declare the port",
				n, AnnotationExtraPorts, portsList(tcp))))
		case slices.Contains(o.FrontDoorPorts, int32(n)):
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port %d is listed twice; list it once", n)))
		default:
			o.FrontDoorPorts = append(o.FrontDoorPorts, int32(n))
		}
	}
	return errs
}

// publishedPortsBound refuses a pod on o's node, which has a front door, that would publish
// more TCP ports than interlink.eu/front-door-ports may list: each is a host on one
// certificate and a URL of the pod's Tunnel, which holds at most that many.
func (o *Offload) publishedPortsBound(spec *corev1.PodSpec, at Paths) field.ErrorList {
	tcp := tcpPorts(spec, o.ExtraPorts, at)
	if len(tcp) <= maxExtraPorts {
		return nil
	}
	p := at.Meta.Child("annotations").Key(AnnotationFrontDoorPorts)
	e := field.TooMany(p, len(tcp), maxExtraPorts)
	e.Detail = fmt.Sprintf("the pod declares %d TCP ports and, without this annotation, would publish each, over the limit of %d; list here the ones to publish, such as 8888",
		len(tcp), maxExtraPorts)
	return field.ErrorList{e}
}

// tcpPorts are the distinct TCP port numbers of PodPorts.
func tcpPorts(spec *corev1.PodSpec, extra []ExtraPort, at Paths) []int32 {
	var tcp []int32
	for _, port := range PodPorts(spec, extra, at) {
		if port.TCP() && !slices.Contains(tcp, port.Port) {
			tcp = append(tcp, port.Port)
		}
	}
	return tcp
}

func portsList(ports []int32) string {
	if len(ports) == 0 {
		return "none"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}
