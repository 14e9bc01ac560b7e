package serving

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
	// LogCaller: each line must name the test's call, not a frame of requestLogger's sink.
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{LogCaller: funcr.All})
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

// countingSink counts the times a request's values are handed to the sink below, which is
// when zap encodes them.
type countingSink struct {
	logr.LogSink
	handed *int
}

func (c countingSink) WithValues(keysAndValues ...any) logr.LogSink {
	*c.handed++
	return countingSink{c.LogSink.WithValues(keysAndValues...), c.handed}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{c.LogSink.WithName(name), c.handed}
}

// A request's values cost nothing until it writes a line, then once per line.
func TestRequestLoggerHandsOverItsValuesOnlyForALine(t *testing.T) {
	req := &admission.Request{}
	req.UID, req.Namespace, req.Name = "req-1", "user", "trainer"
	for sentence, c := range map[string]struct {
		lines int
		want  int
	}{
		"a request that writes no line hands over nothing":      {lines: 0, want: 0},
		"a request that writes two lines hands them over twice": {lines: 2, want: 2},
	} {
		t.Run(sentence, func(t *testing.T) {
			handed := 0
			base := logr.New(countingSink{funcr.New(func(string, string) {}, funcr.Options{}).GetSink(), &handed})
			l := requestLogger(base, req).WithName("pods").WithValues("step", "apply")
			for range c.lines {
				l.Info("applied")
			}
			if handed != c.want {
				t.Errorf("values handed over %d times, want %d", handed, c.want)
			}
		})
	}
}
