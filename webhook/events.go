package webhook

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/interlink-hq/shadowgate/validate"
)

// Event reasons of the admission handlers.
const (
	ReasonReverseSocksProxy = "ReverseSocksProxy"
)

// storedWait is how long PodEvents waits for an admitted pod to be stored. Beyond the API
// server's longest webhook timeout, the pod was refused by a later admission step.
const storedWait = time.Minute

// PodEvents records Events on pods once they are stored. /validate-pods admits a pod before
// it exists, and an Event recorded then would regard a pod nobody can look up yet.
type PodEvents struct {
	reader   client.Reader // the manager's cache, which watches pods
	recorder events.EventRecorder
	pending  chan pendingEvent
}

type pendingEvent struct {
	key  types.NamespacedName
	uid  types.UID
	port int
}

var _ manager.LeaderElectionRunnable = (*PodEvents)(nil)

func newPodEvents(reader client.Reader, recorder events.EventRecorder) *PodEvents {
	return &PodEvents{reader: reader, recorder: recorder, pending: make(chan pendingEvent, 256)}
}

// socksProxyOnceStored queues the ReverseSocksProxy warning for a pod being admitted.
func (e *PodEvents) socksProxyOnceStored(pod *corev1.Pod, port int) {
	ev := pendingEvent{key: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID, port: port}
	select {
	case e.pending <- ev:
	default:
		log.Log.WithName("events").Error(nil, "too many pod Events waiting for their pods; this one is not recorded", "pod", ev.key, "reason", ReasonReverseSocksProxy)
	}
}

// NeedLeaderElection is false: every replica admits pods, so every replica records their Events.
func (e *PodEvents) NeedLeaderElection() bool { return false }

// Start records queued Events until ctx ends.
func (e *PodEvents) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-e.pending:
			wg.Go(func() { e.record(ctx, ev) })
		}
	}
}

func (e *PodEvents) record(ctx context.Context, ev pendingEvent) {
	pod := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, storedWait, true, func(ctx context.Context) (bool, error) {
		if err := e.reader.Get(ctx, ev.key, pod); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return pod.UID == ev.uid, nil
	})
	if err != nil {
		log.FromContext(ctx).Info("admitted pod was not stored, so its Event is not recorded", "pod", ev.key, "reason", ReasonReverseSocksProxy, "cause", err.Error())
		return
	}
	e.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonReverseSocksProxy, "Admit",
		"%s: a SOCKS5 proxy listens on port %d of the compute node's loopback, and every user of that node can use it to reach the cluster",
		validate.AnnotationReverseSocksPort, ev.port)
}
