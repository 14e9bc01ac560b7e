package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// startRegistry starts distribution's registry on a free loopback port, its storage under the
// node's directory, and waits for its API to answer.
func (n *Node) startRegistry() error {
	p, addr, err := startRegistry(n.tools.Registry, filepath.Join(n.Dir, "registry"), filepath.Join(n.Dir, "registry.log"))
	if err != nil {
		return err
	}
	n.Registry = addr
	n.procs = append(n.procs, p)
	n.Logs["registry"] = p.log
	return nil
}

// PushBinaryImage pushes an image of one static binary, /<its file name>, its entrypoint, to
// the node's registry as <Registry>/<path> (path: name:tag) and returns that name with the
// image's digest, which is how the node pulls it.
func (n *Node) PushBinaryImage(ctx context.Context, bin, path string) (string, error) {
	return n.ociimage(ctx, "push-binary", bin, path)
}

// PushArchive pushes the image of an OCI layout (a directory or a tar of one) or of a
// `docker save` tar to the node's registry as <Registry>/<path>, and returns that name with
// the image's digest.
func (n *Node) PushArchive(ctx context.Context, archive, path string) (string, error) {
	return n.ociimage(ctx, "push-archive", archive, path)
}

// PushShadowImage pushes the shadow image's archive (hack/build-shadow-image.sh) as the
// policy's default image, once per tag suffix ("" for the default tag itself).
func (n *Node) PushShadowImage(ctx context.Context, archive string, suffixes ...string) error {
	for _, suffix := range suffixes {
		if err := n.PushMirrored(ctx, archive, policy.DefaultImage+suffix); err != nil {
			return err
		}
	}
	return nil
}

// PushMirrored pushes an archive's image (as PushArchive) so that the node pulls it as name,
// an image of a registry it mirrors (MirroredRegistries).
func (n *Node) PushMirrored(ctx context.Context, archive, name string) error {
	registry, path, ok := strings.Cut(name, "/")
	if !ok || !slices.Contains(MirroredRegistries, registry) {
		return fmt.Errorf("image %s is not of a registry the node mirrors (%s)", name, strings.Join(MirroredRegistries, ", "))
	}
	_, err := n.PushArchive(ctx, archive, path)
	return err
}

