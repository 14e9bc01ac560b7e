package svcproxy

import (
	"bufio"
	"errors"
	"io"
	"log"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

func indexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func service(ns, name, ip string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "api", Port: port, Protocol: corev1.ProtocolTCP}}}}
}

// A connection to a Service's ClusterIP and port reaches a ready endpoint (never the one not
// ready), while a pod listens on that very port; one to a Service without endpoints is
// refused; a Service gone takes its rule along, and Close the table.
func TestTheProxyCarriesAConnectionToAReadyEndpoint(t *testing.T) {
	// The endpoint: an echo server on loopback, answering with a greeting.
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "backend got "+line)
			}()
		}
	}()
	port := int32(backend.Addr().(*net.TCPAddr).Port)
	// A pod of this node listens on every address at the Service's own port, as a shadow does
	// on the port its Service names: the proxy opens no socket, so both work.
	pod, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	svcPort := int32(pod.Addr().(*net.TCPAddr).Port)
	services, slices := indexer(), indexer()
	_ = services.Add(service("ns", "web", "10.0.7.9", svcPort))
	ready, notReady := true, false
	name := "api"
	_ = slices.Add(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			// Not ready, and nothing listens there: a connection sent to it would fail.
			{Addresses: []string{"127.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
		},
	})
	// A Service with no ready endpoint: a connection to it is reset at once, as kube-proxy
	// rejects one.
	_ = services.Add(service("ns", "empty", "10.0.7.8", 8080))
	p := newProxy(t, "sg_test_carry", services, slices, nil)
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("10.0.7.9", strconv.Itoa(int(svcPort))), 2*time.Second)
		if err != nil {
			t.Fatalf("dial the service address: %v", err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "hello\n")
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != "backend got hello\n" {
			t.Fatalf("connection %d through the proxy got %q", i, got)
		}
	}
	if c, err := net.DialTimeout("tcp", "10.0.7.8:8080", 2*time.Second); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a connection to a Service without endpoints was not refused: %v", err)
	}
	_ = services.Delete(service("ns", "web", "10.0.7.9", svcPort))
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if table := listTable(t, "sg_test_carry"); strings.Contains(table, "10.0.7.9") {
		t.Fatalf("the Service is gone, its rule is not:\n%s", table)
	}
	p.Close()
	if out, err := exec.Command("nft", "list", "table", "ip", "sg_test_carry").CombinedOutput(); err == nil {
		t.Fatalf("Close left the table behind:\n%s", out)
	}
}

// newProxy is a Proxy over the indexers keeping table, removed when the test ends.
func newProxy(t *testing.T, table string, services, slices, pods cache.Indexer) *Proxy {
	t.Helper()
	var podLister corev1listers.PodLister
	if pods != nil {
		podLister = corev1listers.NewPodLister(pods)
	}
	p, err := New(table, corev1listers.NewServiceLister(services), discoverylisters.NewEndpointSliceLister(slices), podLister, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func listTable(t *testing.T, table string) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "ip", table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table %s: %v\n%s", table, err, out)
	}
	return string(out)
}

func TestATableNameNftCannotTakeIsRefused(t *testing.T) {
	for name, table := range map[string]string{
		"a space":         "sg site",
		"a leading digit": "1site",
		"a quote":         "sg'site",
		"longer than 63":  "s" + strings.Repeat("x", 63),
		"nothing at all":  "",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(table, nil, nil, nil, log.New(io.Discard, "", 0)); err == nil {
				t.Fatalf("New(%q) took it", table)
			}
		})
	}
}

func TestHostsNamesServicesAsClusterDNSWould(t *testing.T) {
	got := Hosts("mypod", "team", "127.0.0.1", []*corev1.Service{
		service("team", "db", "10.0.0.20", 5432),
		service("other", "cache", "10.0.1.2", 6379),
		service("team", "headless", "None", 80),
	})
	for name, want := range map[string]string{
		"localhost":                              "127.0.0.1\tlocalhost\n",
		"the pod's own name":                     "127.0.0.1\tmypod\n",
		"its namespace's Service, bare name too": "10.0.0.20\tdb.team.svc.cluster.local db.team.svc db.team db\n",
		"another namespace's Service without it": "10.0.1.2\tcache.other.svc.cluster.local cache.other.svc cache.other\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("%s: hosts lacks %q:\n%s", name, want, got)
		}
	}
	if strings.Contains(got, "headless") {
		t.Errorf("a headless Service has no address to name:\n%s", got)
	}
}

// The API server refuses 127.0.0.1 in an EndpointSlice, so the slice of a Service whose pods
// run here is empty: the proxy must find the ready pods itself, the targetPort by name.
func TestTheProxyFallsBackToThisNodesReadyPods(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "from-pod\n")
			c.Close()
		}
	}()
	port := int32(backend.Addr().(*net.TCPAddr).Port)
	services, slices, pods := indexer(), indexer(), indexer()
	svc := service("ns", "api", "10.0.7.10", 8080)
	svc.Spec.Selector = map[string]string{"app": "api"}
	svc.Spec.Ports[0].TargetPort = intstr.FromString("web")
	_ = services.Add(svc)
	pod := func(name string, ready corev1.ConditionStatus, containerPort int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "api"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: containerPort}}}}},
			Status: corev1.PodStatus{PodIP: "127.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	_ = pods.Add(pod("ready", corev1.ConditionTrue, port))
	_ = pods.Add(pod("unready", corev1.ConditionFalse, 1)) // port 1: a connection sent there fails
	p := newProxy(t, "sg_test_local", services, slices, pods)
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", "10.0.7.10:8080", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != "from-pod\n" {
			t.Fatalf("connection %d got %q, want the ready pod's answer", i, got)
		}
	}
}
