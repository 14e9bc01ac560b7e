package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// kubectl runs the real kubectl as the cluster admin.
func kubectl(t *testing.T, stdin string, args ...string) harness.Result {
	t.Helper()
	return kubectlAs(t, cluster.kubectl.Kubeconfig, stdin, args...)
}

// kubectlAs runs the real kubectl as the user of kubeconfig: shadowgate's ServiceAccount with
// cluster.cp.ShadowgateKubeconfig.
func kubectlAs(t *testing.T, kubeconfig, stdin string, args ...string) harness.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return harness.Kubectl{Path: cluster.kubectl.Path, Kubeconfig: kubeconfig}.Run(ctx, stdin, args...)
}

// mustKubectl runs kubectl and fails the test, with what kubectl printed, when it fails.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cluster.kubectl.MustRun(ctx, t, stdin, args...)
}

// createNamespaces creates namespaces for one test; names are unique across the suite.
func createNamespaces(t *testing.T, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster.kubectl.CreateNamespaces(ctx, t, names...)
}

// handOverShadowNamespaces creates the shadow namespace of each pod namespace as a cluster
// admin hands one over (docs/security.md, "Shadow namespaces"): marked for it, so shadowgate
// writes its shadows there. A test that prepares objects in a shadow namespace before the pod
// starts needs this; one that is not marked refuses the pod.
func handOverShadowNamespaces(t *testing.T, podNamespaces ...string) {
	t.Helper()
	for _, ns := range podNamespaces {
		shadowNS := inject.ShadowNamespace(ns, false)
		createNamespaces(t, shadowNS)
		mustKubectl(t, "", "label", "namespace", shadowNS, inject.LabelShadowNamespaceFor+"="+ns)
	}
}

// offloaded describes a pod placed on a virtual node of the example policy.
type offloaded struct {
	name, namespace, node string
	annotations           map[string]string
	ports                 []int32
}

// json renders the pod as a user would write it: placed by node selector, tolerating the
// virtual node's taint.
func (p offloaded) json() string {
	c := corev1.Container{Name: "main", Image: "busybox"}
	for _, port := range p.ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: port})
	}
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Annotations: p.annotations},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": p.node},
			Tolerations:  []corev1.Toleration{{Key: "virtual-node.interlink/no-schedule", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:   []corev1.Container{c},
		},
	}
	b, _ := json.Marshal(pod) // a typed Pod always marshals
	return string(b)
}

// shadowName is the name of the pod's shadow Deployment and Service.
func (p offloaded) shadowName() string { return inject.ShadowName(p.name, p.namespace, false) }

// shadowNamespace is where the pod's shadow lives (not shadow-same-ns).
func (p offloaded) shadowNamespace() string { return inject.ShadowNamespace(p.namespace, false) }

func expectContains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl output lacks %q; it printed:\n%s", w, out)
		}
	}
}

// eventually is harness.Eventually: poll cond until it holds, or fail after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	harness.Eventually(t, timeout, what, cond)
}

// exists reports whether kubectl finds the object, and what it printed.
func exists(t *testing.T, args ...string) (bool, string) {
	t.Helper()
	r := kubectl(t, "", append([]string{"get", "-o", "name"}, args...)...)
	if r.Err != nil {
		if strings.Contains(r.Stderr, "NotFound") {
			return false, r.Output()
		}
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	return true, r.Output()
}

// removeWebhooks deletes shadowgate's webhook configurations for a while: the returned
// reinstall registers them again and waits until the API server calls shadowgate, and runs
// anyway when the test ends, however it ends, so that no later test runs without them.
func removeWebhooks(t *testing.T) (reinstall func()) {
	t.Helper()
	install := sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return cluster.sg.InstallWebhooks(ctx)
	})
	t.Cleanup(func() {
		if err := install(); err != nil {
			t.Errorf("reinstalling the webhooks: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.sg.RemoveWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := install(); err != nil {
			t.Fatalf("reinstalling the webhooks: %v", err)
		}
	}
}

// exampleFile is a path under manifests/examples.
func exampleFile(name string) string { return cluster.root + "/manifests/examples/" + name }
