package podrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/volumes"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestMain(m *testing.M) {
	RunHelperIfRequested()
	os.Exit(m.Run())
}

// world is the API objects a test pod sees, in real listers over in-memory indexers.
type world struct {
	configMaps, secrets, services cache.Indexer
}

func newWorld(objs ...any) *world {
	w := &world{
		configMaps: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		secrets:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		services:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
	}
	for _, o := range objs {
		w.put(o)
	}
	return w
}

func (w *world) put(o any) {
	switch o.(type) {
	case *corev1.ConfigMap:
		_ = w.configMaps.Update(o)
	case *corev1.Secret:
		_ = w.secrets.Update(o)
	case *corev1.Service:
		_ = w.services.Update(o)
	}
}

func (w *world) env() EnvSources {
	return EnvSources{
		ConfigMaps: corev1listers.NewConfigMapLister(w.configMaps),
		Secrets:    corev1listers.NewSecretLister(w.secrets),
		Services:   corev1listers.NewServiceLister(w.services),
	}
}

// started is a running test pod with its volumes, its node log and the Events it recorded.
type started struct {
	*Pod
	vols     *volumes.Pod
	mu       sync.Mutex
	log      bytes.Buffer
	recorded []Event
}

func (s *started) events() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// hasEvent says whether the pod recorded want.
func (s *started) hasEvent(want Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.recorded {
		if e == want {
			return true
		}
	}
	return false
}

// eventually polls until the pod recorded want, and lists what it did record if not.
func (s *started) eventuallyRecords(t *testing.T, want Event) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !s.hasEvent(want) {
		if time.Now().After(deadline) {
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("no Event %+v; recorded:\n%+v", want, s.recorded)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run starts pod against w with short back-off and stops it when the test ends.
func run(t *testing.T, w *world, pod *corev1.Pod) *started {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID == "" {
		pod.UID = types.UID("uid-" + pod.Name)
	}
	if pod.Namespace == "" {
		pod.Namespace = "ns"
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &started{vols: volumes.New(filepath.Join(dir, "volumes"), volumes.Sources{
		ConfigMaps: corev1listers.NewConfigMapLister(w.configMaps), Secrets: corev1listers.NewSecretLister(w.secrets),
	})}
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zero := int64(1)
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = &zero
	}
	p, err := Start(Config{
		Exe: exe, Address: "127.0.0.1", Dir: filepath.Join(dir, "pod"),
		Prepare:    func() error { return s.vols.SetUp(pod) },
		VolumePath: s.vols.Path, HostsFile: hosts, Env: w.env(), Mountpoints: NewMountpoints(),
		InitialBackoff: 500 * time.Millisecond, MaxBackoff: time.Second,
		Logf: func(f string, a ...any) {
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Logf(f, a...)
			s.log.WriteString(strings.TrimSpace(fmt.Sprintf(f, a...)) + "\n")
		},
		Record: func(e Event) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.recorded = append(s.recorded, e)
		},
	}, pod)
	if err != nil {
		t.Fatal(err)
	}
	s.Pod = p
	t.Cleanup(func() {
		p.Stop(time.Second)
		_ = p.Remove()
		_ = s.vols.Remove()
	})
	return s
}

// eventually polls cond until it holds or 15s pass.
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

func containerStatus(st *corev1.PodStatus, name string) corev1.ContainerStatus {
	for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

func logsOf(t *testing.T, p *started, container string, opts api.ContainerLogOpts) string {
	t.Helper()
	var b bytes.Buffer
	if err := p.Logs(context.Background(), container, opts, &b); err != nil {
		t.Fatalf("logs of %s: %v", container, err)
	}
	return b.String()
}

func testPod(name string, spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: spec}
}

func sh(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "site/test", Command: []string{"/bin/sh", "-c", script}}
}

// logText is a container's log so far, empty before it started: for polling.
func logText(p *started, container string, opts api.ContainerLogOpts) string {
	var b bytes.Buffer
	_ = p.Logs(context.Background(), container, opts, &b)
	return b.String()
}

func writeFile(path string) error { return os.WriteFile(path, nil, 0o644) }

func removeFile(path string) { _ = os.Remove(path) }

func itoa(i int) string { return strconv.Itoa(i) }

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
