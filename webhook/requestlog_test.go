package webhook

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// A request's lines carry what controller-runtime's default constructor gives them.
func TestRequestLoggerWritesTheDefaultValues(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})
	req := &admission.Request{}
	req.UID, req.Namespace, req.Name = "req-1", "user", "trainer"
	req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	req.UserInfo = authenticationv1.UserInfo{Username: "alice"}
	write := func(l logr.Logger) {
		l = l.WithName("pods").WithValues("step", "apply")
		l.Info("applied", "objects", 4)
		l.Error(errors.New("refused"), "not applied")
	}
	write(admission.DefaultLogConstructor(base, req))
	want := lines
	lines = nil
	write(requestLogger(base, req))
	if len(lines) != len(want) {
		t.Fatalf("wrote %q, want %q", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("wrote %s\nwant  %s", lines[i], want[i])
		}
	}
}
