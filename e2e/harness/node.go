package harness

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/interlink-hq/shadowgate/certs"
)

// NodeTools are the real node's binaries, built by hack/node-tools.sh.
type NodeTools struct {
	Kubelet, KubeProxy string
	Containerd, Shim   string // containerd and containerd-shim-runc-v2
	Ctr                string
	CoreDNS            string // static: it runs in an image of its own
	Registry, OCIImage string // distribution's registry, and the tool that pushes into it
	Pause              string // the kubelet's pause container, static
}

// BuildNodeTools runs hack/node-tools.sh in the repository at root: it builds what bin/ lacks
// (minutes on a fresh machine) and names each binary.
func BuildNodeTools(root string, progress *os.File) (NodeTools, error) {
	p, err := runBuildScript(root, "node-tools.sh", progress, "kubelet", "kube-proxy", "containerd",
		"containerd-shim-runc-v2", "ctr", "coredns", "registry", "ociimage", "pause")
	if err != nil {
		return NodeTools{}, err
	}
	return NodeTools{Kubelet: p["kubelet"], KubeProxy: p["kube-proxy"], Containerd: p["containerd"],
		Shim: p["containerd-shim-runc-v2"], Ctr: p["ctr"], CoreDNS: p["coredns"], Registry: p["registry"],
		OCIImage: p["ociimage"], Pause: p["pause"]}, nil
}

// The cluster's Service range (the API server's --service-cluster-ip-range) and the addresses
// in it that a cluster fixes: the API server's own Service and the cluster DNS.
const (
	ServiceCIDR      = "10.0.0.0/16"
	APIServiceIP     = "10.0.0.1"
	ClusterDNSIP     = "10.0.0.10"
	ClusterDomain    = "cluster.local"
	kubeSystem       = "kube-system"
	coreDNSImagePath = "coredns/coredns"
	pauseImagePath   = "pause"
)

// MirroredRegistries are the registries whose names the node resolves to its own registry, as
// an air-gapped site's mirror does: an image pushed as <Node.Registry>/<path> pulls as
// <mirrored registry>/<path> too, and nothing is fetched from the registry named.
var MirroredRegistries = []string{"registry.k8s.io", "ghcr.io", "docker.io"}

// Node is a real Kubernetes node on this machine: containerd and runc run its pods, each in a
// network namespace of its own on a CNI bridge with an address of the pod range; the kubelet
// registers it with the API server and serves exec and logs; kube-proxy (nftables mode)
// carries Service ClusterIPs; CoreDNS, a Deployment on the node, answers for Service names.
//
// The node is a host of its own: a network namespace (NetnsPath) joined to this machine by a
// veth pair, and a mount namespace (MountnsPath), in which containerd, the kubelet, kube-proxy
// and the pods' bridge run, so its nftables rules, ports, routes and mounts are its own and go
// with it. In that namespace 127.0.0.1
// reaches the API server's and the registry's ports of this machine, so an image name and a
// kubeconfig mean the same on both sides.
type Node struct {
	Name string
	Dir  string
	// IP is the node's address (its InternalIP); HostIP this machine's end of the link, where
	// the node and its pods reach this machine.
	IP, HostIP string
	// PodCIDR is the range the pods' addresses come from.
	PodCIDR string
	// Registry is the registry's host:port, 127.0.0.1 both here and on the node.
	Registry string
	// NetnsPath is the node's network namespace; MountnsPath its mount namespace, where the
	// node's daemons and containers mount what they mount.
	NetnsPath, MountnsPath string
	// Logs are the node's daemons' logs, by name.
	Logs map[string]string

	tools      NodeTools
	k          Kubectl
	netns      string
	cgroupRoot string
	socket     string // containerd's
	procs      []*process
	forwarders []*forwarder
	claim      *os.File // the lock on the node's address range
}

