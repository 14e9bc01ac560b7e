// Package node tests the real cluster node (harness.StartNode) on a control plane with its
// controllers: a pod pulls its image from the node's registry, gets an address of the pod
// range on the node's CNI bridge, is reached by Service ClusterIP and by DNS name through
// kube-proxy and CoreDNS, answers kubectl exec and logs through the kubelet, and its container
// and network namespace go when it is deleted; the node's Stop leaves nothing on the machine,
// and what a node killed without its Stop leaves, the next node releases. The shadow's
// Deployment, as shadowgate renders it, runs on it from the shadow image (shadow_test.go), and
// the chart installs shadowgate on it from shadowgate's own image (chart_test.go).
package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

const (
	nodeName  = "real-node"
	namespace = "realnode"
)

func TestRealNode(t *testing.T) {
	dir, k, node, stop := startNode(t)
	explain := func() string { return "the node's logs: " + strings.Join(node.LogPaths(), ", ") }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	bin := filepath.Join(dir, "webecho")
	build := exec.Command("go", "build", "-o", bin, "./testdata/webecho")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building webecho: %v\n%s", err, out)
	}
	pushed, err := node.PushBinaryImage(ctx, bin, "e2e/webecho:test")
	if err != nil {
		t.Fatal(err)
	}
	image, digest, _ := strings.Cut(pushed, "@")

	k.CreateNamespaces(ctx, t, namespace)
	k.MustRun(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: server
  namespace: %[1]s
  labels: {app: webecho}
spec:
  containers:
  - name: webecho
    image: %[2]s:test
    args: [serve, ":8080"]
    ports: [{containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: webecho
  namespace: %[1]s
spec:
  selector: {app: webecho}
  ports: [{port: 80, targetPort: 8080}]
`, namespace, image), "apply", "-f", "-")
	k.MustRun(ctx, t, "", "-n", namespace, "wait", "--for=condition=Ready", "--timeout=180s", "pod/server")

	// The client's image is the server's, exported by containerd as an OCI archive, pushed
	// back with PushArchive and pulled by a mirrored registry's name, as a policy's default
	// image name would be.
	archive := filepath.Join(dir, "webecho.tar")
	if _, err := node.Ctr(ctx, "-n", "k8s.io", "images", "export", archive, image+":test"); err != nil {
		t.Fatal(err)
	}
	archived, err := node.PushArchive(ctx, archive, "e2e/webecho-archive:test")
	if err != nil {
		t.Fatal(err)
	}
	_, archiveDigest, _ := strings.Cut(archived, "@")
	k.MustRun(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: client
  namespace: %s
spec:
  containers:
  - name: webecho
    image: ghcr.io/e2e/webecho-archive:test
    args: [serve, ":8081"]
`, namespace), "apply", "-f", "-")
	k.MustRun(ctx, t, "", "-n", namespace, "wait", "--for=condition=Ready", "--timeout=180s", "pod/client")
	// The same content as the server's: the kubelet names it by the image's first name.
	if got := getPod(ctx, t, k, "client").Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(got, "@"+archiveDigest) {
		t.Errorf("the client's imageID is %q, want the archive's digest %s", got, archiveDigest)
	}
	if images, err := node.Ctr(ctx, "-n", "k8s.io", "images", "ls", "-q"); err != nil || !strings.Contains(images, "ghcr.io/e2e/webecho-archive:test\n") {
		t.Errorf("containerd holds no ghcr.io/e2e/webecho-archive:test (%v):\n%s", err, images)
	}

	server := getPod(ctx, t, k, "server")
	if server.Spec.NodeName != nodeName {
		t.Errorf("the server pod runs on %q, want %q", server.Spec.NodeName, nodeName)
	}
	if got := server.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(got, "@"+digest) || !strings.HasPrefix(digest, "sha256:") {
		t.Errorf("the server's imageID is %q, want the pushed image's digest %s", got, digest)
	}
	_, pods, _ := net.ParseCIDR(node.PodCIDR)
	for _, p := range []podStatus{server, getPod(ctx, t, k, "client")} {
		ip := net.ParseIP(p.Status.PodIP)
		if ip == nil || !pods.Contains(ip) || p.Status.PodIP == node.IP || p.Status.PodIP == p.Status.HostIP {
			t.Errorf("pod %s has the address %q (host %q), want its own in the pod range %s", p.Metadata.Name, p.Status.PodIP, p.Status.HostIP, node.PodCIDR)
		}
	}

	clusterIP := k.MustRun(ctx, t, "", "-n", namespace, "get", "service", "webecho", "-o", "jsonpath={.spec.clusterIP}")
	// kube-proxy's nftables table, in the node's own network namespace, carries the ClusterIP.
	harness.Eventually(t, 60*time.Second, "kube-proxy's nftables set of ClusterIPs holds "+clusterIP, func() (bool, string) {
		out, err := exec.Command("nsenter", "--net="+node.NetnsPath, "nft", "list", "set", "ip", "kube-proxy", "cluster-ips").CombinedOutput()
		return err == nil && strings.Contains(string(out), clusterIP), string(out)
	}, explain)
	for _, url := range []string{
		"http://" + clusterIP + "/",
		"http://webecho." + namespace + ".svc.cluster.local/",
		"http://webecho/",
	} {
		var last harness.Result
		harness.Eventually(t, 60*time.Second, "the client reaches the server at "+url, func() (bool, string) {
			last = k.Run(ctx, "", "-n", namespace, "exec", "client", "--", "/webecho", "get", url)
			return last.Err == nil && last.Stdout == "webecho server\n", last.Output()
		}, explain)
	}

	// A server of this machine on the node's link is reached from a pod, masqueraded as the
	// node.
	host, err := net.Listen("tcp", node.HostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	hostSeen := make(chan string, 1)
	go func() {
		_ = http.Serve(host, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case hostSeen <- r.RemoteAddr:
			default:
			}
			fmt.Fprintln(w, "this machine")
		}))
	}()
	t.Cleanup(func() { host.Close() })
	if out := k.MustRun(ctx, t, "", "-n", namespace, "exec", "client", "--", "/webecho", "get", "http://"+host.Addr().String()+"/"); out != "this machine\n" {
		t.Errorf("the client got %q from this machine's server at %s", out, host.Addr())
	}
	if from, _, _ := net.SplitHostPort(<-hostSeen); from != node.IP {
		t.Errorf("this machine's server saw the client's request from %s, want the node's address %s", from, node.IP)
	}

	// What the node's daemons write to paths they do not let be configured is the node's own.
	if results, _ := os.ReadDir("/var/lib/cni/results"); slices.ContainsFunc(results, func(e os.DirEntry) bool {
		return strings.HasPrefix(e.Name(), "pods-"+filepath.Base(node.NetnsPath)+"-")
	}) {
		t.Errorf("libcni cached the node's sandboxes in this machine's /var/lib/cni/results")
	}
	if links, _ := os.ReadDir("/var/log/containers"); slices.ContainsFunc(links, func(e os.DirEntry) bool {
		target, _ := os.Readlink(filepath.Join("/var/log/containers", e.Name()))
		return strings.HasPrefix(target, node.Dir+"/")
	}) {
		t.Errorf("the kubelet linked the node's container logs in this machine's /var/log/containers")
	}

	// The kubelet's API, which exec and logs went through, refuses a client without the API
	// server's certificate.
	anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // #nosec G402 -- only the refusal is read
	}}
	if resp, err := anonymous.Get("https://" + net.JoinHostPort(node.IP, "10250") + "/pods"); err != nil {
		t.Errorf("the kubelet's API: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the kubelet's API answered a client without a certificate %s, want 401 Unauthorized", resp.Status)
		}
	}

	logs := k.MustRun(ctx, t, "", "-n", namespace, "logs", "server")
	if !strings.Contains(logs, "served GET / to "+getPod(ctx, t, k, "client").Status.PodIP+":") {
		t.Errorf("kubectl logs server shows no request from the client's pod address:\n%s", logs)
	}

	containerID := strings.TrimPrefix(server.Status.ContainerStatuses[0].ContainerID, "containerd://")
	netnsPath := containerNetns(ctx, t, node, containerID)
	if _, err := os.Stat(netnsPath); err != nil {
		t.Fatalf("the server's network namespace %s: %v", netnsPath, err)
	}
	k.MustRun(ctx, t, "", "-n", namespace, "delete", "pod", "server", "--wait=true", "--timeout=120s")
	harness.Eventually(t, 60*time.Second, "the server's container stopped and its network namespace removed", func() (bool, string) {
		tasks, err := node.Ctr(ctx, "-n", "k8s.io", "tasks", "ls", "-q")
		if err != nil {
			return false, err.Error()
		}
		if strings.Contains(tasks, containerID) {
			return false, "containerd still runs " + containerID
		}
		if _, err := os.Stat(netnsPath); err == nil {
			return false, netnsPath + " is still there"
		}
		return true, ""
	}, explain)

	var mountns syscall.Stat_t
	if err := syscall.Stat(node.MountnsPath, &mountns); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stopping the node: %v", err)
	}
	if _, err := os.Stat(node.NetnsPath); err == nil {
		t.Errorf("the node's network namespace %s is still there after Stop", node.NetnsPath)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), node.Dir+"/") {
		t.Errorf("mounts under %s are left after Stop (%v)", node.Dir, err)
	}
	// The mount namespace, and every mount of the node's containers in it, is gone once no
	// process is in it.
	if pids := inNamespace(t, fmt.Sprintf("mnt:[%d]", mountns.Ino)); len(pids) > 0 {
		t.Errorf("processes %v are still in the node's mount namespace after Stop", pids)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", filepath.Base(node.NetnsPath))); err == nil {
		t.Errorf("the node's memory cgroup is still there after Stop")
	}
}

