package certmanager

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// load runs clients until stopped: some create offloaded pods, each one after another, each
// mutated, judged and given its shadow by serve through the API server; one more opens one
// TLS connection to serve after another and verifies it as the API server does, since the
// API server keeps its connections open and may not handshake during a renewal at all.
type load struct {
	done     chan struct{}
	finished sync.WaitGroup

	mu         sync.Mutex
	tried      int // pod creates
	pods       int // pods created
	handshakes int
	serials    map[string]bool // of the certificates serve presented
	failures   []error
}

func startLoad(t *testing.T, namespace string, caPEM []byte, creators int) *load {
	cfg := rest.CopyConfig(cluster.cp.Admin)
	cfg.QPS, cfg.Burst = 1000, 1000 // client-go's default of 5 per second would be the pace
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &load{done: make(chan struct{}), serials: map[string]bool{}}
	for c := range creators {
		l.loop(func(i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := fmt.Sprintf("pod-%d-%d", c, i)
			_, err := cs.CoreV1().Pods(namespace).Create(ctx, bench.TypicalPod(name, namespace, true, false), metav1.CreateOptions{})
			l.mu.Lock()
			defer l.mu.Unlock()
			l.tried++
			if err != nil {
				return fmt.Errorf("creating %s: %w", name, err)
			}
			l.pods++
			return nil
		})
	}
	l.loop(func(int) error {
		c, err := servedCertificate(cluster.sg.Port, caPEM)
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.handshakes++
		l.serials[c.SerialNumber.String()] = true
		return nil
	})
	t.Cleanup(func() { l.stop() })
	return l
}

// loop calls step with 0, 1, ... until the load stops, recording each failure with its time.
func (l *load) loop(step func(i int) error) {
	l.finished.Add(1)
	go func() {
		defer l.finished.Done()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			default:
			}
			if err := step(i); err != nil {
				l.mu.Lock()
				l.failures = append(l.failures, fmt.Errorf("%s: %w", time.Now().Format(time.StampMilli), err))
				l.mu.Unlock()
			}
		}
	}()
}

func (l *load) created() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pods
}

// stop ends the load, once, and returns what it did and what failed.
func (l *load) stop() (tried, pods, handshakes, serials int, failures []error) {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.finished.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tried, l.pods, l.handshakes, len(l.serials), l.failures
}
