package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// servedBounds are the bounds, in seconds, of controller-runtime's webhook latency histogram
// (controller_runtime_webhook_latency_seconds, buckets 10ns x 10^k) that serverLatency keeps:
// the time from a request read to its answer written, inside shadowgate.
var servedBounds = []string{"0.001", "0.01"}

// serverLatency counts the requests shadowgate served within each of servedBounds, and all.
type serverLatency struct {
	within []float64
	total  float64
}

// plus returns s + sign*o: sign -1 takes a scrape from a later one, 1 adds up runs.
func (s serverLatency) plus(o serverLatency, sign float64) serverLatency {
	sum := serverLatency{within: make([]float64, len(servedBounds)), total: s.total + sign*o.total}
	for i := range sum.within {
		if s.within != nil {
			sum.within[i] = s.within[i]
		}
		sum.within[i] += sign * o.within[i]
	}
	return sum
}

// share is the percentage of requests served within servedBounds[i].
func (s serverLatency) share(i int) float64 {
	if s.total == 0 {
		return 0
	}
	return 100 * s.within[i] / s.total
}

// scrapeLatency reads the pod endpoints' histogram from shadowgate's metrics endpoint.
func scrapeLatency(sg *harness.Shadowgate) (serverLatency, error) {
	text, err := sg.Metrics()
	if err != nil {
		return serverLatency{}, err
	}
	s := serverLatency{within: make([]float64, len(servedBounds))}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "controller_runtime_webhook_latency_seconds_bucket{") || !strings.Contains(line, `webhook="/mutate-pods"`) && !strings.Contains(line, `webhook="/validate-pods"`) {
			continue
		}
		fields := strings.Fields(line)
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return serverLatency{}, fmt.Errorf("reading %q: %w", line, err)
		}
		for i, bound := range servedBounds {
			if strings.Contains(line, `le="`+bound+`"`) {
				s.within[i] += n
			}
		}
		if strings.Contains(line, `le="+Inf"`) {
			s.total += n
		}
	}
	return s, sc.Err()
}
