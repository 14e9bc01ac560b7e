package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The local site's nodes: the cluster's own node, which runs the shadows (and any in-cluster
// workload), and three virtual nodes playing interLink's virtual kubelet with its Slurm
// plugin. NoForwardNode's login node refuses TCP forwarding, so its policy relays in exec
// mode; PublishingNode publishes each job's compute node into the node ConfigMap, as the VK
// does, and its policy reads it there (NodeDiscovery: configmap) rather than asking Slurm;
// KerberosNode's login node takes Kerberos tickets of the site's realm and no keys.
const (
	ClusterNode    = "cluster-node"
	HPCNode        = "hpc-vk"
	NoForwardNode  = "surf-vk"
	PublishingNode = "vk-publishing"
	KerberosNode   = "vk-kerberos"
)

// Virtual nodes whose policy is wrong in one way each, for the failures a shadow meets after
// admission; all find the compute node through Slurm and log in as the site's account.
const (
	// NoForwardPortforwardNode goes through the surf login node, which refuses TCP
	// forwarding, in portforward mode: the guide's misconfiguration, whose shadow starts and
	// logs in, and whose forwarded connections are refused ("administratively prohibited").
	NoForwardPortforwardNode = "vk-noforward-pf"
	// WrongHostKeyNode pins the hpc login node to a host key that is not its own
	// (WrongKnownHostsMap).
	WrongHostKeyNode = "vk-wrong-hostkey"
	// WrongKeyNode logs in to hpc with a key the account does not authorize (WrongKeySecret).
	WrongKeyNode = "vk-wrong-key"
	// ShortWaitNode waits ShortNodeWaitTimeout for the compute node: with a job that never
	// starts (PendingJobFlags) the shadow's wait runs out.
	ShortWaitNode = "vk-short-wait"
	// NoReplicationNode has ReplicateCredentials false: its shadows read SiteKeySecret and
	// SiteKnownHostsMap from their own shadow namespace, where a test puts them
	// (ApplySiteCredentials) or leaves them out.
	NoReplicationNode = "vk-no-replication"
)

// ShortNodeWaitTimeout is ShortWaitNode's NodeWaitTimeout.
const ShortNodeWaitTimeout = 20 * time.Second

// PendingJobFlags, as a pod's slurm-job.vk.io/flags annotation, make its Slurm job one that
// never starts within a test: sbatch's --begin=now+1hour keeps it PENDING (reason BeginTime)
// for an hour, while the same job without them runs at once (TestSite checks both). The pod
// is admitted and its job submitted as any other's:
//
//	metadata:
//	  annotations:
//	    slurm-job.vk.io/flags: "--begin=now+1hour"
//
// For a job a test starts later, "--hold" keeps it PENDING (JobHeldUser) until
// `scontrol release <job id>` (Site.Slurm, as root).
const PendingJobFlags = "--begin=now+1hour"

// The credentials the site's policy names, in shadowgate-system. WrongKnownHostsMap holds the
// hpc login node's address with a host key freshly made and not its own; WrongKeySecret a
// freshly made key no account authorizes.
const (
	SiteKeySecret      = "site-ssh-key"
	SiteKnownHostsMap  = "site-known-hosts"
	SiteKeytabSecret   = "site-keytab"
	SiteKrb5ConfigMap  = "site-krb5"
	WrongKnownHostsMap = "site-wrong-known-hosts"
	WrongKeySecret     = "site-wrong-key"
)

// virtualNodes are the site's virtual nodes, every one a slurmnode.
var virtualNodes = []string{HPCNode, NoForwardNode, PublishingNode, KerberosNode,
	NoForwardPortforwardNode, WrongHostKeyNode, WrongKeyNode, ShortWaitNode, NoReplicationNode}

// LocalSite is a whole interLink site on this machine, around a control plane from
// StartCluster with shadowgate installed: the HPC side (Site), the cluster node and the
// virtual nodes (e2e/site, built on the virtual-kubelet library), the site's credentials and
// a policy for both virtual nodes.
type LocalSite struct {
	HPC *Site
	// Node is the cluster's node, ClusterNode: a real kubelet, containerd, CNI, kube-proxy and
	// CoreDNS, pulling the shadow image from its registry by the policy's default name.
	Node *Node
	// PageServerImage is e2e/site's pageserver in the node's registry, for in-cluster servers
	// (its entrypoint: pageserver -listen ADDR -page TEXT).
	PageServerImage string
	// WebhookImage is shadowgate's image (SiteTools.Webhook), by the name the node pulls it as.
	WebhookImage string
	// Policy is the policy document applied to shadowgate-policy.
	Policy string
	// NodeLogs are the nodes' logs, by node name.
	NodeLogs map[string]string
}

// SiteTools are what the local site runs beyond the control plane, built before it starts
// (minutes on a fresh machine, a second once cached): the real node's binaries, the shadow
// image (an OCI archive of shadow.Dockerfile) and shadowgate's own image (of the Dockerfile).
type SiteTools struct {
	Node        NodeTools
	ShadowImage string
	Webhook     WebhookImage
}

// WebhookImage is shadowgate's image, built by hack/build-image.sh from the Dockerfile: an OCI
// archive, and the image's name in it.
type WebhookImage struct {
	Archive, Name string
}

// BuildWebhookImage builds shadowgate's image from the repository at root on scratch, as the
// Dockerfile's distroless base cannot be pulled here (the static binary needs nothing of it).
func BuildWebhookImage(root string, progress *os.File) (WebhookImage, error) {
	p, err := runBuildScriptEnv(root, "build-image.sh", []string{"BASE=scratch"}, progress, "shadowgate")
	return WebhookImage{Archive: p["shadowgate"], Name: p["shadowgate-image"]}, err
}

// BuildSiteTools builds the site's tools from the repository at root (hack/node-tools.sh,
// hack/build-shadow-image.sh and hack/build-image.sh), writing their progress to progress.
func BuildSiteTools(root string, progress *os.File) (SiteTools, error) {
	node, err := BuildNodeTools(root, progress)
	if err != nil {
		return SiteTools{}, err
	}
	image, err := runBuildScript(root, "build-shadow-image.sh", progress, "shadow")
	if err != nil {
		return SiteTools{}, err
	}
	webhook, err := BuildWebhookImage(root, progress)
	if err != nil {
		return SiteTools{}, err
	}
	return SiteTools{Node: node, ShadowImage: image["shadow"], Webhook: webhook}, nil
}

// StartLocalSite builds the site's virtual nodes from root/e2e/site, starts the HPC side, the
// cluster node (with the shadow image, shadowgate's and the page server in its registry) and
// the virtual nodes under dir, applies the credentials, makes the site's policy (Policy: the
// caller applies it, ApplyPolicy or a chart's values) and returns once every node is Ready.
func StartLocalSite(ctx context.Context, root, dir string, k Kubectl, cp *ControlPlane, tools SiteTools) (_ *LocalSite, err error) {
	hpc, err := StartSite(filepath.Join(dir, "site"), SiteLogin{Name: "hpc"}, SiteLogin{Name: "surf", NoForwarding: true},
		SiteLogin{Name: "cern", Kerberos: true})
	if err != nil {
		return nil, err
	}
	ls := &LocalSite{HPC: hpc, NodeLogs: map[string]string{}}
	defer func() {
		if err != nil {
			_ = ls.Stop()
		}
	}()
	bins, err := buildSiteNodes(root, filepath.Join(dir, "site-bin"))
	if err != nil {
		return nil, err
	}
	launchers := filepath.Join(hpc.Dir, "launcher")
	if err := installLauncher(filepath.Join(root, "e2e/site/launcher/singularity"), launchers); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(hpc.Dir, "jobs"), 0o755); err != nil {
		return nil, err
	}
	vk := func(name string) ([]string, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		return []string{"-kubeconfig", cp.AdminKubeconfig, "-node-name", name, "-address", "127.0.0.1",
			"-kubelet-port", strconv.Itoa(port), "-tls-cert", cp.KubeletServing.Cert, "-tls-key", cp.KubeletServing.Key,
			"-client-ca", cp.KubeletClient.CA}, nil
	}
	if err := ls.startClusterNode(ctx, k, cp, tools, filepath.Join(dir, ClusterNode), bins["pageserver"]); err != nil {
		return nil, err
	}
	for _, node := range virtualNodes {
		args, err := vk(node)
		if err != nil {
			return nil, err
		}
		args = append(args, "-slurm-conf", hpc.SlurmConf, "-account", SiteAccount,
			"-work-dir", filepath.Join(hpc.Dir, "jobs", node), "-launcher-dir", launchers,
			// No -command-prefix: as the real plugin by default, the job gets no socket
			// directory root, and the pre-exec falls back to a private one of the job's user.
			// The rest is the real part's behaviour, each flag's default: the creation-time
			// copy of the pod written back every 5 s, the job's end reported 30 s late.
		)
		if node == PublishingNode {
			args = append(args, "-publish-node-configmap")
		}
		if _, err := hpc.Start(node, bins["slurmnode"], args...); err != nil {
			return nil, err
		}
		ls.NodeLogs[node] = filepath.Join(hpc.Dir, node+".log")
	}
	if err := ls.applyCredentials(ctx, k); err != nil {
		return nil, err
	}
	ls.Policy = ls.policy()
	nodes := []string{"node/" + ClusterNode}
	for _, node := range virtualNodes {
		nodes = append(nodes, "node/"+node)
	}
	if _, err := k.Must(ctx, "", append([]string{"wait", "--for=condition=Ready", "--timeout=120s"}, nodes...)...); err != nil {
		return nil, fmt.Errorf("the site's nodes are not Ready (logs: %s): %w", strings.Join(ls.logList(), ", "), err)
	}
	return ls, nil
}

