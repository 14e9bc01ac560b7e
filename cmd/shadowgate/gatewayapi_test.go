package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// discoveryAnswering is a fake discovery whose answers follow script, over and over: "served"
// (HTTPRoutes are), "gone" (the group is not found) or "failing" (the request fails).
func discoveryAnswering(script ...string) *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: gatewayv1.GroupVersion.String(), APIResources: []metav1.APIResource{{Name: "httproutes", Kind: "HTTPRoute"}}}}
	var asked atomic.Int64
	d.AddReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		switch script[int(asked.Add(1)-1)%len(script)] {
		case "gone":
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: gatewayv1.GroupName}, gatewayv1.GroupVersion.Version)
		case "failing":
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	return d
}

func TestServeRestartsWhenTheGatewayAPIComesOrGoes(t *testing.T) {
	for sentence, c := range map[string]struct {
		atStart     bool
		answers     []string
		wantRestart bool
	}{
		"Installed since start, it restarts.":                                {answers: []string{"served"}, wantRestart: true},
		"Removed since start, it restarts.":                                  {atStart: true, answers: []string{"gone"}, wantRestart: true},
		"Removed, with a failing answer between two saying so, it restarts.": {atStart: true, answers: []string{"gone", "failing", "gone", "served"}, wantRestart: true},
		"Served at start and still, it runs on.":                             {atStart: true, answers: []string{"served"}},
		"Served neither at start nor now, it runs on.":                       {answers: []string{"gone"}},
		"Discovery failing, it runs on and asks again later.":                {atStart: true, answers: []string{"failing"}},
		"A single 404 between answers saying served, it runs on.":            {atStart: true, answers: []string{"gone", "served"}},
		"A single answer saying served between 404s, it runs on.":            {answers: []string{"served", "gone"}},
	} {
		t.Run(sentence, func(t *testing.T) {
			restarting, restart := context.WithCancelCause(t.Context())
			defer restart(nil)
			d := discoveryAnswering(c.answers...)
			w := &gatewayAPIWatch{discover: d, served: c.atStart, period: 10 * time.Millisecond, restart: restart, log: logr.Discard()}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- w.Start(ctx) }()
			if c.wantRestart {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("Start = %v, want nil: the restart goes through the drain, not an error", err)
					}
				case <-time.After(time.Minute):
					t.Fatal("no restart within a minute of polls 10 ms apart")
				}
				if cause := context.Cause(restarting); !errors.Is(cause, errGatewayAPIChanged) {
					t.Errorf("serve's context ended with %v, want errGatewayAPIChanged", cause)
				}
				if len(d.Actions()) < gatewayAPIAnswers {
					t.Errorf("serve restarted after %d answers, want at least %d", len(d.Actions()), gatewayAPIAnswers)
				}
				return
			}
			// Three times through the script, however slowly the polls come, then stop.
			asks := 3*len(c.answers) + gatewayAPIAnswers
			if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return len(d.Actions()) >= asks || restarting.Err() != nil, nil
			}); err != nil {
				t.Fatalf("discovery was asked %d times within a minute of polls 10 to 15 ms apart, want %d", len(d.Actions()), asks)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Start = %v", err)
			}
			if restarting.Err() != nil {
				t.Errorf("serve's context ended (%v) after %d answers %q, over and over", context.Cause(restarting), len(d.Actions()), c.answers)
			}
		})
	}
}
