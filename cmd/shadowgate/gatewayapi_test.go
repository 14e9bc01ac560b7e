package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// discoveryServing is a fake discovery whose API server serves HTTPRoutes or not, and whose
// every answer fails with fail.
func discoveryServing(httpRoutes bool, fail error) *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	if httpRoutes {
		d.Resources = []*metav1.APIResourceList{{GroupVersion: gatewayv1.GroupVersion.String(), APIResources: []metav1.APIResource{{Name: "httproutes", Kind: "HTTPRoute"}}}}
	}
	if fail != nil {
		d.AddReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, fail })
	}
	return d
}

func TestServeRestartsWhenTheGatewayAPIComesOrGoes(t *testing.T) {
	for sentence, c := range map[string]struct {
		atStart, now bool
		fail         error
		wantRestart  bool
	}{
		"Installed since start, it restarts.":                 {now: true, wantRestart: true},
		"Removed since start, it restarts.":                   {atStart: true, wantRestart: true},
		"Served at start and still, it runs on.":              {atStart: true, now: true},
		"Served neither at start nor now, it runs on.":        {},
		"Discovery failing, it runs on and asks again later.": {atStart: true, fail: errors.New("connection refused")},
	} {
		t.Run(sentence, func(t *testing.T) {
			restarting, restart := context.WithCancelCause(t.Context())
			defer restart(nil)
			d := discoveryServing(c.now, c.fail)
			w := &gatewayAPIWatch{discover: d, served: c.atStart, period: 10 * time.Millisecond, restart: restart, log: logr.Discard()}
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
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
				return
			}
			<-ctx.Done()
			if err := <-done; err != nil {
				t.Fatalf("Start = %v", err)
			}
			if len(d.Actions()) < 2 {
				t.Fatalf("discovery was asked %d times in half a second of polls 10 ms apart, want several", len(d.Actions()))
			}
			if restarting.Err() != nil {
				t.Errorf("serve's context ended (%v) with the Gateway API as at start", context.Cause(restarting))
			}
		})
	}
}
