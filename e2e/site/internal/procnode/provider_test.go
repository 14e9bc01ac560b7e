package procnode

import (
	"context"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/podrun"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/vknode"
	vkapi "github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

func TestMain(m *testing.M) {
	podrun.RunHelperIfRequested()
	os.Exit(m.Run())
}

func indexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func freePort(t *testing.T) int32 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

// A pod reaches a Service by its hosts-file name through the proxy, sees a Service added later
// in the same /etc/hosts, and its deletion reports a final status and leaves no state.
func TestAPodReachesAServiceByNameAndIsDeletedCleanly(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	services, slices, configMaps, secrets := indexer(), indexer(), indexer(), indexer()
	backendPort := freePort(t)
	portName := "http"
	ready := true
	_ = services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.44.5", Ports: []corev1.ServicePort{{Name: portName, Port: 8081, Protocol: corev1.ProtocolTCP}}}})
	_ = slices.Add(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &backendPort}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	})
	api := fake.NewClientset()
	stateDir := t.TempDir()
	var nodeLog strings.Builder
	var logMu sync.Mutex
	p, err := New(Config{StateDir: stateDir, Address: "127.0.0.1", Exe: exe, InitialBackoff: time.Second, MaxBackoff: time.Second,
		Resync: 200 * time.Millisecond, ServiceTable: "sg_test_provider", Logger: log.New(writerFunc(func(b []byte) { logMu.Lock(); nodeLog.Write(b); logMu.Unlock(); t.Log(strings.TrimSpace(string(b))) }), "", 0)},
		Sources{ConfigMaps: corev1listers.NewConfigMapLister(configMaps), Secrets: corev1listers.NewSecretLister(secrets),
			Services: corev1listers.NewServiceLister(services), EndpointSlices: discoverylisters.NewEndpointSliceLister(slices),
			PodsAPI: api.CoreV1()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last *corev1.Pod
	p.NotifyPods(context.Background(), func(pod *corev1.Pod) { mu.Lock(); last = pod; mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { p.Run(ctx); close(ran) }()
	// Run removes the Service table as it returns: wait, so no table outlives the test.
	defer func() { cancel(); <-ran }()

	grace := int64(1)
	server := corev1.Container{Name: "server", Image: "site/socat", Command: []string{"socat",
		"TCP-LISTEN:" + strconv.Itoa(int(backendPort)) + ",bind=127.0.0.1,reuseaddr,fork", "SYSTEM:echo from-backend"}}
	client := corev1.Container{Name: "client", Image: "site/python", Command: []string{"python3", "-c", `
import socket, time
for _ in range(100):
    try:
        # Refused until the server listens: the connection is sent on to the endpoint.
        answer = socket.create_connection(("echo", 8081), timeout=2).recv(100).decode().strip()
        if answer:
            print(answer, flush=True)
            break
    except OSError:
        pass
    time.sleep(0.1)
while "late.ns.svc.cluster.local" not in open("/etc/hosts").read():
    time.sleep(0.1)
print("hosts-refreshed", flush=True)
time.sleep(60)
`}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "svc-user", Namespace: "ns", UID: "uid-svc-user"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{server, client}}}
	if _, err := api.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	logs := func() string {
		r, err := p.GetContainerLogs(ctx, "ns", "svc-user", "client", vkapi.ContainerLogOpts{})
		if err != nil {
			return ""
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return string(b)
	}
	eventually(t, "the client to reach the Service", func() bool { return strings.Contains(logs(), "from-backend") })
	_ = services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.44.6", Ports: []corev1.ServicePort{{Port: 80}}}})
	p.Trigger()
	eventually(t, "the hosts file refreshed in place", func() bool { return strings.Contains(logs(), "hosts-refreshed") })
	mu.Lock()
	running := last.Status.Phase
	mu.Unlock()
	if running != corev1.PodRunning {
		t.Errorf("notified phase %s, want Running", running)
	}

	now := metav1.Now()
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
	if err := p.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod gone from the provider", func() bool { _, err := p.GetPod(ctx, "ns", "svc-user"); return err != nil })
	mu.Lock()
	final := last
	mu.Unlock()
	for _, cs := range final.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			t.Errorf("final status of %s is %+v, want terminated", cs.Name, cs.State)
		}
	}
	eventually(t, "the pod deleted from the API server once stopped", func() bool {
		_, err := api.CoreV1().Pods("ns").Get(ctx, "svc-user", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if entries, _ := os.ReadDir(filepath.Join(stateDir, "pods")); len(entries) != 0 {
		t.Errorf("pod state left behind: %v", entries)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, want := range []string{"pod ns/svc-user: started", "container client: exited with code", "pod ns/svc-user: deleted"} {
		if !strings.Contains(nodeLog.String(), want) {
			t.Errorf("node log lacks %q", want)
		}
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(append([]byte(nil), b...)); return len(b), nil }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A failing readiness probe reaches the API server as the kubelet's Event: from "kubelet" on
// the node, about the pod's container by field path, through client-go's recorder, whose
// correlator counts the repeats of one message on one Event.
func TestAFailingProbeIsAKubeletEventOnThePod(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, stopEvents := vknode.NewRecorder(ctx, api, "cluster-node")
	defer stopEvents()
	p, err := New(Config{StateDir: t.TempDir(), Address: "127.0.0.1", Exe: exe, InitialBackoff: time.Second, MaxBackoff: time.Second,
		Resync: time.Second, ServiceTable: "sg_test_events", Logger: log.New(writerFunc(func(b []byte) { t.Log(strings.TrimSpace(string(b))) }), "", 0),
		Events: events},
		Sources{ConfigMaps: corev1listers.NewConfigMapLister(indexer()), Secrets: corev1listers.NewSecretLister(indexer()),
			Services: corev1listers.NewServiceLister(indexer()), EndpointSlices: discoverylisters.NewEndpointSliceLister(indexer())})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { p.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	grace := int64(1)
	c := corev1.Container{Name: "ssh-forward", Image: "site/sh", Command: []string{"sleep", "60"},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c",
			`echo "NodeUnreachable: 10.213.0.2 from 127.0.0.2"; exit 1`}}}, PeriodSeconds: 1}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shadow", Namespace: "ns", UID: "uid-shadow", ResourceVersion: "7"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c}}}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.DeletePod(ctx, pod) }()
	var got corev1.Event
	eventually(t, "an Unhealthy Event repeated", func() bool {
		list, err := api.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		got = list.Items[0]
		return len(list.Items) == 1 && got.Count >= 2
	})
	want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "shadow", UID: "uid-shadow",
		ResourceVersion: "7", FieldPath: "spec.containers{ssh-forward}"}
	if got.InvolvedObject != want || got.Type != corev1.EventTypeWarning || got.Reason != "Unhealthy" ||
		got.Message != "Readiness probe failed: NodeUnreachable: 10.213.0.2 from 127.0.0.2\n" ||
		got.Source != (corev1.EventSource{Component: "kubelet", Host: "cluster-node"}) {
		t.Errorf("Event %+v", got)
	}
}
