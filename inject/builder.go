package inject

import (
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// nobody is the shadow's user and group: it exists in every Debian-based image, and ssh
// refuses to run as a uid without a passwd entry. A uid the image does not name (OpenShift's
// restricted SCCs assign one) gets an entry from common.sh's any_uid.
const nobody = 65534

// builder assembles one pod's shadow. Containers that run ssh take their settings from it
// (sshContainer), so a new container gets the same login, options and mounts as ssh-forward.
type builder struct {
	pod           *corev1.Pod
	o             *validate.Offload
	ssh           *policy.SSH
	name          string // Deployment and Service
	namespaceName string
	ports         []shadowPort
	volumes       []corev1.Volume
}

func newBuilder(pod *corev1.Pod, o *validate.Offload, ports []shadowPort) *builder {
	return &builder{
		pod:           pod,
		o:             o,
		ssh:           &o.Node.Network.SSH,
		name:          ShadowName(pod.Name, pod.Namespace, o.SameNamespace),
		namespaceName: ShadowNamespace(pod.Namespace, o.SameNamespace),
		ports:         ports,
	}
}

// service fronts the forwarded ports under the shadow's name, so anything that can reach it
// reaches the offloaded pod.
func (b *builder) service() *corev1.Service {
	if len(b.ports) == 0 {
		return nil
	}
	ports := make([]corev1.ServicePort, 0, len(b.ports))
	for _, p := range b.ports {
		ports = append(ports, corev1.ServicePort{
			Name: p.Name, Protocol: corev1.ProtocolTCP, Port: p.Port, TargetPort: intstr.FromInt32(p.Port),
		})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: b.meta(b.name),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{labelShadow: b.name},
			Ports:    ports,
		},
	}
}

// deployment runs the shadow pod. Recreate, because two shadow pods would both claim to be
// the offloaded pod and open two tunnels to the login node.
func (b *builder) deployment() *appsv1.Deployment {
	spec := b.podSpec()
	podMeta := b.podMeta()
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: b.meta(b.name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelShadow: b.name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: spec},
		},
	}
}

// podMeta is the shadow pod's metadata: the offloaded pod's own labels and annotations, as the
// virtual kubelet copies them, so that NetworkPolicies, and mesh policies and injection, written
// for the workload select its shadow too; then shadowgate's labels, labelComponent (by which
// the VK looks the shadow pod up) and AnnotationShadowFor. shadowgate's own are written last
// and win over a pod's label of the same key: labelShadow is what the Deployment and Service
// select by, labelComponent what the VK finds the pod by, and LabelManagedBy and LabelPodUID
// what the reconciler tells a shadow and its pod by; a pod labelled, say,
// app.kubernetes.io/component: frontend, or managed-by Helm, must not change which pod a
// Service reaches or make its shadow look like nobody's. The VK lets its own labels win too.
// What the pod carries is read once, at admission: a label added later does not reach its
// shadow.
func (b *builder) podMeta() metav1.ObjectMeta {
	labels := maps.Clone(b.pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, b.labels())
	labels[labelShadow] = b.name
	labels[labelComponent] = b.name
	annotations := make(map[string]string, len(b.pod.Annotations)+1)
	for k, v := range b.pod.Annotations {
		if carriedToShadow(k) {
			annotations[k] = v
		}
	}
	annotations[AnnotationShadowFor] = b.pod.Namespace + "/" + b.pod.Name
	return metav1.ObjectMeta{Labels: labels, Annotations: annotations}
}

