package webhook

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// The follower checks exactly the copies admission made: what a rendered shadow Deployment
// mounts of the policy's replicated credentials is what its shadow copies.
func TestTheFollowerChecksTheCopiesAShadowMounts(t *testing.T) {
	_, _, _, _, pol := handlers(t)
	for _, node := range []string{"hpc-vk", "cern-vk"} {
		p := shadowtest.Mutated(t, offloadedOn(node), pol)
		shadow := shadowtest.ShadowOf(t, p, pol)
		var want []copyKey
		for _, c := range shadow.Credentials() {
			want = append(want, copyKey{Namespace: c.Namespace, Kind: c.Kind, Name: c.Name})
		}
		if len(want) == 0 {
			t.Fatalf("%s: the example policy copies no credential", node)
		}
		got := mountedCopies(shadow.Deployment, nil, replicatedSources(pol), "shadowgate-system")
		slices.SortFunc(got, compareKeys)
		slices.SortFunc(want, compareKeys)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the follower would check %v, the shadow copies %v", node, got, want)
		}
	}
}

// Without replication the follower has nothing of a node's to check: the site provides the
// objects of those names itself, and they are not shadowgate's.
func TestTheFollowerLeavesCredentialsThePolicyDoesNotReplicate(t *testing.T) {
	pol, errs := validate.PolicyConfigMap(shadowtest.ExamplePolicyConfigMap(t, shadowtest.ReplicationOff), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := replicatedSources(pol); len(got) != 0 {
		t.Errorf("with ReplicateCredentials: false everywhere the follower checks %v", got)
	}
	d := mountingDeployment("user-shadow", "Secret/hpc-ssh-key")
	if got := mountedCopies(d, nil, replicatedSources(pol), "shadowgate-system"); len(got) != 0 {
		t.Errorf("a Deployment mounting a credential the policy does not replicate queues %v", got)
	}
}

func TestWhichCopiesASourceChangeQueues(t *testing.T) {
	const src = "Secret/hpc-ssh-key"
	deployments := []appsv1.Deployment{
		*mountingDeployment("a-shadow", src, "ConfigMap/hpc-known-hosts"),
		*mountingDeployment("a-shadow", src), // a second shadow of the namespace shares the copy
		*mountingDeployment("b-shadow", src),
		*mountingDeployment("c-shadow", "ConfigMap/hpc-known-hosts"), // mounts another source
		*mountingDeployment("shadowgate-system", src),                // mounts the source itself
	}
	got := copiesOf(deployments, src, "shadowgate-system")
	want := []copyKey{{"a-shadow", "Secret", "hpc-ssh-key"}, {"b-shadow", "Secret", "hpc-ssh-key"}}
	if !slices.Equal(got, want) {
		t.Errorf("a change of %s queues %v, want %v", src, got, want)
	}
}

// A Deployment's update queues only what its template mounts anew: its status changes all the
// time and must cost nothing.
func TestADeploymentUpdateQueuesOnlyNewMounts(t *testing.T) {
	replicated := map[string]bool{"Secret/hpc-ssh-key": true, "ConfigMap/hpc-known-hosts": true}
	old := mountingDeployment("a-shadow", "Secret/hpc-ssh-key")
	same := old.DeepCopy()
	same.Status.ReadyReplicas = 1
	if got := mountedCopies(same, old, replicated, "shadowgate-system"); len(got) != 0 {
		t.Errorf("a status update queues %v", got)
	}
	more := mountingDeployment("a-shadow", "Secret/hpc-ssh-key", "ConfigMap/hpc-known-hosts")
	want := []copyKey{{"a-shadow", "ConfigMap", "hpc-known-hosts"}}
	if got := mountedCopies(more, old, replicated, "shadowgate-system"); !slices.Equal(got, want) {
		t.Errorf("a template mounting one more credential queues %v, want %v", got, want)
	}
}

func offloadedOn(node string) *corev1.Pod {
	p := shadowtest.Pod("trainer", nil)
	p.Spec.NodeName = node
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8888}}
	return p
}

// mountingDeployment is a shadow Deployment in namespace mounting mounts ("<Kind>/<name>"),
// each in a volume of its own, the Secret ones through a projected volume as the shadow does.
func mountingDeployment(namespace string, mounts ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "shadow"}}
	for _, m := range mounts {
		var v corev1.Volume
		switch kind, name, _ := strings.Cut(m, "/"); kind {
		case "Secret":
			v.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}
		default:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
		}
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, v)
	}
	return d
}

func compareKeys(a, b copyKey) int { return strings.Compare(a.String(), b.String()) }
