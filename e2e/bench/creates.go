package bench

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreatePods creates pods with n concurrent clients taking the next pod as each finishes, and
// returns each create's latency, the wall time of them all, and the errors of those that failed.
func CreatePods(ctx context.Context, cs kubernetes.Interface, pods []*corev1.Pod, n int) ([]time.Duration, time.Duration, []error) {
	return Concurrently(len(pods), n, func(i int) error {
		_, err := cs.CoreV1().Pods(pods[i].Namespace).Create(ctx, pods[i], metav1.CreateOptions{})
		return err
	})
}

// Concurrently runs do for 0..count-1 with n concurrent clients taking the next index as each
// finishes, and returns each call's latency, the wall time of them all, and the errors of the
// calls that failed.
func Concurrently(count, n int, do func(i int) error) ([]time.Duration, time.Duration, []error) {
	latencies := make([]time.Duration, count)
	errs := make([]error, count)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			for i := range next {
				t := time.Now()
				errs[i] = do(i)
				latencies[i] = time.Since(t)
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return latencies, time.Since(start), failed
}