// inNamespace are the processes whose mount namespace is ns (mnt:[inode]).
func inNamespace(t *testing.T, ns string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		if link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && link == ns {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// killedChild, set, makes TestANodeKilledWithoutItsStopIsReleasedByTheNext the node that is
// killed: it starts a node, says so and waits to be killed.
const killedChild = "SHADOWGATE_NODE_KILLED_CHILD"

func TestANodeKilledWithoutItsStopIsReleasedByTheNext(t *testing.T) {
	if os.Getenv(killedChild) != "" {
		_, _, node, _ := startNode(t)
		fmt.Printf("node-ready %s %s %s\n", node.NetnsPath, node.MountnsPath, node.Dir)
		select {}
	}
	if testing.Short() {
		t.Skip("-short: starts real kubelets, containerd, kube-proxy and CoreDNS as root")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestANodeKilledWithoutItsStopIsReleasedByTheNext$", "-test.v", "-test.timeout=10m")
	child.Env = append(os.Environ(), killedChild+"=1")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan []string, 1)
	var printed strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "node-ready" {
				ready <- f[1:]
			}
		}
		close(ready)
	}()
	var netns, mountns, childDir string
	select {
	case f, ok := <-ready:
		if !ok {
			t.Fatalf("the child test ended without starting its node:\n%s", printed.String())
		}
		netns, mountns, childDir = f[0], f[1], f[2]
	case <-time.After(5 * time.Minute):
		_ = child.Process.Kill()
		t.Fatal("the child test started no node within 5m")
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(childDir)) })
	var ns syscall.Stat_t
	if err := syscall.Stat(mountns, &ns); err != nil {
		t.Fatal(err)
	}
	mnt := fmt.Sprintf("mnt:[%d]", ns.Ino)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	// The kill leaves the node's network namespace, and containerd's shims and CoreDNS's
	// containers in its mount namespace.
	if _, err := os.Stat(netns); err != nil {
		t.Fatalf("the killed node's network namespace: %v", err)
	}
	if pids := inNamespace(t, mnt); len(pids) == 0 {
		t.Fatal("no process of the killed node outlived it: nothing for the next node to release")
	}

	startNode(t)
	if _, err := os.Stat(netns); err == nil {
		t.Errorf("the killed node's network namespace %s is still there after the next node started", netns)
	}
	if pids := inNamespace(t, mnt); len(pids) > 0 {
		t.Errorf("processes %v of the killed node are still running after the next node started", pids)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", filepath.Base(netns))); err == nil {
		t.Errorf("the killed node's memory cgroup is still there after the next node started")
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), childDir+"/") {
		t.Errorf("mounts under %s are left after the next node started (%v)", childDir, err)
	}
}