// StartNode starts a node called name for the cluster cp under dir and returns once it is
// Ready, kube-proxy has synced and CoreDNS answers. It needs root. Stop undoes all of it.
func StartNode(ctx context.Context, tools NodeTools, cp *ControlPlane, k Kubectl, dir, name string) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node runs containers, a network namespace and cgroups as root: run it as root")
	}
	for _, tool := range []string{"ip", "nsenter", "runc", "iptables", "nft", "mount", "unshare", cniBinDir + "/bridge",
		cniBinDir + "/host-local", cniBinDir + "/portmap", cniBinDir + "/loopback"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the node needs %s (hack/test-deps.sh installs it): %w", tool, err)
		}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, Dir: dir, tools: tools, k: k, Logs: map[string]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := n.startNetwork(); err != nil {
		return nil, err
	}
	if err := n.makeMountNamespace(); err != nil {
		return nil, err
	}
	if err := n.startRegistry(); err != nil {
		return nil, err
	}
	apiHostPort := strings.TrimPrefix(cp.Server, "https://")
	_, apiPort, _ := net.SplitHostPort(apiHostPort)
	for listen, to := range map[string]string{":" + apiPort: apiHostPort, ":" + n.registryPort(): n.Registry} {
		f, err := forward(n.NetnsPath, listen, to)
		if err != nil {
			return nil, err
		}
		n.forwarders = append(n.forwarders, f)
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx, cp); err != nil {
		return nil, err
	}
	if err := n.startKubeProxy(ctx, cp); err != nil {
		return nil, err
	}
	apiPortN, _ := strconv.Atoi(apiPort)
	if err := n.applyAPIEndpoints(ctx, apiPortN); err != nil {
		return nil, err
	}
	if err := n.deployCoreDNS(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

const cniBinDir = "/usr/lib/cni" // Debian's containernetworking-plugins

// startNetwork makes the node's network namespace and the veth pair joining it to this
// machine. The node's /30 link is 10.215.k.0/30 and its pods' range 10.214.k.0/24, with k at
// random and claimed (claimRange), so two nodes on one machine never share addresses; the
// namespace is sg-node-<k>. What nodes killed without their Stop left is released first.
func (n *Node) startNetwork() error {
	if err := loadBridgeNetfilter(); err != nil {
		return err
	}
	if err := sweepStaleNodes(); err != nil {
		return fmt.Errorf("releasing what nodes killed without their Stop left: %w", err)
	}
	taken, err := hostAddresses()
	if err != nil {
		return err
	}
	for range 50 {
		r, err := rand.Int(rand.Reader, big.NewInt(256))
		if err != nil {
			return err
		}
		k := int(r.Int64())
		ip, pods := fmt.Sprintf("10.215.%d.2", k), fmt.Sprintf("10.214.%d.0/24", k)
		if slices.ContainsFunc(taken, func(a *net.IPNet) bool {
			_, p, _ := net.ParseCIDR(pods)
			return a.Contains(net.ParseIP(ip)) || p.Contains(a.IP)
		}) {
			continue
		}
		claim, ok, err := claimRange(k)
		if err != nil {
			return err
		}
		if !ok {
			continue // a live node holds k
		}
		n.claim = claim
		if err := claim.Truncate(0); err != nil {
			return err
		}
		if _, err := claim.WriteAt([]byte(n.Dir+"\n"), 0); err != nil {
			return err
		}
		netns := fmt.Sprintf("sg-node-%d", k)
		if out, err := exec.Command("ip", "netns", "add", netns).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns add %s: %v %s", netns, err, out)
		}
		n.netns, n.NetnsPath = netns, "/run/netns/"+netns
		n.IP, n.HostIP, n.PodCIDR = ip, fmt.Sprintf("10.215.%d.1", k), pods
		n.cgroupRoot = "/" + netns
		hostIf, nodeIf := fmt.Sprintf("sgnh%d", k), fmt.Sprintf("sgnn%d", k)
		for _, args := range [][]string{
			{"link", "add", hostIf, "type", "veth", "peer", "name", nodeIf, "netns", netns},
			{"addr", "add", n.HostIP + "/30", "dev", hostIf},
			{"link", "set", hostIf, "up"},
			{"-n", netns, "addr", "add", n.IP + "/30", "dev", nodeIf},
			{"-n", netns, "link", "set", nodeIf, "up"},
			{"-n", netns, "link", "set", "lo", "up"},
			{"-n", netns, "route", "add", "default", "via", n.HostIP},
			// This machine reaches the pods through the node, as a cluster's other hosts
			// route a node's pod range to it; the route goes with the link.
			{"route", "add", n.PodCIDR, "via", n.IP},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		// Routed Service traffic and bridged replies both pass the node's netfilter, as on
		// a node with br_netfilter loaded.
		return inNetns(n.NetnsPath, func() error {
			for file, value := range map[string]string{
				"/proc/sys/net/ipv4/ip_forward":                 "1",
				"/proc/sys/net/bridge/bridge-nf-call-iptables":  "1",
				"/proc/sys/net/bridge/bridge-nf-call-ip6tables": "1",
			} {
				if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
					return fmt.Errorf("setting %s in the node's namespace: %w", file, err)
				}
			}
			return nil
		})
	}
	return errors.New("no free node address range 10.214.k.0/24 after 50 tries: too many nodes on this machine")
}

