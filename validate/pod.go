package validate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Decision is the verdict on one object: refused when Errors is not empty. Warnings are shown
// to the user either way.
type Decision struct {
	Errors   field.ErrorList
	Warnings []string
}

// Allowed reports whether the object is admitted.
func (d *Decision) Allowed() bool { return len(d.Errors) == 0 }

func (d *Decision) warn(format string, args ...any) {
	d.Warnings = append(d.Warnings, fmt.Sprintf(format, args...))
}

// Offload is what a pod placed on a listed virtual node asks of it, parsed from its annotations.
type Offload struct {
	NodeName      string
	Namespace     string // the pod's
	Node          policy.VirtualNode
	Forwards      []Forward
	SocksPort     int
	Bind          netip.Addr // zero when the annotation is absent
	SameNamespace bool
	ExtraPorts    []ExtraPort
	PodVPN        bool
	// FrontDoorPorts are the ports interlink.eu/front-door-ports publishes; nil without it,
	// when every forwarded port is.
	FrontDoorPorts []int32
}

// WantsReverse reports whether the pod asks for the reverse tunnel.
func (o *Offload) WantsReverse() bool { return len(o.Forwards) > 0 || o.SocksPort > 0 }

// Paths locate a pod's metadata and spec in the object being judged: a Pod's own, or a
// workload's template.
type Paths struct {
	Meta, Spec *field.Path
	// Template is set for a workload's pod template, whose annotations every pod created from
	// it gets as they are.
	Template bool
}

// NotPlacedWarning follows the field path of a reverse annotation in the warning about a pod
// placed on no virtual node of the policy: only shadowgate gives it, so `shadowgate check
// install` knows shadowgate judged its probe by it.
const NotPlacedWarning = "is ignored: the pod is not placed on a virtual node listed in shadowgate's policy"

// PodPaths are the paths of a Pod.
var PodPaths = Paths{Meta: field.NewPath("metadata"), Spec: field.NewPath("spec")}

// Pod judges a Pod by every rule: its annotations and placement under the policy, and the
// credential rules. The Offload is nil when the pod belongs to no listed virtual node.
func Pod(pod *corev1.Pod, cfg Config) (*Offload, Decision) {
	return judgePodSpec(&pod.ObjectMeta, &pod.Spec, pod.Namespace, cfg, PodPaths)
}

// judgePodSpec judges a pod's metadata and spec as Pod does, reporting errors at the given paths,
// and returns what the pod asks of its virtual node.
func judgePodSpec(meta *metav1.ObjectMeta, spec *corev1.PodSpec, namespace string, cfg Config, at Paths) (*Offload, Decision) {
	o, d := podSpec(meta, spec, namespace, cfg.Policy, at)
	if o != nil && !namespaceAllowed(&o.Node, namespace, cfg.NamespaceLabels) {
		d.Errors = append(d.Errors, namespaceRefusal(o, spec, at))
	}
	d.Errors = append(d.Errors, cfg.Credentials.secretInPodNamespace(o, namespace, at)...)
	return o, d
}

func podSpec(meta *metav1.ObjectMeta, spec *corev1.PodSpec, namespace string, pol *policy.Policy, at Paths) (*Offload, Decision) {
	var d Decision
	annPath := at.Meta.Child("annotations")
	if size := annotationsSize(meta.Annotations); size > maxAnnotationsBytes {
		// Judged before anything else is read: nothing of such a pod is parsed.
		d.Errors = append(d.Errors, tooLong(annPath, size, maxAnnotationsBytes,
			"the API server refuses such a pod too; keep large data out of annotations, in a ConfigMap or a file the job reads"))
		return nil, d
	}
	nodeName, placed := VirtualNodeFor(spec, pol)
	if !placed {
		for _, key := range reverseKeys(meta.Annotations) {
			d.warn("%s %s (%s)", annPath.Key(key), NotPlacedWarning, strings.Join(pol.NodeNames(), ", "))
		}
		return nil, d
	}
	if n := len(meta.Annotations); n > maxAnnotations {
		d.Errors = append(d.Errors, tooMany(annPath, n, maxAnnotations,
			"its shadow would carry them all; keep data out of annotations, in a ConfigMap or a file the job reads"))
		return nil, d
	}
	o := &Offload{NodeName: nodeName, Namespace: namespace, Node: pol.VirtualNodes[nodeName]}
	ann := meta.Annotations
	for _, key := range reverseKeys(ann) {
		if why, removed := removedAnnotations[key]; removed {
			d.warn("%s is ignored: %s; remove the annotation", annPath.Key(key), why)
		} else if isReverseKey(key) && !slices.Contains(reverseRequest, key) {
			d.Errors = append(d.Errors, field.NotSupported(annPath.Key(key), key, knownReverseAnnotations))
		}
	}
	d.Errors = append(d.Errors, containerPorts(spec, at.Spec)...)
	o.parseAnnotations(ann, namespace, annPath, &d)
	if v, ok := ann[AnnotationFrontDoorPorts]; ok {
		d.Errors = append(d.Errors, o.parseFrontDoorPorts(v, spec, at)...)
	} else if o.Node.Network.HasFrontDoor() {
		d.Errors = append(d.Errors, o.publishedPortsBound(spec, at)...)
	}
	o.judgeReverse(ann, at, &d)
	if o.Node.Network.SSHShadow() && o.Node.Network.EnableTunnel && !o.PodVPN {
		warnSkippedPorts(spec, o.ExtraPorts, at.Spec, annPath, &d)
	}
	if o.Node.Network.SSHShadow() && !o.PodVPN {
		d.Errors = append(d.Errors, validateRunAsUser(spec, nodeName, &o.Node, at.Spec)...)
	}
	return o, d
}