// carriedToShadow reports whether an annotation of the offloaded pod is copied to its shadow
// pod. Left out, as the virtual kubelet leaves them out:
//   - slurm-job.vk.io/*: the batch job's (flags, pre-exec with shadowgate's snippet), meaningless
//     to a pod in the cluster;
//   - sidecar.istio.io/status and sidecar.istio.io/rewriteAppHTTPProbers, which Istio's injector
//     wrote when it injected the offloaded pod: they describe that pod's proxy and probes, and
//     with the status one the injector takes the shadow pod for injected already and skips it.
//
// Left out by shadowgate alone:
//   - interlink.eu/*, what the pod asks of its offload (reverse forwards, shadow-same-ns,
//     pod-vpn, extra ports, the reverse-bind the webhook chose). They mean nothing to a shadow,
//     and on its template they would make the webhooks' matchConditions take every ReplicaSet
//     and pod of the shadow for an offloaded one: a call to shadowgate for each, and a shadow
//     that cannot be recreated while shadowgate is down;
//   - the AppArmor and seccomp annotations, which set the security of the pod's own
//     containers: the API server refuses a pod template whose AppArmor annotation names a
//     container it does not have, or whose seccomp annotation contradicts the RuntimeDefault
//     profile the shadow sets in its spec;
//   - kubectl.kubernetes.io/last-applied-configuration, kubectl's record of how the offloaded
//     pod was applied: on the shadow pod a false one, and up to the 256 KiB annotations may hold,
//     copied into the Deployment, each ReplicaSet and each pod.
func carriedToShadow(key string) bool {
	switch {
	case strings.HasPrefix(key, "slurm-job.vk.io/"), strings.HasPrefix(key, "interlink.eu/"):
		return false
	case key == "sidecar.istio.io/status", key == "sidecar.istio.io/rewriteAppHTTPProbers":
		return false
	case key == corev1.LastAppliedConfigAnnotation:
		return false
	case strings.HasPrefix(key, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix),
		strings.HasPrefix(key, corev1.SeccompContainerAnnotationKeyPrefix), key == corev1.SeccompPodAnnotationKey:
		return false
	}
	return true
}

// podSpec is a pod that passes the restricted Pod Security Standard: non-root, no privilege
// escalation, no capabilities, RuntimeDefault seccomp, and nothing from the API server.
func (b *builder) podSpec() corev1.PodSpec {
	b.addVolume(corev1.Volume{Name: volumeNode, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: NodeConfigMapName(b.name)},
	}}})
	b.addVolume(corev1.Volume{Name: volumeState, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi")),
	}}})
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](nobody),
			RunAsGroup:     ptr.To[int64](nobody),
			FSGroup:        ptr.To[int64](nobody),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		// Off the virtual node the shadow stands in for: ordinary nodes are kubernetes.io/os:
		// linux, a virtual kubelet's node is kubernetes.io/os: virtual-kubelet. The VK's own
		// shadow says the same.
		NodeSelector: map[string]string{corev1.LabelOSStable: string(corev1.Linux)},
	}
	// Asking Slurm for the node is a login too, which under Kerberos needs the ticket first.
	if b.ssh.Auth == policy.AuthKerberos && b.slurmDiscovery() {
		spec.InitContainers = append(spec.InitContainers, b.kinitContainer())
	}
	if b.slurmDiscovery() {
		spec.InitContainers = append(spec.InitContainers, b.waitReasonContainer())
	}
	spec.InitContainers = append(spec.InitContainers, b.waitForNodeContainer())
	if b.ssh.Auth == policy.AuthKerberos && !b.slurmDiscovery() {
		spec.InitContainers = append(spec.InitContainers, b.kinitContainer())
	}
	if len(b.ports) > 0 {
		spec.Containers = append(spec.Containers, b.forwardContainer())
		spec.SecurityContext.Sysctls = b.lowPortSysctl()
	}
	if b.ssh.Auth == policy.AuthKerberos {
		spec.Containers = append(spec.Containers, b.krbRefreshContainer())
	}
	if b.o.WantsReverse() {
		spec.Containers = append(spec.Containers, b.reverseContainer())
	}
	spec.Volumes = b.volumes
	return spec
}

// lowPortSysctl lets the shadow's user listen on the lowest forwarded port when it is below
// 1024, which a non-root user may not bind otherwise: net.ipv4.ip_unprivileged_port_start,
// a sysctl of the pod's own network namespace, which the kubelet allows by default and the
// restricted Pod Security Standard admits. Nil when every port is 1024 or above.
func (b *builder) lowPortSysctl() []corev1.Sysctl {
	lowest := int32(unprivilegedPortStart)
	for _, p := range b.ports {
		lowest = min(lowest, p.Port)
	}
	if lowest >= unprivilegedPortStart {
		return nil
	}
	return []corev1.Sysctl{{Name: sysctlUnprivilegedPortStart, Value: strconv.Itoa(int(lowest))}}
}

// The kernel's default first port a non-root user may bind, and the sysctl that moves it.
const (
	unprivilegedPortStart       = 1024
	sysctlUnprivilegedPortStart = "net.ipv4.ip_unprivileged_port_start"
)

// addVolume adds a volume to the shadow pod once, however many containers mount it.
func (b *builder) addVolume(v corev1.Volume) {
	for _, have := range b.volumes {
		if have.Name == v.Name {
			return
		}
	}
	b.volumes = append(b.volumes, v)
}
