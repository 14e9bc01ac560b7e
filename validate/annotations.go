package validate

// Annotations read or written by shadowgate (DESIGN.md "Annotations").
const (
	AnnotationReverseForwards  = "interlink.eu/reverse-forwards"
	AnnotationReverseSocksPort = "interlink.eu/reverse-socks-port"
	AnnotationReverseBind      = "interlink.eu/reverse-bind"
	AnnotationPodVPN           = "interlink.eu/pod-vpn"
	AnnotationShadowSameNS     = "interlink.eu/shadow-same-ns"
	AnnotationExtraPorts       = "interlink.eu/wstunnel-extra-ports"
	AnnotationPreExec          = "slurm-job.vk.io/pre-exec"
	AnnotationReplicatedFrom   = "interlink.eu/replicated-from"
	// AnnotationFrontDoorPorts, on a pod of a virtual node with a front door, lists the ports
	// published outside the cluster, separated by spaces or commas, or is FrontDoorNone; without
	// it every port the shadow forwards is.
	AnnotationFrontDoorPorts = "interlink.eu/front-door-ports"
	// FrontDoorNone as AnnotationFrontDoorPorts publishes no port of the pod.
	FrontDoorNone = "none"

	// Removed before release: pods carrying them are admitted with a warning.
	AnnotationReverseOwnerOnly = "interlink.eu/reverse-owner-only"
	AnnotationReverseNodeExec  = "interlink.eu/reverse-node-exec"

	reversePrefix = "interlink.eu/reverse-"
)

// Placement keys: how a pod names its virtual node.
const (
	LabelHostname         = "kubernetes.io/hostname"
	TolerationVirtualNode = "virtual-node.interlink/no-schedule"
)

// reverseRequest lists the annotations that ask for the reverse tunnel, in report order.
var reverseRequest = []string{AnnotationReverseForwards, AnnotationReverseSocksPort, AnnotationReverseBind}

// knownReverseAnnotations are every interlink.eu/reverse-* annotation there is; any other is a typo.
var knownReverseAnnotations = []string{AnnotationReverseForwards, AnnotationReverseSocksPort, AnnotationReverseBind,
	AnnotationReverseOwnerOnly, AnnotationReverseNodeExec}

// removedAnnotations says why each removed annotation no longer does anything.
var removedAnnotations = map[string]string{
	AnnotationReverseOwnerOnly: "forwards are always owner-only now",
	AnnotationReverseNodeExec:  "the site's policy (Reverse.NodeExec) decides how the compute node is reached",
}
