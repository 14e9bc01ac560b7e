package validate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Caps on the work one object can make. The mutating webhook sees a pod before the API server
// checks the size of its annotations (after the webhooks), so a request can carry megabytes of
// them; every cap is checked before what it bounds is parsed, and a value over one is refused
// naming the limit, without being echoed.
const (
	// maxAnnotationsBytes is the API server's own limit on a pod's annotations, keys and
	// values together: it refuses a larger pod anyway, after the webhooks have judged it.
	maxAnnotationsBytes = 256 << 10
	// maxAnnotations is the most annotations an offloaded pod may carry: its shadow pod
	// carries them too (inject's podMeta), so each costs the decision a copy or two.
	maxAnnotations = 1000
	// maxForwards is the most entries interlink.eu/reverse-forwards may list: each is a
	// listener of the job's relay and a forward of the shadow's ssh. maxForwardsBytes holds
	// that many entries of the longest form (listen-port:<253-character host>:port).
	maxForwards      = 64
	maxForwardsBytes = 64 * (5 + 1 + 253 + 1 + 5 + 1)
	// maxExtraPorts is the most entries interlink.eu/wstunnel-extra-ports may list, each
	// port:name:protocol of at most 5+15+3 characters.
	maxExtraPorts      = 64
	maxExtraPortsBytes = 64 * (5 + 1 + 15 + 1 + 3 + 1)
	// maxErrorsPerValue is how many errors one annotation is reported with; its entries after
	// that are not checked.
	maxErrorsPerValue = 16
	// maxEchoed is the longest value a refusal quotes: a hostname's length.
	maxEchoed = 253
)

// annotationsSize is what the API server counts of annotations against maxAnnotationsBytes.
func annotationsSize(ann map[string]string) int {
	n := 0
	for k, v := range ann {
		n += len(k) + len(v)
	}
	return n
}

// tooLong refuses a value of size bytes at p for being over maxBytes, naming the limit and
// what to do, without echoing it.
func tooLong(p *field.Path, size, maxBytes int, instead string) *field.Error {
	e := field.TooLong(p, nil, maxBytes)
	e.Detail = fmt.Sprintf("%d bytes, over the limit of %d; %s", size, maxBytes, instead)
	return e
}

// tooMany refuses a list of n entries at p for being over maxEntries.
func tooMany(p *field.Path, n, maxEntries int, instead string) *field.Error {
	e := field.TooMany(p, n, maxEntries)
	e.Detail = fmt.Sprintf("%d entries, over the limit of %d; %s", n, maxEntries, instead)
	return e
}

// stopped is the last error of a value whose entries were not all checked: maxErrorsPerValue
// were found in the first checked of them.
func stopped(p *field.Path, checked, total int) *field.Error {
	return field.Forbidden(p, fmt.Sprintf(
		"stopped after %d errors in the first %d of %d entries, so the rest were not checked; fix these and apply again",
		maxErrorsPerValue, checked, total))
}