// validateRunAsUser refuses a pod-level runAsUser on a virtual node whose pods have an SSH
// shadow: interLink's Slurm plugin submits the pod's job with sbatch --uid=<runAsUser>, so the
// job would run as an account the pod chose rather than the node's one site account, and the
// shadow, logged in as SSH.User, would never find it (squeue --me).
func validateRunAsUser(spec *corev1.PodSpec, node string, n *policy.VirtualNode, specPath *field.Path) field.ErrorList {
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsUser == nil {
		return nil
	}
	user := n.Network.SSH.User
	uid := *spec.SecurityContext.RunAsUser
	return field.ErrorList{field.Invalid(specPath.Child("securityContext", "runAsUser"), uid, fmt.Sprintf(
		"interLink's Slurm plugin would submit the pod's job with sbatch --uid=%d, as an account the pod chooses; "+
			"every pod of virtual node %s runs its job as the node's site account %s, whose shadow finds the job with squeue --me: remove runAsUser from the pod's securityContext",
		uid, node, user))}
}

// isReverseKey reports whether an annotation key is one of interlink.eu/reverse-*, or a case
// variant of one: annotation keys are case-sensitive, so interlink.eu/Reverse-Forwards would
// otherwise be ignored, and the pod run without the tunnel its author meant to ask for.
func isReverseKey(key string) bool {
	return len(key) >= len(reversePrefix) && strings.EqualFold(key[:len(reversePrefix)], reversePrefix)
}

