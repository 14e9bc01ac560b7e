// Package bench measures shadowgate for `make bench`: the objects every measurement admits,
// the HTTPS load generator, pod creates through a real API server, the Go benchmarks run
// interleaved, and the BENCH report. The in-process benchmarks (webhook/, inject/) admit the
// same objects, so their figures and the ones over HTTPS are of the same work.
package bench

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Node is the virtual node of manifests/examples/policy.yaml every fixture is placed on
// (public-key login, reverse tunnel enabled).
const Node = "hpc-vk"

// Forwards is what a pod of namespace asking for the reverse tunnel asks: the user guide's
// trainer's, a Service of its own namespace and the API server, both destinations the example
// policy allows.
func Forwards(namespace string) string {
	return "minio." + namespace + ".svc.cluster.local:9000 6443:kubernetes.default.svc.cluster.local:443"
}

// TypicalPod is an offloaded pod as the API server sends it to the webhooks: the user guide's
// notebook with the fields the API server defaults, a few variables and resources. With a
// port it gets a shadow (ports: 8888); with reverse it also asks for the reverse tunnel, so
// /mutate-pods patches it.
func TypicalPod(name, namespace string, withPort, reverse bool) *corev1.Pod {
	return offloadedPod(name, namespace, 1, 5, withPort, reverse)
}

// LargePod is the stress case for patch generation: the typical pod with a port, the same
// annotations included, grown to 50 containers holding 1,000 environment variables between
// them, each container with a port. Only its size differs from TypicalPod's with the same
// reverse, so the ratio of their costs is the cost of size, not of the reverse tunnel's
// snippet, which costs the same on both.
func LargePod(name, namespace string, reverse bool) *corev1.Pod {
	return offloadedPod(name, namespace, 50, 1000/50, true, reverse)
}

// Deployment is a workload whose template is the typical pod, for /validate-workloads.
func Deployment(name, namespace string) *appsv1.Deployment {
	pod := TypicalPod(name, namespace, true, true)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: pod.Annotations},
				Spec:       pod.Spec,
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%")),
			}},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

func offloadedPod(name, namespace string, containers, envPerContainer int, withPort, reverse bool) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels:      map[string]string{"app": "notebook", "team": "physics"},
			Annotations: map[string]string{"interlink.eu/shadow-same-ns": "false"},
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": Node},
			Tolerations: []corev1.Toleration{
				{Key: "virtual-node.interlink/no-schedule", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Priority:                      ptr.To[int32](0),
			EnableServiceLinks:            ptr.To(true),
			PreemptionPolicy:              ptr.To(corev1.PreemptLowerPriority),
			Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{},
			}}},
		},
	}
	for i := range containers {
		c := corev1.Container{
			Name:  "c" + strconv.Itoa(i),
			Image: "docker://jupyter/scipy-notebook:2024-10-07",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			},
			VolumeMounts:             []corev1.VolumeMount{{Name: "work", MountPath: "/work"}},
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}
		for j := range envPerContainer {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d_%d", i, j), Value: fmt.Sprintf("value-%d-%d", i, j)})
		}
		if withPort {
			c.Ports = []corev1.ContainerPort{{Name: "p" + strconv.Itoa(i), ContainerPort: int32(8888 + i), Protocol: corev1.ProtocolTCP}}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	if reverse {
		pod.Annotations["interlink.eu/reverse-forwards"] = Forwards(namespace)
	}
	return pod
}
