package webhook

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
)

func TestRespondAllowsWithWarningsAndRefusesAsInvalid(t *testing.T) {
	ok := respond(podKind, "trainer", validate.Decision{Warnings: []string{"w"}})
	if !ok.Allowed || len(ok.Warnings) != 1 {
		t.Fatalf("allowed decision: %+v", ok)
	}
	path := field.NewPath("metadata", "annotations").Key(validate.AnnotationReverseBind)
	refused := respond(podKind, "trainer", validate.Decision{
		Errors:   field.ErrorList{field.Invalid(path, "127.0.0.1", "give another 127.x.y.z address")},
		Warnings: []string{"w"},
	})
	r := refused.Result
	if refused.Allowed || r.Reason != metav1.StatusReasonInvalid || r.Details.Kind != "Pod" || r.Details.Name != "trainer" || len(refused.Warnings) != 1 {
		t.Fatalf("refusal: %+v", refused)
	}
	if c := r.Details.Causes; len(c) != 1 || c[0].Field != path.String() || !strings.HasPrefix(c[0].Message, `Invalid value: "127.0.0.1": `) {
		t.Fatalf("causes: %+v", c)
	}
}

func TestRefuseForShadowKeepsTheAPIServersVerdict(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "shadow-x", errors.New("exceeded quota: q"))
	r := refuseForShadow(quota, []string{"w"})
	if r.Allowed || r.Result.Code != http.StatusForbidden || r.Result.Reason != metav1.StatusReasonForbidden ||
		!strings.Contains(r.Result.Message, "exceeded quota: q") || len(r.Warnings) != 1 {
		t.Fatalf("%+v", r)
	}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "shadow-x", field.ErrorList{field.Required(field.NewPath("spec"), "x")})
	if r := refuseForShadow(invalid, nil); r.Result.Reason != metav1.StatusReasonForbidden || r.Result.Code != http.StatusForbidden {
		t.Fatalf("an invalid shadow object must keep its message on screen: %+v", r.Result)
	}
	if r := refuseForShadow(errors.New("connection refused"), nil); r.Result.Code != http.StatusInternalServerError {
		t.Fatalf("a failure without status: %+v", r.Result)
	}
}