// reverseKeys are the keys of ann that isReverseKey, in order. Only they are sorted: a pod can
// carry thousands of other annotations.
func reverseKeys(ann map[string]string) []string {
	var keys []string
	for key := range ann {
		if isReverseKey(key) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

func (o *Offload) parseAnnotations(ann map[string]string, namespace string, annPath *field.Path, d *Decision) {
	var errs field.ErrorList
	if v, ok := ann[AnnotationReverseForwards]; ok {
		o.Forwards, errs = ParseForwards(v, namespace, annPath.Key(AnnotationReverseForwards))
		d.Errors = append(d.Errors, errs...)
		if o.Node.Network.ReverseEnabled() {
			d.Errors = append(d.Errors, o.refusedDestinations(annPath.Key(AnnotationReverseForwards))...)
		}
	}
	if v, ok := ann[AnnotationReverseSocksPort]; ok {
		o.SocksPort, errs = parseSocksPort(v, annPath.Key(AnnotationReverseSocksPort))
		d.Errors = append(d.Errors, errs...)
		for _, f := range o.Forwards {
			if f.ListenPort == o.SocksPort {
				d.Errors = append(d.Errors, field.Invalid(annPath.Key(AnnotationReverseSocksPort), v, fmt.Sprintf(
					"port %d is also a listen port of %s; give the SOCKS proxy a port of its own", o.SocksPort, AnnotationReverseForwards)))
			}
		}
	}
	if v, ok := ann[AnnotationReverseBind]; ok {
		o.Bind, errs = ParseBind(v, annPath.Key(AnnotationReverseBind))
		d.Errors = append(d.Errors, errs...)
	}
	if v, ok := ann[AnnotationShadowSameNS]; ok {
		if v != "true" && v != "false" {
			d.Errors = append(d.Errors, field.NotSupported(annPath.Key(AnnotationShadowSameNS), v, []string{"true", "false"}))
		}
		o.SameNamespace = v == "true"
	}
	if v, ok := ann[AnnotationExtraPorts]; ok {
		o.ExtraPorts, errs = parseExtraPorts(v, annPath.Key(AnnotationExtraPorts))
		d.Errors = append(d.Errors, errs...)
	}
	if v, ok := ann[AnnotationPodVPN]; ok {
		// The virtual kubelet turns the VPN on, and the shadow off, for the annotation
		// whatever its value.
		o.PodVPN = true
		if v := strings.ToLower(strings.TrimSpace(v)); v == "false" || v == "no" || v == "0" || v == "" {
			d.warn("%s: %q still turns the pod VPN on and its shadow off: the virtual kubelet reads the annotation's presence, not its value; remove the annotation to keep the shadow",
				annPath.Key(AnnotationPodVPN), ann[AnnotationPodVPN])
		}
	}
}

// judgeReverse refuses a reverse tunnel the pod would run without: a pod never starts
// without the tunnel it asked for.
func (o *Offload) judgeReverse(ann map[string]string, at Paths, d *Decision) {
	annPath := at.Meta.Child("annotations")
	network := &o.Node.Network
	for _, key := range reverseRequest {
		if _, ok := ann[key]; !ok {
			continue
		}
		switch {
		case o.PodVPN:
			d.Errors = append(d.Errors, field.Forbidden(annPath.Key(key), fmt.Sprintf(
				"cannot be combined with %s, which disables the shadow that carries the reverse tunnel; remove one of the two", AnnotationPodVPN)))
		case !network.ReverseEnabled():
			d.Errors = append(d.Errors, field.Forbidden(annPath.Key(key), fmt.Sprintf(
				"virtual node %s does not offer the reverse tunnel (%s); ask the cluster admin to set Network.EnableTunnel: true, Network.ShadowMode: ssh and Network.SSH.Reverse.Enabled: true for it, or remove the annotation",
				o.NodeName, reverseOffWhy(network))))
		case key == AnnotationReverseSocksPort && !network.SSH.Reverse.AllowSocks:
			d.Errors = append(d.Errors, field.Forbidden(annPath.Key(key), fmt.Sprintf(
				"virtual node %s does not allow SOCKS proxies (Reverse.AllowSocks is false): the proxy would be open to every user of the compute node; list the endpoints you need in %s instead",
				o.NodeName, AnnotationReverseForwards)))
		case key == AnnotationReverseSocksPort && o.SocksPort > 0:
			d.warn("%s: the SOCKS5 proxy on port %s listens on the compute node's loopback and every user of that node can use it; declare what you can in %s and keep SOCKS for the rest",
				annPath.Key(key), ann[key], AnnotationReverseForwards)
		case key == AnnotationReverseBind && !o.WantsReverse():
			d.warn("%s is ignored: the pod asks for no reverse forward or SOCKS proxy", annPath.Key(key))
		case key == AnnotationReverseBind && at.Template && o.Bind.IsValid():
			d.warn("%s is set in a pod template, so every pod created from it gets %s: two of them on one compute node collide, and the second job stops with \"another job of yours holds %[2]s\"; remove the annotation and shadowgate chooses an address for each pod",
				annPath.Key(key), ann[key])
		}
	}
}

func reverseOffWhy(n *policy.Network) string {
	switch {
	case !n.SSHShadow():
		return "its ShadowMode is " + n.ShadowMode + ", not ssh"
	case !n.EnableTunnel:
		return "its EnableTunnel is false"
	}
	return "Reverse.Enabled is false"
}

// containerPorts refuses a container port outside 1-65535 on an offloaded pod: the shadow
// forwards each one, and `shadowgate check`, unlike the API server, would otherwise admit it.
func containerPorts(spec *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if port.ContainerPort < 1 || port.ContainerPort > 65535 {
				errs = append(errs, field.Invalid(specPath.Child("containers").Index(i).Child("ports").Index(j).Child("containerPort"),
					port.ContainerPort, "must be a port between 1 and 65535: the shadow forwards it to the compute node"))
			}
		}
	}
	return errs
}

// warnSkippedPorts names the ports the SSH shadow cannot carry.
func warnSkippedPorts(spec *corev1.PodSpec, extra []ExtraPort, specPath, annPath *field.Path, d *Decision) {
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
				d.warn("%s: container %q port %d/%s is skipped: the SSH shadow carries TCP only",
					specPath.Child("containers").Index(i).Child("ports").Index(j), c.Name, port.ContainerPort, port.Protocol)
			}
		}
	}
	for _, port := range extra {
		if port.Protocol != corev1.ProtocolTCP {
			d.warn("%s: port %d/%s is skipped: the SSH shadow carries TCP only", annPath.Key(AnnotationExtraPorts), port.Port, port.Protocol)
		}
	}
}