// ApplyPolicy applies the site's policy to shadowgate-policy in shadowgate-system.
func (ls *LocalSite) ApplyPolicy(ctx context.Context, k Kubectl) error {
	_, err := k.Must(ctx, PolicyConfigMap(ls.Policy), "apply", "--server-side", "--force-conflicts", "--field-manager=e2e-install", "-f", "-")
	return err
}

func (ls *LocalSite) logList() []string {
	var logs []string
	for _, l := range ls.NodeLogs {
		logs = append(logs, l)
	}
	return logs
}

// startClusterNode starts the cluster node under dir, routes the Service range to it, and
// pushes into its registry the shadow image, as the policy's default image and as that image's
// "-follow" tag (a changed Image, for the tests of a roll), shadowgate's image by its name, and
// the page server.
func (ls *LocalSite) startClusterNode(ctx context.Context, k Kubectl, cp *ControlPlane, tools SiteTools, dir, pageServer string) error {
	node, err := StartNode(ctx, tools.Node, cp, k, dir, ClusterNode)
	if err != nil {
		return err
	}
	ls.Node = node
	for name, log := range node.Logs {
		ls.NodeLogs[ClusterNode+" "+name] = log
	}
	if err := node.RouteServices(); err != nil {
		return err
	}
	if err := node.PushShadowImage(ctx, tools.ShadowImage, "", "-follow"); err != nil {
		return err
	}
	if err := node.PushMirrored(ctx, tools.Webhook.Archive, tools.Webhook.Name); err != nil {
		return err
	}
	ls.WebhookImage = tools.Webhook.Name
	ls.PageServerImage, err = node.PushBinaryImage(ctx, pageServer, "e2e/pageserver:1")
	return err
}

