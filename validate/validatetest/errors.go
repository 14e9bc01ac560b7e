package validatetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Err is a field error reduced to what a test asserts.
type Err struct {
	Type  field.ErrorType
	Field string
	Value any
}

// Values reduces errs to their Type, Field and BadValue.
func Values(errs field.ErrorList) []Err {
	out := make([]Err, 0, len(errs))
	for _, e := range errs {
		out = append(out, Err{Type: e.Type, Field: e.Field, Value: e.BadValue})
	}
	return out
}

// Expect fails t when errs differ from want as values; want nil means no error.
func Expect(t testing.TB, errs field.ErrorList, want []Err) {
	t.Helper()
	if want == nil {
		want = []Err{}
	}
	if diff := cmp.Diff(want, Values(errs)); diff != "" {
		t.Errorf("errors differ (-want +got):\n%s\nfull errors: %v", diff, errs)
	}
	for _, e := range errs {
		if e.Type != field.ErrorTypeNotSupported && e.Detail == "" {
			t.Errorf("%s: no detail saying what to do", e.Field)
		}
	}
}
