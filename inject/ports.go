package inject

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
)

// shadowPort is one TCP port the shadow forwards: the same number on the Service, in the
// shadow pod and on the compute node.
type shadowPort struct {
	Name string
	Port int32
}

// forwardedPorts are the pod's TCP container ports, then those of its native sidecars (init
// containers with restartPolicy: Always, which run beside the workload for the life of the
// pod), then those of interlink.eu/wstunnel-extra-ports, each once; none without EnableTunnel.
// UDP ports are left out (validate.Pod has warned about the containers' and the annotation's;
// the sidecars' are warned about here). A port unnamed in the pod is named port-<number>, as
// the virtual kubelet names it, so a Service port a site refers to by name keeps its name. The
// ports of an ordinary init container are not forwarded: it has exited before the workload
// starts, so nothing would answer on them (the VK forwards them).
func forwardedPorts(pod *corev1.Pod, o *validate.Offload) ([]shadowPort, []string) {
	if !o.Node.Network.EnableTunnel {
		return nil, nil
	}
	var (
		ports    []shadowPort
		warnings []string
		seen     = map[int32]*field.Path{}
		names    = map[string]bool{}
	)
	add := func(name string, port int32, at *field.Path) {
		if first, dup := seen[port]; dup {
			warnings = append(warnings, fmt.Sprintf("%s: port %d is also %s; the shadow forwards it once", at, port, first))
			return
		}
		seen[port] = at
		// A Service needs unique port names; an unnamed or repeated name gets one from the number.
		for i := 1; name == "" || names[name] || len(validation.IsValidPortName(name)) > 0; i++ {
			name = "port-" + strconv.Itoa(int(port))
			if i > 1 {
				name += "-" + strconv.Itoa(i)
			}
		}
		names[name] = true
		ports = append(ports, shadowPort{Name: name, Port: port})
	}
	for _, p := range validate.PodPorts(&pod.Spec, o.ExtraPorts, validate.PodPaths) {
		switch {
		case p.TCP():
			add(p.Name, p.Port, p.At)
		case p.Sidecar != "":
			// validate.Pod warns of the containers' and the annotation's, not the sidecars'.
			warnings = append(warnings, fmt.Sprintf("%s: sidecar %q port %d/%s is skipped: the SSH shadow carries TCP only", p.At, p.Sidecar, p.Port, p.Protocol))
		}
	}
	return ports, warnings
}