// Stop stops the nodes and the HPC side.
func (ls *LocalSite) Stop() error {
	var errs []error
	if ls.Node != nil {
		errs = append(errs, ls.Node.Stop())
	}
	return errors.Join(append(errs, ls.HPC.Stop())...)
}

// buildSiteNodes builds the site's virtual node and its page server (module e2e/site) into
// dir, the page server static, as it runs alone in its image; Go's build cache makes a rebuild
// of unchanged code take a second.
func buildSiteNodes(root, dir string) (map[string]string, error) {
	bins := map[string]string{}
	for _, name := range []string{"slurmnode", "pageserver"} {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Dir = filepath.Join(root, "e2e/site")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the site's %s: %w\n%s", name, err, msg)
		}
		bins[name] = out
	}
	return bins, nil
}

// installLauncher puts the site's singularity-compatible launcher into dir as singularity and
// apptainer, where the jobs find it first on their PATH.
func installLauncher(script, dir string) error {
	data, err := os.ReadFile(script)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"singularity", "apptainer"} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// applyCredentials applies the site key and the login nodes' host keys to shadowgate-system,
// where the policy names them and shadowgate replicates them from, and the wrong ones the
// failing nodes name.
func (ls *LocalSite) applyCredentials(ctx context.Context, k Kubectl) error {
	var known []string
	for _, name := range []string{"hpc", "surf", "cern"} {
		known = append(known, ls.HPC.Logins[name].KnownHosts)
	}
	if err := os.WriteFile(ls.knownHosts(), []byte(strings.Join(known, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	wrongKey, wrongKnownHosts, err := ls.wrongCredentials()
	if err != nil {
		return err
	}
	if err := ls.ApplySiteCredentials(ctx, k, "shadowgate-system"); err != nil {
		return err
	}
	return apply(ctx, k,
		[]string{"create", "secret", "generic", SiteKeytabSecret, "-n", "shadowgate-system", "--from-file=user.keytab=" + ls.HPC.KDC.UserKeytab},
		[]string{"create", "configmap", SiteKrb5ConfigMap, "-n", "shadowgate-system", "--from-file=krb5.conf=" + ls.HPC.KDC.Krb5Conf},
		[]string{"create", "secret", "generic", WrongKeySecret, "-n", "shadowgate-system", "--from-file=id_ed25519=" + wrongKey},
		[]string{"create", "configmap", WrongKnownHostsMap, "-n", "shadowgate-system", "--from-file=known_hosts=" + wrongKnownHosts})
}

// ApplySiteCredentials applies the site key (SiteKeySecret) and the login nodes' host keys
// (SiteKnownHostsMap) to namespace: for NoReplicationNode's shadows, a test applies them to
// the shadow namespace (<namespace>-shadow) itself, as a site without replication must.
func (ls *LocalSite) ApplySiteCredentials(ctx context.Context, k Kubectl, namespace string) error {
	return apply(ctx, k,
		[]string{"create", "secret", "generic", SiteKeySecret, "-n", namespace, "--from-file=id_ed25519=" + ls.HPC.Key},
		[]string{"create", "configmap", SiteKnownHostsMap, "-n", namespace, "--from-file=known_hosts=" + ls.knownHosts()})
}

func (ls *LocalSite) knownHosts() string { return filepath.Join(ls.HPC.Dir, "known_hosts") }

// wrongCredentials makes a key no account authorizes and a known_hosts file giving the hpc
// login node's host:port a host key that is not its own, both fresh ed25519 keys.
func (ls *LocalSite) wrongCredentials() (key, knownHosts string, err error) {
	dir := filepath.Join(ls.HPC.Dir, "wrong")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	key, hostKey := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "host_ed25519")
	for _, f := range []string{key, hostKey} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f).CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return "", "", err
	}
	hpc, fields := ls.HPC.Logins["hpc"], strings.Fields(string(pub))
	knownHosts = filepath.Join(dir, "known_hosts")
	line := fmt.Sprintf("[%s]:%d %s %s\n", hpc.Host, hpc.Port, fields[0], fields[1])
	return key, knownHosts, os.WriteFile(knownHosts, []byte(line), 0o644)
}