// loadBridgeNetfilter loads br_netfilter, by which bridged pod traffic passes the node's
// netfilter (kube-proxy's rules for a Service whose pod is on the same bridge), unless the
// kernel has it already (built in, or loaded).
func loadBridgeNetfilter() error {
	if _, err := os.Stat("/proc/sys/net/bridge"); err == nil {
		return nil
	}
	if out, err := exec.Command("modprobe", "br_netfilter").CombinedOutput(); err != nil {
		return fmt.Errorf("the node needs the kernel's br_netfilter (/proc/sys/net/bridge is missing) and `modprobe br_netfilter` failed: %v %s; load it as root on this machine", err, out)
	}
	return nil
}

// kubeletSysctls are the kernel settings the kubelet sets to these values when they differ
// (or, with protectKernelDefaults, refuses to start): on this shared machine its mount
// namespace sees these values, so it neither changes the machine's panic and overcommit
// behaviour nor refuses.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// makeMountNamespace makes the node's mount namespace, kept by a bind mount at MountnsPath
// (under a private mount of its own, as ip netns keeps /run/netns, so the namespace is not
// propagated anywhere). Every mount the node's daemons and containers make is there alone
// and goes with the namespace, once its last process has exited and MountnsPath is unmounted.
func (n *Node) makeMountNamespace() error {
	dir := filepath.Join(n.Dir, "ns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, args := range [][]string{{"--bind", dir, dir}, {"--make-private", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("mount %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	n.MountnsPath = filepath.Join(dir, "mnt")
	if err := os.WriteFile(n.MountnsPath, nil, 0o644); err != nil {
		return err
	}
	values := filepath.Join(n.Dir, "sysctl")
	// Paths the node's daemons write to and do not let be configured are the node's own, so
	// nothing of it is left on the machine even when it is killed: containerd's shims keep
	// their sockets in /run/containerd/s, libcni its cache in /var/lib/cni, the kubelet its
	// links to the containers' logs in /var/log/containers.
	script := "set -e\nmkdir -p /run/containerd\nmount -t tmpfs -o mode=0700 tmpfs /run/containerd\n"
	for _, d := range []struct{ own, path string }{
		{filepath.Join(n.Dir, "cni", "lib"), "/var/lib/cni"},
		{filepath.Join(n.Dir, "container-logs"), "/var/log/containers"},
	} {
		if err := os.MkdirAll(d.own, 0o755); err != nil {
			return err
		}
		script += fmt.Sprintf("mkdir -p %s\nmount --bind %s %s\n", d.path, d.own, d.path)
	}
	for key, v := range kubeletSysctls {
		f := filepath.Join(values, strings.ReplaceAll(key, "/", "."))
		if err := os.MkdirAll(values, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, []byte(v+"\n"), 0o444); err != nil {
			return err
		}
		script += fmt.Sprintf("mount --bind %s /proc/sys/%s\n", f, key)
	}
	if out, err := exec.Command("unshare", "--mount="+n.MountnsPath, "--propagation", "private", "sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("making the node's mount namespace: %v\n%s", err, out)
	}
	return nil
}

// hostAddresses are the networks of this machine's addresses.
func hostAddresses() ([]*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var nets []*net.IPNet
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			nets = append(nets, n)
		}
	}
	return nets, nil
}