// pushTool pushes an image of a tool of bin/ as /<name>, without the version its file name
// carries.
func (n *Node) pushTool(ctx context.Context, bin, name, path string) (string, error) {
	dir := filepath.Join(n.Dir, "images", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(dir, name)
	if err := os.Symlink(bin, link); err != nil && !os.IsExist(err) {
		return "", err
	}
	return n.PushBinaryImage(ctx, link, path)
}

func (n *Node) ociimage(ctx context.Context, command, source, path string) (string, error) {
	cmd := exec.CommandContext(ctx, n.tools.OCIImage, command, source, n.Registry+"/"+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ociimage %s %s %s: %w\n%s", command, source, path, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// startContainerd writes containerd's configuration (its own root, state, socket, runc state
// and pod network namespaces under the node's directory; cgroupfs; the CNI plugins of
// Debian; pulls from the node's registry over plain HTTP, for its own name and the mirrored
// ones), pushes the pause image the sandboxes run, and starts containerd in the node.
func (n *Node) startContainerd(ctx context.Context) error {
	dir := filepath.Join(n.Dir, "containerd")
	hosts := filepath.Join(dir, "certs.d")
	registry := "http://" + n.Registry
	for _, host := range append([]string{n.Registry}, MirroredRegistries...) {
		if err := os.MkdirAll(filepath.Join(hosts, host), 0o755); err != nil {
			return err
		}
		// server is the registry itself too, so a missing image fails here and nothing is
		// fetched from the registry the name is of.
		if err := os.WriteFile(filepath.Join(hosts, host, "hosts.toml"), []byte(fmt.Sprintf(`server = %q

[host.%q]
  capabilities = ["pull", "resolve"]
`, registry, registry)), 0o644); err != nil {
			return err
		}
	}
	pause := pauseImagePath + ":" + strings.TrimPrefix(filepath.Base(n.tools.Pause), "pause-")
	if _, err := n.pushTool(ctx, n.tools.Pause, "pause", pause); err != nil {
		return err
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	cni := filepath.Join(n.Dir, "cni")
	if err := os.MkdirAll(filepath.Join(cni, "net.d"), 0o755); err != nil {
		return err
	}
	// The bridge masquerades what leaves the pod range; host-local keeps its leases with the
	// node.
	if err := os.WriteFile(filepath.Join(cni, "net.d", "10-pods.conflist"), []byte(fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": "sgpods0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.cniNetwork(), n.PodCIDR, filepath.Join(cni, "ipam"))), 0o644); err != nil {
		return err
	}
	n.socket = filepath.Join(dir, "containerd.sock")
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %q

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = %t
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %q
        Root = %q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.socket, n.socket+".ttrpc",
		MirroredRegistries[0]+"/"+pause, hosts, !canLowerOOMScore(), runc, filepath.Join(dir, "runc"), cniBinDir, filepath.Join(cni, "net.d"))), 0o644); err != nil {
		return err
	}
	// The shim is found on PATH, by its name.
	shims := filepath.Join(dir, "bin")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(n.tools.Shim, filepath.Join(shims, "containerd-shim-runc-v2")); err != nil {
		return err
	}
	p, err := n.inNode("containerd", "env", "PATH="+shims+":"+os.Getenv("PATH"), n.tools.Containerd, "--config", config)
	if err != nil {
		return err
	}
	return poll(p, 60*time.Second, func() error {
		_, err := n.Ctr(ctx, "version")
		return err
	})
}

// startKubelet starts the kubelet in the node: cgroupfs under a cgroup root of the node's own,
// the cluster DNS, a serving certificate for the node's address, its clients authenticated
// (the API server's kubelet-client CA: kube-apiserver, for exec and logs) and authorized by the
// API server, acting as system:node:<name>, and returns once the node is Ready.
func (n *Node) startKubelet(ctx context.Context, cp *ControlPlane) error {
	dir := filepath.Join(n.Dir, "kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := makeCgroup(n.cgroupRoot); err != nil {
		return err
	}
	serving, err := n.writeServing()
	if err != nil {
		return err
	}
	// Pods with dnsPolicy Default get this, not the machine's resolver, which the node's
	// namespace does not reach.
	resolv := filepath.Join(n.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+ClusterDNSIP+"\n"), 0o644); err != nil {
		return err
	}
	config := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
# As kubeadm sets it: client certificates of the API server's kubelet-client CA and bearer
# tokens are authenticated, and every request authorized, by the API server.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %s
podLogsDir: %s
failSwapOn: false
# A shared machine: no eviction for the disk or memory other work uses.
evictionHard:
  memory.available: "1%%"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.cgroupRoot, n.socket, n.IP, serving.Cert, serving.Key, cp.KubeletClient.CA, ClusterDNSIP, ClusterDomain,
		resolv, filepath.Join(n.Dir, "pod-logs"))), 0o644); err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := cp.NodeKubeconfig(kubeconfig, "system:node:"+n.Name, "system:nodes"); err != nil {
		return err
	}
	p, err := n.inNode("kubelet", n.tools.Kubelet, "--config", config, "--kubeconfig", kubeconfig,
		"--root-dir", dir, "--hostname-override", n.Name, "--node-ip", n.IP)
	if err != nil {
		return err
	}
	if err := poll(p, 60*time.Second, n.nodeHTTPReady("http://127.0.0.1:10248/healthz")); err != nil {
		return err
	}
	return poll(p, 120*time.Second, func() error {
		out, err := n.k.Must(ctx, "", "get", "node", n.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if out != "True" {
			return fmt.Errorf("node %s Ready is %q", n.Name, out)
		}
		return nil
	})
}