// apply applies the objects each kubectl create command (args) makes, server-side.
func apply(ctx context.Context, k Kubectl, creates ...[]string) error {
	for _, args := range creates {
		manifest, err := k.Must(ctx, "", append(args, "--dry-run=client", "-o", "yaml")...)
		if err != nil {
			return err
		}
		if _, err := k.Must(ctx, manifest, "apply", "--server-side", "--field-manager=e2e-install", "-f", "-"); err != nil {
			return err
		}
	}
	return nil
}

// policy is the site's policy: the hpc login node forwards ports, the surf one relays in exec
// mode; all log in as the site's account with the site key and pin the login nodes' host
// keys; the hpc node allows the reverse tunnel, with SOCKS, reaching the job through srun and
// a user-space sshd there (the compute node runs no sshd of its own); the
// publishing node goes through the hpc login node and reads the compute node from its
// ConfigMap; the Kerberos node logs in with the account's keytab; the failing nodes are each
// one of these with one thing wrong.
func (ls *LocalSite) policy() string {
	hpc, surf, cern := ls.HPC.Logins["hpc"], ls.HPC.Logins["surf"], ls.HPC.Logins["cern"]
	key := fmt.Sprintf("        KeySecret: %s\n", SiteKeySecret)
	node := func(name string, l *LoginNode, extra string) string {
		return nodeWith(name, l, SiteKnownHostsMap, "10m", extra)
	}
	return "virtualNodes:\n" +
		node(HPCNode, hpc, key+`        Reverse:
          Enabled: true
          AllowSocks: true
          NodeExec: srun
          Sshd: userspace
`) +
		node(NoForwardNode, surf, key+`        ForwardMode: exec
`) +
		node(PublishingNode, hpc, key+`        NodeDiscovery: configmap
`) +
		node(KerberosNode, cern, fmt.Sprintf(`        Auth: kerberos
        KeytabSecret: %s
        Principal: %s
        Krb5ConfigMap: %s
`, SiteKeytabSecret, ls.HPC.KDC.Principal, SiteKrb5ConfigMap)) +
		node(NoForwardPortforwardNode, surf, key+`        ForwardMode: portforward
`) +
		nodeWith(WrongHostKeyNode, hpc, WrongKnownHostsMap, "10m", key) +
		node(WrongKeyNode, hpc, fmt.Sprintf("        KeySecret: %s\n", WrongKeySecret)) +
		nodeWith(ShortWaitNode, hpc, SiteKnownHostsMap, ShortNodeWaitTimeout.String(), key) +
		node(NoReplicationNode, hpc, key+`        ReplicateCredentials: false
`)
}

// nodeWith is one virtual node's policy: an ssh shadow logging in to l as the site's account,
// pinning its host key from knownHosts and waiting nodeWait for the compute node; extra are
// more SSH options, each line indented as they are.
func nodeWith(name string, l *LoginNode, knownHosts, nodeWait, extra string) string {
	return fmt.Sprintf(`  %s:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: %q
        Port: %d
        User: %s
        KnownHostsConfigMap: %s
        NodeWaitTimeout: %s
%s`, name, l.Host, l.Port, SiteAccount, knownHosts, nodeWait, extra)
}

// PolicyConfigMap is the shadowgate-policy ConfigMap holding doc.
func PolicyConfigMap(doc string) string {
	indented := "    " + strings.ReplaceAll(strings.TrimRight(doc, "\n"), "\n", "\n    ")
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: shadowgate-policy
  namespace: shadowgate-system
data:
  policy.yaml: |
%s
`, indented)
}