// inNode starts a daemon of the node inside its network and mount namespaces.
func (n *Node) inNode(name, bin string, args ...string) (*process, error) {
	log := filepath.Join(n.Dir, name+".log")
	p, err := startProcess(name, log, "nsenter", append([]string{"--net=" + n.NetnsPath, "--mount=" + n.MountnsPath, "--", bin}, args...)...)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	n.Logs[name] = log
	return p, nil
}

// nodeHTTPReady is a poll check that GETs url from inside the node and wants 200.
func (n *Node) nodeHTTPReady(url string) func() error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialInNetns(ctx, n.NetnsPath, network, addr)
		},
	}}
	return func() error { return getOK(hc, url) }
}

// Stop takes the node down and leaves nothing of it on the machine: the node is cordoned and
// its pods deleted, so the kubelet stops their containers and containerd tears down their
// networks (CNI DEL); then kube-proxy, the kubelet and containerd stop, any container process
// left in the node's cgroups and any shim of its containerd is killed, so the mount namespace
// goes, with every mount of the kubelet and the containers, once MountnsPath is unmounted (with
// any other mount under the node's directory); its cgroups are removed, and the network
// namespace goes, with the bridge, the pods' veths and every nftables and iptables rule of
// kube-proxy and the CNI plugins. The Node object is deleted from the API server.
func (n *Node) Stop() error {
	var errs []error
	if n.socket != "" {
		errs = append(errs, n.drain())
	}
	registered := n.kubeletRunning()
	for i := len(n.procs) - 1; i >= 0; i-- {
		errs = append(errs, n.procs[i].stop(20*time.Second))
	}
	if registered {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := n.k.Must(ctx, "", "delete", "node", n.Name, "--ignore-not-found")
		cancel()
		errs = append(errs, err)
	}
	for _, f := range n.forwarders {
		f.stop()
	}
	errs = append(errs, n.release())
	return errors.Join(errs...)
}

// RouteServices routes the cluster's Service range (ServiceCIDR) from this machine through the
// node, whose kube-proxy carries a ClusterIP to a pod, so a client here reaches a Service as a
// pod does. One node on the machine may hold the range; the route goes with the node's link.
func (n *Node) RouteServices() error {
	_, services, _ := net.ParseCIDR(ServiceCIDR)
	taken, err := hostAddresses()
	if err != nil {
		return err
	}
	for _, a := range taken {
		if services.Contains(a.IP) || a.Contains(services.IP) {
			return fmt.Errorf("this machine's address %s overlaps the cluster's Service range %s: the local site cannot route it through its node; run it on a machine outside that range", a, ServiceCIDR)
		}
	}
	if out, err := exec.Command("ip", "-o", "route", "show", "to", "root", ServiceCIDR).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("this machine already routes inside the cluster's Service range %s (another local site may hold it): %v %s", ServiceCIDR, err, out)
	}
	if out, err := exec.Command("ip", "route", "add", ServiceCIDR, "via", n.IP).CombinedOutput(); err != nil {
		return fmt.Errorf("routing the Service range %s through node %s (another local site may hold it; `ip route show %s` names its node): %v %s",
			ServiceCIDR, n.Name, ServiceCIDR, err, out)
	}
	return nil
}

