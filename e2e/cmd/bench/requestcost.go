package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/internal/applier"
)

// requestKind is one kind of request a pod with a shadow costs, made as shadowgate makes it.
// prepare makes the n objects it works on (not measured); do makes request i.
type requestKind struct {
	name    string
	prepare func(ctx context.Context, n int) error
	do      func(ctx context.Context, i int) error
}

// requestCosts measures, for each kind of request of a pod with a shadow, the CPU it costs the
// API server and etcd, n requests with clients concurrent clients each: what the requests
// runAPIServer counts are worth, so that what a shadow costs beyond the VK's way can be told
// apart request by request. The requests are the cluster admin's, so no policy of
// shadowgate's account is evaluated; the objects are the bench pods' shadows, rendered as for
// the VK's way, in its namespace. The control plane runs no controller-manager, so nothing
// but these requests touches them; the Tunnels' pods are never created.
func requestCosts(ctx context.Context, l *apiServerLoad, cfg *rest.Config, r *bench.Report, n, clients int) error {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme) // registering built-in types into a new scheme cannot fail
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	writes := client.WithFieldOwner(c, applier.FieldManager)
	pods := make([]*corev1.Pod, n)
	deployments := make([]*appsv1.Deployment, n)
	nodeConfigMaps := make([]*corev1.ConfigMap, n)
	applied := make([]*appsv1.Deployment, n)
	tunnels := make([]*v1alpha1.Tunnel, n) // as stored, for APPLY tunnels/status alone
	var secret *corev1.Secret
	for i := range pods {
		pods[i] = bench.TypicalPod(fmt.Sprintf("cost-%d", i), l.namespace, true, false)
		pods[i].UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		objs, err := l.vk.shadowObjects(pods[i])
		if err != nil {
			return err
		}
		for _, obj := range objs {
			switch o := obj.(type) {
			case *appsv1.Deployment:
				deployments[i] = o
			case *corev1.ConfigMap:
				nodeConfigMaps[i] = o
			}
		}
	}
	shadowNamespace := deployments[0].Namespace
	for _, ns := range []string{l.namespace, shadowNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	stored := bench.TypicalPod("cost-stored", l.namespace, false, false) // no port: no shadow
	kinds := []requestKind{
		{name: "GET pods", prepare: func(ctx context.Context, _ int) error {
			return c.Create(ctx, stored)
		}, do: func(ctx context.Context, i int) error {
			return c.Get(ctx, client.ObjectKeyFromObject(stored), &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}})
		}},
		{name: "GET secrets", prepare: func(ctx context.Context, _ int) error {
			secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shadowNamespace, Name: "cost-key"}, Type: corev1.SecretTypeSSHAuth,
				Data: map[string][]byte{corev1.SSHAuthPrivateKey: make([]byte, 400)}}
			return c.Create(ctx, secret)
		}, do: func(ctx context.Context, i int) error {
			return c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
		}},
		{name: "GET secrets from the watch cache", do: func(ctx context.Context, i int) error {
			return c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		}},
		{name: "POST configmaps", do: func(ctx context.Context, i int) error {
			cm := nodeConfigMaps[i].DeepCopy()
			cm.Name += "-cost"
			return writes.Create(ctx, cm)
		}},
		{name: "POST deployments", do: func(ctx context.Context, i int) error {
			d := deployments[i].DeepCopy()
			d.Name += "-create"
			return writes.Create(ctx, d)
		}},
		{name: "APPLY deployments", do: func(ctx context.Context, i int) error {
			held := deployments[i].DeepCopy()
			held.Name += "-apply"
			held.Spec.Replicas = ptr.To[int32](0)
			metav1.SetMetaDataLabel(&held.ObjectMeta, applier.LabelAwaitingPod, "true")
			u, err := applier.ToApply(held, scheme)
			if err != nil {
				return err
			}
			if err := writes.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership); err != nil {
				return err
			}
			applied[i] = &appsv1.Deployment{} // u holds the answer: the Deployment as stored, for PATCH
			return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied[i])
		}},
		{name: "PATCH deployments", do: func(ctx context.Context, i int) error {
			// The Deployment as APPLY stored it, held: no controller changes it here (the
			// control plane runs no controller-manager), so the patch's resourceVersion holds.
			return applier.StartShadow(ctx, c, applied[i], deployments[i])
		}},
		{name: "POST tunnels + APPLY tunnels/status", do: func(ctx context.Context, i int) error {
			return wrote(applier.ApplyTunnelStatus(ctx, c, pods[i], nil, "shadowgate-tunnels", v1alpha1.TunnelStatus{State: "Starting", Reason: "ShadowStarting"}))
		}},
		{name: "APPLY tunnels/status", prepare: func(ctx context.Context, n int) error {
			for i := range n {
				tunnels[i] = &v1alpha1.Tunnel{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(pods[i]), tunnels[i]); err != nil {
					return err
				}
			}
			return nil
		}, do: func(ctx context.Context, i int) error {
			return wrote(applier.ApplyTunnelStatus(ctx, c, pods[i], tunnels[i], "shadowgate-tunnels", v1alpha1.TunnelStatus{State: "WaitingForNode", Reason: "JobQueued"}))
		}},
	}
	for _, k := range kinds {
		if k.prepare != nil {
			if err := k.prepare(ctx, n); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
		}
		cpu, err := l.measure(ctx, n, clients, k.do)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		r.Figure("apiserver-request-cpu-"+figureName(k.name), cpu, "ms")
	}
	return nil
}

// measure makes count requests with do, n concurrently, and returns the CPU per request the
// API server and etcd spent. It starts once what came before (a kind's preparation) has
// settled, and ends when the last request is answered: a request of these kinds sets nothing
// in motion that the two would still work on, and a reading of the API server's metrics
// would cost more than most of them.
func (l *apiServerLoad) measure(ctx context.Context, count, n int, do func(ctx context.Context, i int) error) (float64, error) {
	if _, _, err := settle(ctx, l.counts, settleQuiet, settleLimit); err != nil {
		return 0, err
	}
	before, err := l.cpu()
	if err != nil {
		return 0, err
	}
	_, _, failed := bench.Concurrently(count, n, func(i int) error { return do(ctx, i) })
	if len(failed) > 0 {
		return 0, fmt.Errorf("%d of %d requests failed, the first: %w", len(failed), count, failed[0])
	}
	after, err := l.cpu()
	if err != nil {
		return 0, err
	}
	var spent time.Duration
	for i, p := range l.processes {
		if p != "shadowgate" {
			spent += after[i] - before[i]
		}
	}
	return perPod(spent, count), nil
}

// wrote is ApplyTunnelStatus's answer as a request's: a status it did not write (its Tunnel
// gone, or another pod's) is a failure here, not a cost.
func wrote(written bool, err error) error {
	if err == nil && !written {
		return fmt.Errorf("the Tunnel's status was not written")
	}
	return err
}

// figureName is a request kind as part of a figure's name: "POST tunnels + APPLY tunnels/status"
// is "post-tunnels-apply-tunnels-status".
func figureName(kind string) string {
	out := make([]byte, 0, len(kind))
	dash := false
	for _, ch := range []byte(kind) {
		switch {
		case ch >= 'A' && ch <= 'Z':
			ch += 'a' - 'A'
		case ch >= 'a' && ch <= 'z':
		default:
			if !dash && len(out) > 0 {
				out = append(out, '-')
			}
			dash = true
			continue
		}
		out = append(out, ch)
		dash = false
	}
	return string(out)
}
