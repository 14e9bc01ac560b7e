package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// Every handler answers within the call's deadline: a call whose deadline has passed gets a
// 504 naming it, not a decision the API server would no longer read.
func TestHandlersAnswerWithinTheCallsDeadline(t *testing.T) {
	mut, podV, workV, cmV, _ := handlers(t)
	p := shadowtest.Pod("trainer", map[string]string{validate.AnnotationReverseForwards: "minio:9000"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shadow-x-node", Namespace: "user-shadow"}, Data: map[string]string{validate.ComputeNodeKey: "node07"}}
	deploy := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "user"},
		"spec": map[string]any{"selector": map[string]any{}, "template": map[string]any{"spec": map[string]any{"containers": []any{}}}}}
	cases := map[string]struct {
		h   admission.Handler
		req admission.Request
	}{
		"the mutating pod webhook":                {mut, request(t, admissionv1.Create, podGVK, p)},
		"the validating pod webhook on a create":  {podV, request(t, admissionv1.Create, podGVK, p)},
		"the validating pod webhook on an update": {podV, request(t, admissionv1.Update, podGVK, p)},
		"the workload webhook":                    {workV, request(t, admissionv1.Create, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, deploy)},
		"the ConfigMap webhook":                   {cmV, request(t, admissionv1.Create, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cm)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			resp := tc.h.Handle(ctx, tc.req)
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusGatewayTimeout || !strings.Contains(resp.Result.Message, "deadline") {
				t.Errorf("answer %+v, want a 504 naming the deadline", resp.Result)
			}
		})
	}
}

// A decision on a large object is not waited for past the deadline; one on a small object
// runs where the request is handled, and a deadline that passed while it ran still gets the
// 504, as the API server no longer reads the answer.
func TestDecideByStopsWaitingAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	if _, inTime := decideBy(ctx, inlineBelow, func() int { <-release; return 1 }); inTime {
		t.Error("a decision on a large object that outlasts the deadline was waited for")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if _, inTime := decideBy(short, 1500, func() int { <-short.Done(); return 1 }); inTime {
		t.Error("a decision on a small object that outlasted the deadline was answered as in time")
	}
	for _, size := range []int{1500, inlineBelow} {
		if got, inTime := decideBy(context.Background(), size, func() int { return 7 }); !inTime || got != 7 {
			t.Errorf("decideBy on %d bytes = %d, %v, want the decision's 7 in time", size, got, inTime)
		}
	}
}
