package inject

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// nobody is the shadow's user and group: it exists in the Debian-based tunnel image, and ssh
// refuses to run as a uid without a passwd entry.
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
		name:          ShadowName(pod.Name, pod.Namespace),
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
			Selector: map[string]string{LabelShadow: b.name},
			Ports:    ports,
		},
	}
}

// deployment runs the shadow pod. Recreate, because two shadow pods would both claim to be
// the offloaded pod and open two tunnels to the login node.
func (b *builder) deployment() *appsv1.Deployment {
	spec := b.podSpec()
	podMeta := b.meta("")
	podMeta.Namespace = ""
	podMeta.Labels[LabelShadow] = b.name
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: b.meta(b.name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelShadow: b.name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: spec},
		},
	}
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
	}
	// Asking Slurm for the node is a login too, which under Kerberos needs the ticket first.
	if b.ssh.Auth == policy.AuthKerberos && b.slurmDiscovery() {
		spec.InitContainers = append(spec.InitContainers, b.kinitContainer())
	}
	spec.InitContainers = append(spec.InitContainers, b.waitForNodeContainer())
	if b.ssh.Auth == policy.AuthKerberos && !b.slurmDiscovery() {
		spec.InitContainers = append(spec.InitContainers, b.kinitContainer())
	}
	if len(b.ports) > 0 {
		spec.Containers = append(spec.Containers, b.forwardContainer())
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

// addVolume adds a volume to the shadow pod once, however many containers mount it.
func (b *builder) addVolume(v corev1.Volume) {
	for _, have := range b.volumes {
		if have.Name == v.Name {
			return
		}
	}
	b.volumes = append(b.volumes, v)
}
