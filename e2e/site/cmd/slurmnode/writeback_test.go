package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// tunnelState is what another writer (shadowgate) puts on the pod after its creation.
const tunnelState = "interlink.eu/tunnel-state"

// TestStatusWriteBack runs the node's provider under the virtual-kubelet library's pod
// controller and has another writer annotate the pod: with -write-back-creation-copy the
// node's status loop writes back the pod as stored at creation, which reverts the annotation,
// as interLink's virtual kubelet does; without it, a status write keeps the annotation.
func TestStatusWriteBack(t *testing.T) {
	t.Run("the creation copy written back reverts another writer's annotation", func(t *testing.T) {
		client, _ := startController(t, true)
		annotate(t, client)
		waitFor(t, "the annotation to be reverted", func() error {
			pod, err := client.CoreV1().Pods("user").Get(t.Context(), "notebook", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if v, ok := pod.Annotations[tunnelState]; ok {
				return fmt.Errorf("the pod still has %s=%s", tunnelState, v)
			}
			if pod.Annotations["site/created"] != "yes" {
				return fmt.Errorf("the pod lost its creation-time annotation: %v", pod.Annotations)
			}
			return nil
		})
	})
	t.Run("without it, a status write keeps another writer's annotation", func(t *testing.T) {
		client, p := startController(t, false)
		annotate(t, client)
		waitFor(t, "the node to see the annotation", func() error {
			pod, err := p.lister.Pods.Pods("user").Get("notebook")
			if err != nil || pod.Annotations[tunnelState] == "" {
				return fmt.Errorf("not yet (%v)", err)
			}
			return nil
		})
		p.mu.Lock()
		pj := p.pods[key("user", "notebook")]
		pj.pod.Status.Message = "a later status"
		pod := pj.pod.DeepCopy()
		p.mu.Unlock()
		p.changed(pod)
		waitFor(t, "the later status to be written", func() error {
			pod, err := client.CoreV1().Pods("user").Get(t.Context(), "notebook", metav1.GetOptions{})
			if err != nil || pod.Status.Message != "a later status" {
				return fmt.Errorf("not yet (%v)", err)
			}
			if pod.Annotations[tunnelState] != "Ready" {
				return fmt.Errorf("the status write reverted the annotation: %v", pod.Annotations)
			}
			return nil
		})
	})
}

// startController is the library's pod controller over a fake API server holding one running
// pod bound to the node, the provider holding that pod as created.
func startController(t *testing.T, writeBack bool) (*fake.Clientset, *provider) {
	t.Helper()
	created := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "33333333-4444-4555-8666-777777777777",
			Annotations: map[string]string{"site/created": "yes"}},
		Spec: corev1.PodSpec{NodeName: "hpc-vk", Containers: []corev1.Container{{Name: "jupyter", Image: "docker://jupyter/scipy-notebook"}}},
	}
	client := fake.NewClientset(created.DeepCopy())
	// The fake API server loses what changes between an informer's list and its watch, so the
	// test writes only once the pods' watch is open.
	var watching sync.Once
	watched := make(chan struct{})
	client.PrependWatchReactor("pods", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		watching.Do(func() { close(watched) })
		return true, w, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	stored := created.DeepCopy()
	stored.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{condition(corev1.PodReady, true)}}
	p := &provider{
		// follow never polls Slurm within the test: the pod's status is the provider's.
		cfg:    options{poll: time.Hour, statusInterval: 50 * time.Millisecond, writeBackCreationCopy: writeBack},
		lister: nodeutil.ProviderConfig{Pods: pods.Lister()},
		pods:   map[string]*podJob{key("user", "notebook"): {pod: stored, jobID: "7"}},
	}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         client.CoreV1(),
		PodInformer:       pods,
		EventRecorder:     record.NewFakeRecorder(100),
		Provider:          p,
		ConfigMapInformer: factory.Core().V1().ConfigMaps(),
		SecretInformer:    factory.Core().V1().Secrets(),
		ServiceInformer:   factory.Core().V1().Services(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		if err := pc.Run(ctx, 1); err != nil && ctx.Err() == nil {
			t.Errorf("the pod controller: %v", err)
		}
	}()
	select {
	case <-watched:
	case <-time.After(time.Minute):
		t.Fatal("the pods' informer does not watch after a minute")
	}
	if writeBack {
		waitFor(t, "the node to write the pod's status", func() error {
			pod, err := client.CoreV1().Pods("user").Get(ctx, "notebook", metav1.GetOptions{})
			if err != nil || pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("not yet (%v)", err)
			}
			return nil
		})
	} else {
		select {
		case <-pc.Ready():
		case <-time.After(time.Minute):
			t.Fatal("the pod controller is not ready after a minute")
		}
	}
	return client, p
}

// annotate is another writer setting the tunnel state on the pod.
func annotate(t *testing.T, client *fake.Clientset) {
	t.Helper()
	pod, err := client.CoreV1().Pods("user").Get(t.Context(), "notebook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[tunnelState] = "Ready"
	if _, err := client.CoreV1().Pods("user").Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls check until it passes, failing the test after a generous bound.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