// release removes what the node's daemons and containers leave on the machine once the
// daemons are down, and gives up the node's claim on its address range.
func (n *Node) release() error {
	var errs []error
	if n.cgroupRoot != "" {
		errs = append(errs, killCgroup(n.cgroupRoot))
	}
	if n.socket != "" {
		errs = append(errs, killByArg(n.socket))
	}
	if n.Dir != "" {
		errs = append(errs, killMountNamespace(filepath.Join(n.Dir, "mnt")))
		errs = append(errs, unmountUnder(n.Dir))
	}
	if n.cgroupRoot != "" {
		errs = append(errs, removeCgroup(n.cgroupRoot))
	}
	if n.netns != "" {
		if _, err := os.Stat(n.NetnsPath); err == nil {
			if out, err := exec.Command("ip", "netns", "del", n.netns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %v %s", n.netns, err, out))
			}
		}
	}
	if n.claim != nil {
		if err := errors.Join(errs...); err == nil {
			errs = append(errs, n.claim.Truncate(0)) // nothing left to release
		}
		n.claim.Close() // unlocks
		n.claim = nil
	}
	return errors.Join(errs...)
}

// claimDir holds a lock file per address range k, sg-node-<k>.lock: a node holds its lock
// (flock) while it lives, and writes its directory in it, so a later node finds what a node
// killed without its Stop left behind. The files stay: removing one could let two nodes lock
// the same k through different files.
const claimDir = "/run/lock"