// startNode starts a control plane with its controllers and a node for it under a directory
// of the test's own, kept if the test fails, and returns the directory, kubectl for the
// cluster's admin, the node, and a stop that stops the node once (a cleanup stops it if the
// test does not).
func startNode(t *testing.T) (string, harness.Kubectl, *harness.Node, func() error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real kubelet, containerd, kube-proxy and CoreDNS as root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the real node runs containers, a network namespace and cgroups: run this test as root")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := harness.BuildTools(root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	nodeTools, err := harness.BuildNodeTools(root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "shadowgate-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("state and logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	cp, err := harness.StartCluster(tools, filepath.Join(dir, "cluster"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	k := harness.Kubectl{Path: tools.Kubectl, Kubeconfig: cp.AdminKubeconfig}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	node, err := harness.StartNode(ctx, nodeTools, cp, k, filepath.Join(dir, "node"), nodeName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s Ready with kube-proxy and CoreDNS in %s (pods %s, node %s)", nodeName, time.Since(started).Round(time.Second), node.PodCIDR, node.IP)
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		return node.Stop()
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
	})
	return dir, k, node, stop
}

type podStatus struct {
	Metadata struct{ Name string }
	Spec     struct{ NodeName string }
	Status   struct {
		PodIP, HostIP     string
		ContainerStatuses []struct{ ImageID, ContainerID string }
	}
}

func getPod(ctx context.Context, t *testing.T, k harness.Kubectl, name string) podStatus {
	t.Helper()
	var p podStatus
	if err := json.Unmarshal([]byte(k.MustRun(ctx, t, "", "-n", namespace, "get", "pod", name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// containerNetns is the network namespace the container joined, from its OCI spec.
func containerNetns(ctx context.Context, t *testing.T, node *harness.Node, id string) string {
	t.Helper()
	out, err := node.Ctr(ctx, "-n", "k8s.io", "containers", "info", id)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("ctr containers info %s: %v\n%s", id, err, out)
	}
	for _, ns := range info.Spec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path
		}
	}
	t.Fatalf("container %s joined no network namespace by path:\n%s", id, out)
	return ""
}
