package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// vkWay creates shadows the way interLink's virtual kubelet does: with no webhook, the client
// that created the pod renders its shadow and creates each object with a plain create. It
// renders with shadowgate's own core and the policy shadowgate serves, so both ways write the
// same objects and differ only by admission and server-side apply. The baseline's rendering
// runs in this process, whose CPU is counted for neither way.
//
// shadowgate serve runs throughout, and its reconciler would apply a shadow of its own for any
// pod of a virtual node its policy lists. So the VK's pods go to vkNode, a copy of the example
// policy's node under a name the served policy does not list, and their objects carry the VK's
// mark instead of shadowgate's, as the VK's own do: shadowgate leaves them alone.
type vkWay struct {
	c   client.Client
	cfg validate.Config
}

func newVKWay(root string, cfg *rest.Config) (*vkWay, error) {
	data, err := os.ReadFile(filepath.Join(root, harness.ExamplePolicy))
	if err != nil {
		return nil, err
	}
	pol, errs := validate.ParsePolicy(data, validate.CredentialRules{})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", harness.ExamplePolicy, errs.ToAggregate())
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	pol.VirtualNodes[vkNode] = pol.VirtualNodes[bench.Node]
	return &vkWay{c: c, cfg: validate.Config{Policy: pol}}, nil
}

// vkNode is the VK's virtual node: bench.Node's policy under another name, of the same length.
const vkNode = "vk-way"

// create creates pod, then its shadow's objects but the Namespace, which a VK creates once
// (runAPIServer's warm-up has), as one client one after the other.
func (v *vkWay) create(ctx context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	pod.Spec.NodeSelector[corev1.LabelHostname] = vkNode
	if err := v.c.Create(ctx, pod); err != nil {
		return err
	}
	objs, err := v.shadowObjects(pod)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := v.c.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// shadowObjects renders the shadow of the created pod, all but its Namespace.
func (v *vkWay) shadowObjects(pod *corev1.Pod) ([]client.Object, error) {
	shadow := inject.Render(pod, v.cfg).Shadow
	if shadow == nil {
		return nil, fmt.Errorf("pod %s/%s renders no shadow", pod.Namespace, pod.Name)
	}
	var objs []client.Object
	for _, obj := range shadow.Objects() {
		if _, ok := obj.(*corev1.Namespace); ok {
			continue
		}
		obj.GetLabels()[inject.LabelManagedBy] = "interlink"
		delete(obj.GetAnnotations(), inject.AnnotationShadowFor)
		objs = append(objs, obj)
	}
	return objs, nil
}

// storedBytes is the size, as JSON, of the stored pod and of each object of its shadow, by
// kind, and their sum: what one pod with a shadow costs etcd, whichever way it was written.
func (v *vkWay) storedBytes(ctx context.Context, namespace, name string) (map[string]int, error) {
	pod := &corev1.Pod{}
	if err := v.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return nil, err
	}
	objs, err := v.shadowObjects(pod)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int{}
	for _, obj := range append([]client.Object{pod}, objs...) {
		if err := v.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil, err
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		sizes[reflect.TypeOf(obj).Elem().Name()] += len(data)
		sizes["total"] += len(data)
	}
	return sizes, nil
}