// claimRange locks address range k, or reports false when a live node holds it.
func claimRange(k int) (*os.File, bool, error) {
	if err := os.MkdirAll(claimDir, 0o755); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(claimDir, fmt.Sprintf("sg-node-%d.lock", k)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// sweepStaleNodes releases what every node killed without its Stop (its test binary killed
// with SIGKILL, say) left: the containers and shims that outlived it, its mounts, cgroups,
// CNI cache and network namespace. Live nodes hold their claims and are not touched.
func sweepStaleNodes() error {
	locks, err := filepath.Glob(filepath.Join(claimDir, "sg-node-*.lock"))
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range locks {
		var k int
		if _, err := fmt.Sscanf(filepath.Base(l), "sg-node-%d.lock", &k); err != nil {
			continue
		}
		claim, ok, err := claimRange(k)
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		dir, _ := io.ReadAll(claim)
		stale := staleNode(k, strings.TrimSpace(string(dir)))
		stale.claim = claim
		if _, err := os.Stat(stale.NetnsPath); err == nil || len(dir) > 0 {
			errs = append(errs, stale.release())
		} else {
			claim.Close()
		}
	}
	return errors.Join(errs...)
}

// staleNode is the node of range k with its directory dir, as far as release needs it.
func staleNode(k int, dir string) *Node {
	netns := fmt.Sprintf("sg-node-%d", k)
	n := &Node{netns: netns, NetnsPath: "/run/netns/" + netns, cgroupRoot: "/" + netns, Dir: dir}
	if dir != "" {
		n.socket = filepath.Join(dir, "containerd", "containerd.sock")
	}
	return n
}

// drain cordons the node, deletes its pods at once and waits (a minute at most) for the
// kubelet to have stopped every pod sandbox: no task is left and containerd has removed every
// pod network namespace, which it does after CNI DEL.
func (n *Node) drain() error {
	if n.kubeletRunning() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		_, _ = n.k.Must(ctx, "", "cordon", n.Name)
		_, _ = n.k.Must(ctx, "", "delete", "pods", "--all-namespaces", "--field-selector", "spec.nodeName="+n.Name,
			"--grace-period=0", "--force", "--wait=false")
		deadline := time.Now().Add(60 * time.Second)
		for {
			tasks, err := n.Ctr(ctx, "-n", "k8s.io", "tasks", "ls", "-q")
			netns, _ := os.ReadDir(n.podNetnsDir())
			if err == nil && strings.TrimSpace(tasks) == "" && len(netns) == 0 {
				break
			}
			if time.Now().After(deadline) {
				break // what is left is killed below
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	// Whatever the kubelet did not stop: kill and delete the tasks, so each shim exits and
	// removes its socket.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tasks, err := n.Ctr(ctx, "-n", "k8s.io", "tasks", "ls", "-q")
	if err != nil {
		return nil // containerd is down already: the sweep below kills what is left
	}
	for _, id := range strings.Fields(tasks) {
		_, _ = n.Ctr(ctx, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
		_, _ = n.Ctr(ctx, "-n", "k8s.io", "tasks", "rm", "-f", id)
	}
	return nil
}

// podNetnsDir is where containerd keeps the pods' network namespaces.
func (n *Node) podNetnsDir() string {
	return filepath.Join(n.Dir, "containerd", "state", "io.containerd.grpc.v1.cri", "netns")
}

func (n *Node) kubeletRunning() bool {
	for _, p := range n.procs {
		if p.name == "kubelet" {
			return p.exitedErr() == nil
		}
	}
	return false
}

// Ctr runs containerd's ctr against the node's containerd and returns what it printed on
// stdout.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, n.tools.Ctr, append([]string{"--address", n.socket}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// cgroupHierarchies are the mount points of this machine's cgroup v1 hierarchies.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup" {
				dirs = append(dirs, fields[4])
			}
		}
	}
	return dirs, sc.Err()
}

// makeCgroup creates the node's cgroup root in every hierarchy, the cpuset one with its
// parent's CPUs and memory nodes, for the kubelet to put its pods under.
func makeCgroup(root string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		d := filepath.Join(h, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// killCgroup kills every process in the node's cgroups, in every hierarchy.
func killCgroup(root string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
	return nil
}

// removeCgroup removes the node's cgroups, deepest first, waiting a little for killed
// processes to leave them.
func removeCgroup(root string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range dirs {
		var tree []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, path)
			}
			return nil
		})
		for i := len(tree) - 1; i >= 0; i-- {
			var err error
			for range 50 {
				if err = syscall.Rmdir(tree[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", tree[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// killMountNamespace kills every process in the mount namespace kept at path (a node's
// MountnsPath; nothing when it keeps none), and waits, ten seconds at most, until none is
// left: a process of a killed node that is in neither its cgroup nor a shim of its containerd
// (a daemon dying of its parent's death, slow on loaded cores) would otherwise outlive the
// release.
func killMountNamespace(path string) error {
	const nsfsMagic = 0x6e736673 // a namespace file bound at path; anything else keeps none
	var fs syscall.Statfs_t
	var st syscall.Stat_t
	if syscall.Statfs(path, &fs) != nil || fs.Type != nsfsMagic || syscall.Stat(path, &st) != nil {
		return nil
	}
	ns := fmt.Sprintf("mnt:[%d]", st.Ino)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		left := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && link == ns {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the mount namespace %s are still there 10s after SIGKILL", left, path)
		}
	}
}

// killByArg kills every process with arg among its arguments: the node's containerd shims,
// which containerd starts in sessions of their own with its socket's address.
func killByArg(arg string) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// unmountUnder unmounts every mount below dir, deepest first: the containers' root
// filesystems, the sandboxes' shm, the pods' network namespaces and the kubelet's volumes.
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var errs []error
	for range 5 { // a mount may hide another at the same point
		points, err := mountsUnder(abs)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for i := len(points) - 1; i >= 0; i-- {
			if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", points[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder are the mount points below dir, in the order they were mounted.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		// mountinfo escapes spaces and the like as \ooo; the node's paths have none.
		if p := fields[4]; strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	return points, sc.Err()
}

// cniNetwork is the name of the pods' CNI network, the node's own.
func (n *Node) cniNetwork() string { return "pods-" + n.netns }

// registryPort is the registry's port.
func (n *Node) registryPort() string {
	_, port, _ := net.SplitHostPort(n.Registry)
	return port
}

// writeServing writes a serving certificate for the kubelet's API at the node's address.
func (n *Node) writeServing() (TLSFiles, error) {
	bundle, err := certs.SelfSigned([]string{n.IP}, time.Now(), 24*time.Hour)
	if err != nil {
		return TLSFiles{}, err
	}
	d := filepath.Join(n.Dir, "kubelet-serving")
	if err := bundle.WriteDir(d); err != nil {
		return TLSFiles{}, err
	}
	return TLSFiles{CA: filepath.Join(d, certs.CAFile), Cert: filepath.Join(d, certs.CertFile), Key: filepath.Join(d, certs.KeyFile)}, nil
}
