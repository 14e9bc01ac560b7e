package serving

import (
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// requestLogger is every endpoint's admission.Webhook LogConstructor: the values of
// controller-runtime's DefaultLogConstructor, added to a line only when one is written. The
// default adds them to serve's zap logger for every request, which encodes them at once (the
// resource by reflection), for lines a request almost never writes.
func requestLogger(base logr.Logger, req *admission.Request) logr.Logger {
	if req == nil {
		return base
	}
	sink := base.GetSink()
	if s, ok := sink.(logr.CallDepthLogSink); ok {
		// lazyValues' Info and Error are one more frame between the caller and the sink,
		// which would otherwise report them as where the line was written.
		sink = s.WithCallDepth(1)
	}
	return base.WithSink(&lazyValues{LogSink: sink, values: []any{
		"object", klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name,
		"resource", req.Resource, "user", req.UserInfo.Username, "requestID", req.UID,
	}})
}

// lazyValues is a LogSink that hands its values to the sink it wraps when it writes a line.
type lazyValues struct {
	logr.LogSink
	values []any
}

// Info and Error mark themselves as helpers to a sink that writes through testing.T, as
// logr.Logger's do, so the line is reported at its caller.
func (l *lazyValues) Info(level int, msg string, keysAndValues ...any) {
	if s, ok := l.LogSink.(logr.CallStackHelperLogSink); ok {
		s.GetCallStackHelper()()
	}
	l.LogSink.WithValues(l.values...).Info(level, msg, keysAndValues...)
}

func (l *lazyValues) Error(err error, msg string, keysAndValues ...any) {
	if s, ok := l.LogSink.(logr.CallStackHelperLogSink); ok {
		s.GetCallStackHelper()()
	}
	l.LogSink.WithValues(l.values...).Error(err, msg, keysAndValues...)
}

func (l *lazyValues) WithValues(keysAndValues ...any) logr.LogSink {
	return &lazyValues{LogSink: l.LogSink, values: append(slices.Clip(l.values), keysAndValues...)}
}

func (l *lazyValues) WithName(name string) logr.LogSink {
	return &lazyValues{LogSink: l.LogSink.WithName(name), values: l.values}
}

// WithCallDepth implements logr.CallDepthLogSink for a sink that does, so a helper that logs
// for its caller (logr.Logger.WithCallDepth) still names the caller.
func (l *lazyValues) WithCallDepth(depth int) logr.LogSink {
	s, ok := l.LogSink.(logr.CallDepthLogSink)
	if !ok {
		return l
	}
	return &lazyValues{LogSink: s.WithCallDepth(depth), values: l.values}
}

// GetCallStackHelper implements logr.CallStackHelperLogSink, so a sink writing through
// testing.T skips logr.Logger.Helper's callers as it would unwrapped.
func (l *lazyValues) GetCallStackHelper() func() {
	if s, ok := l.LogSink.(logr.CallStackHelperLogSink); ok {
		return s.GetCallStackHelper()
	}
	return func() {}
}