// startKubeProxy starts kube-proxy in the node in nftables mode, as system:kube-proxy (bound
// to system:node-proxier by the API server's default RBAC), and returns once it has
// synced its rules (its /healthz answers 200). It leaves the machine's conntrack settings as
// they are.
func (n *Node) startKubeProxy(ctx context.Context, cp *ControlPlane) error {
	kubeconfig := filepath.Join(n.Dir, "kube-proxy.kubeconfig")
	if err := cp.NodeKubeconfig(kubeconfig, "system:kube-proxy"); err != nil {
		return err
	}
	config := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: nftables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.PodCIDR, n.Name, n.IP)), 0o644); err != nil {
		return err
	}
	p, err := n.inNode("kube-proxy", n.tools.KubeProxy, "--config", config)
	if err != nil {
		return err
	}
	return poll(p, 60*time.Second, n.nodeHTTPReady("http://127.0.0.1:10256/healthz"))
}

// applyAPIEndpoints points the default/kubernetes Service at the API server as the node's
// pods reach it: the node's address, where the node forwards the API server's port. The API
// server keeps no endpoints of its own (--endpoint-reconciler-type=none): it listens on this
// machine's loopback, which no pod reaches.
func (n *Node) applyAPIEndpoints(ctx context.Context, port int) error {
	_, err := n.k.Must(ctx, fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
addressType: IPv4
endpoints:
- addresses: [%q]
  conditions:
    ready: true
ports:
- name: https
  port: %d
  protocol: TCP
`, n.IP, port), "apply", "--server-side", "--field-manager=e2e-node", "-f", "-")
	return err
}

// deployCoreDNS pushes CoreDNS's image (its static binary alone) as the mirrored
// registry.k8s.io/coredns/coredns, and deploys it as clusters do: ServiceAccount, RBAC, the
// Corefile, a Deployment and the kube-dns Service at ClusterDNSIP. It returns once the
// Deployment is available.
func (n *Node) deployCoreDNS(ctx context.Context) error {
	tag := strings.TrimPrefix(filepath.Base(n.tools.CoreDNS), "coredns-")
	tag, _, _ = strings.Cut(tag, "-") // coredns-<version>-<wiring>
	pushed, err := n.pushTool(ctx, n.tools.CoreDNS, "coredns", coreDNSImagePath+":"+tag)
	if err != nil {
		return err
	}
	image := strings.Replace(pushed, n.Registry, MirroredRegistries[0], 1)
	if _, err := n.k.Must(ctx, coreDNSManifest(image), "apply", "--server-side", "--field-manager=e2e-node", "-f", "-"); err != nil {
		return err
	}
	_, err = n.k.Must(ctx, "", "-n", kubeSystem, "rollout", "status", "deployment/coredns", "--timeout=120s")
	if err != nil {
		return fmt.Errorf("CoreDNS did not become available (the node's logs: %s): %w", strings.Join(n.LogPaths(), ", "), err)
	}
	return nil
}

// LogPaths are the node's daemons' logs, for failure messages.
func (n *Node) LogPaths() []string {
	var l []string
	for _, p := range n.Logs {
		l = append(l, p)
	}
	slices.Sort(l)
	return l
}

// coreDNSManifest is CoreDNS as kubeadm deploys it, less upstream forwarding: this machine
// has no resolver the pods may ask.
func coreDNSManifest(image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes %[2]s in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        cache 30
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: %[1]s
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap:
          name: coredns
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  clusterIP: %[3]s
  selector:
    k8s-app: kube-dns
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`, image, ClusterDomain, ClusterDNSIP)
}

// canLowerOOMScore tells whether this process has CAP_SYS_RESOURCE, without which no process
// it starts may lower an oom_score_adj: containerd then keeps the sandboxes' and Guaranteed
// containers' scores (-998, -997) at its own, as for a rootless containerd, rather than have
// runc fail to start every pod.
func canLowerOOMScore() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}
