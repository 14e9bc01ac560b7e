package procnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/podrun"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/svcproxy"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/volumes"
	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Config is the node's part of running pods.
type Config struct {
	// StateDir holds everything the node writes: pods/<namespace>_<name>_<uid>/.
	StateDir string
	// Address is the node's address, every pod's IP.
	Address string
	// Exe is the binary re-exec'd as the container helper.
	Exe string
	// InitialBackoff and MaxBackoff are the crash-loop back-off (kubelet: 10s, 5m).
	InitialBackoff, MaxBackoff time.Duration
	// Resync is how often volumes, hosts files and the Service proxy are brought up to date
	// even without a Trigger.
	Resync time.Duration
	// ServiceTable names the nftables table the Service proxy keeps (svcproxy.New).
	ServiceTable string
	Logger       *log.Logger
	// Events, when set, records the kubelet's Events about the pods (vknode.NewRecorder).
	Events record.EventRecorder
}

// Sources are the listers the node reads.
type Sources struct {
	ConfigMaps     corev1listers.ConfigMapLister
	Secrets        corev1listers.SecretLister
	Services       corev1listers.ServiceLister
	EndpointSlices discoverylisters.EndpointSliceLister
	// Pods are the node's pods as the API server has them (with the status this node
	// reported): Service endpoints when EndpointSlices cannot hold their loopback IPs.
	Pods corev1listers.PodLister
	// Tokens gives the pods' ServiceAccount token volumes.
	Tokens volumes.TokenSource
	// PodsAPI, when set, deletes a pod whose deletion was asked for from the API server
	// once its processes are gone (grace 0, its UID), as the kubelet does: the library
	// alone would wait out the whole grace period first.
	PodsAPI corev1client.PodsGetter
}

// Provider runs the node's pods; it implements nodeutil.Provider and node.PodNotifier.
type Provider struct {
	cfg         Config
	src         Sources
	proxy       *svcproxy.Proxy
	mountpoints *podrun.Mountpoints
	trigger     chan struct{}

	mu     sync.Mutex
	pods   map[string]*runningPod // by namespace/name
	notify func(*corev1.Pod)
}

// runningPod is one pod the node holds, from CreatePod until its deletion is done.
type runningPod struct {
	dir   string
	hosts string
	vols  *volumes.Pod
	run   *podrun.Pod
	// dirty coalesces status changes for the pod's one notifier goroutine.
	dirty    chan struct{}
	deleting bool
	// lastRefreshErr keeps a failing refresh from logging on every resync (sync's goroutine only).
	lastRefreshErr string

	mu  sync.Mutex
	pod *corev1.Pod // the latest from the API server (labels, annotations change)
}

// New builds a Provider; Run must run for volumes, hosts files and Services to follow changes.
func New(cfg Config, src Sources) (*Provider, error) {
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "pods"), 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	proxy, err := svcproxy.New(cfg.ServiceTable, src.Services, src.EndpointSlices, src.Pods, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Provider{
		cfg: cfg, src: src,
		proxy:       proxy,
		mountpoints: podrun.NewMountpoints(),
		trigger:     make(chan struct{}, 1),
		pods:        map[string]*runningPod{},
		notify:      func(*corev1.Pod) {},
	}, nil
}

// Trigger asks Run to sync now (a Service, EndpointSlice, ConfigMap or Secret changed).
func (p *Provider) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Run keeps volumes, hosts files and the Service proxy in line with the listers until ctx
// ends, then stops every pod: the site's node takes its processes with it.
func (p *Provider) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Resync)
	defer t.Stop()
	for {
		p.sync()
		select {
		case <-ctx.Done():
			p.proxy.Close()
			p.stopAll()
			return
		case <-t.C:
		case <-p.trigger:
		}
	}
}

func (p *Provider) sync() {
	if err := p.proxy.Sync(); err != nil {
		p.cfg.Logger.Printf("services: %v", err)
	}
	p.mu.Lock()
	pods := make([]*runningPod, 0, len(p.pods))
	for _, rp := range p.pods {
		pods = append(pods, rp)
	}
	p.mu.Unlock()
	for _, rp := range pods {
		pod := rp.current()
		if err := p.writeHosts(rp, pod); err != nil {
			p.cfg.Logger.Printf("pod %s/%s: hosts file: %v", pod.Namespace, pod.Name, err)
		}
		err := rp.vols.Refresh(pod)
		if msg := fmt.Sprint(err); err != nil && msg != rp.lastRefreshErr {
			p.cfg.Logger.Printf("pod %s/%s: refresh volumes (retrying): %v", pod.Namespace, pod.Name, err)
		}
		rp.lastRefreshErr = ""
		if err != nil {
			rp.lastRefreshErr = err.Error()
		}
	}
}

// writeHosts rewrites the pod's hosts file when the Services changed, in place: each
// container's bind mount pins the inode, so a new file would go unseen.
func (p *Provider) writeHosts(rp *runningPod, pod *corev1.Pod) error {
	svcs, err := p.src.Services.List(labels.Everything())
	if err != nil {
		return err
	}
	want := svcproxy.Hosts(pod.Name, pod.Namespace, p.cfg.Address, svcs)
	if cur, err := os.ReadFile(rp.hosts); err == nil && string(cur) == want {
		return nil
	}
	f, err := os.OpenFile(rp.hosts, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(want); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (rp *runningPod) current() *corev1.Pod {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.pod
}

func key(namespace, name string) string { return namespace + "/" + name }

// CreatePod starts the pod's processes; the status follows through NotifyPods.
func (p *Provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pods[k]; ok {
		return nil
	}
	dir := filepath.Join(p.cfg.StateDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pod %s: state dir: %w", k, err)
	}
	rp := &runningPod{
		dir: dir, hosts: filepath.Join(dir, "hosts"), pod: pod.DeepCopy(), dirty: make(chan struct{}, 1),
		vols: volumes.New(filepath.Join(dir, "volumes"), volumes.Sources{ConfigMaps: p.src.ConfigMaps, Secrets: p.src.Secrets, Tokens: p.src.Tokens}),
	}
	if err := p.writeHosts(rp, pod); err != nil {
		return fmt.Errorf("pod %s: hosts file: %w", k, err)
	}
	run, err := podrun.Start(podrun.Config{
		Exe: p.cfg.Exe, Address: p.cfg.Address, Dir: filepath.Join(dir, "run"),
		Prepare:    func() error { return rp.vols.SetUp(rp.current()) },
		VolumePath: rp.vols.Path, HostsFile: rp.hosts,
		Env:            podrun.EnvSources{ConfigMaps: p.src.ConfigMaps, Secrets: p.src.Secrets, Services: p.src.Services},
		Mountpoints:    p.mountpoints,
		InitialBackoff: p.cfg.InitialBackoff, MaxBackoff: p.cfg.MaxBackoff,
		Logf:    p.cfg.Logger.Printf,
		Changed: rp.markDirty,
		Record:  p.recorder(rp),
	}, pod)
	if err != nil {
		return fmt.Errorf("pod %s: %w", k, err)
	}
	rp.run = run
	p.pods[k] = rp
	go p.notifyLoop(rp)
	rp.markDirty()
	return nil
}

// recorder sends a pod's Events about the pod or one of its containers, referring to it as the
// kubelet's container references do (the pod as the node last saw it, the container's field
// path), so `kubectl describe pod` lists them and readers can pick one container's.
func (p *Provider) recorder(rp *runningPod) func(podrun.Event) {
	if p.cfg.Events == nil {
		return nil
	}
	return func(e podrun.Event) {
		pod := rp.current()
		ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: e.FieldPath}
		p.cfg.Events.Event(ref, e.Type, e.Reason, e.Message)
	}
}

func (rp *runningPod) markDirty() {
	select {
	case rp.dirty <- struct{}{}:
	default:
	}
}

// notifyLoop hands the library the pod's status after each change, in order, until the pod
// is gone (dirty closed).
func (p *Provider) notifyLoop(rp *runningPod) {
	for range rp.dirty {
		p.mu.Lock()
		notify := p.notify
		p.mu.Unlock()
		notify(rp.withStatus())
	}
}

func (rp *runningPod) withStatus() *corev1.Pod {
	pod := rp.current().DeepCopy()
	st := rp.run.Status()
	st.QOSClass = pod.Status.QOSClass
	pod.Status = *st
	return pod
}

// UpdatePod takes the pod's new metadata (for downwardAPI volumes); its containers are fixed
// at creation, as for a kubelet except for image changes, which mean nothing here.
func (p *Provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	rp, ok := p.pods[key(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	rp.mu.Lock()
	rp.pod = pod.DeepCopy()
	rp.mu.Unlock()
	p.Trigger()
	return nil
}

// DeletePod stops the pod (SIGTERM, the grace period, SIGKILL) in the background, reports its
// final status and removes its state.
func (p *Provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	rp, ok := p.pods[k]
	if !ok {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s is not on this node", k)
	}
	if rp.deleting {
		p.mu.Unlock()
		return nil
	}
	rp.deleting = true
	p.mu.Unlock()
	grace := 30 * time.Second
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	go func() {
		p.remove(k, rp, grace)
		if pod.DeletionTimestamp != nil {
			p.deleteFromAPI(pod)
		}
	}()
	return nil
}

func (p *Provider) deleteFromAPI(pod *corev1.Pod) {
	if p.src.PodsAPI == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	err := p.src.PodsAPI.Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		p.cfg.Logger.Printf("pod %s/%s: delete from the API server: %v", pod.Namespace, pod.Name, err)
	}
}

func (p *Provider) remove(k string, rp *runningPod, grace time.Duration) {
	p.cfg.Logger.Printf("pod %s: deleting (grace %s)", k, grace)
	rp.run.Stop(grace)
	final := rp.withStatus()
	p.mu.Lock()
	notify := p.notify
	delete(p.pods, k)
	p.mu.Unlock()
	close(rp.dirty)
	notify(final)
	if err := rp.run.Remove(); err != nil {
		p.cfg.Logger.Printf("pod %s: remove state: %v", k, err)
	}
	if err := rp.vols.Remove(); err != nil {
		p.cfg.Logger.Printf("pod %s: remove volumes: %v", k, err)
	}
	if err := os.RemoveAll(rp.dir); err != nil {
		p.cfg.Logger.Printf("pod %s: remove state dir: %v", k, err)
	}
	p.cfg.Logger.Printf("pod %s: deleted", k)
}

// stopAll stops every pod at once (node shutdown) and removes their state.
func (p *Provider) stopAll() {
	p.mu.Lock()
	var wg sync.WaitGroup
	for k, rp := range p.pods {
		if rp.deleting {
			continue
		}
		rp.deleting = true
		wg.Add(1)
		go func() { defer wg.Done(); p.remove(k, rp, rp.run.Grace()) }()
	}
	p.mu.Unlock()
	wg.Wait()
}

func (p *Provider) lookup(namespace, name string) (*runningPod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rp, ok := p.pods[key(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return rp, nil
}

// GetPod is the pod with its current status.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	rp, err := p.lookup(namespace, name)
	if err != nil {
		return nil, err
	}
	return rp.withStatus(), nil
}

// GetPodStatus is the pod's current status.
func (p *Provider) GetPodStatus(_ context.Context, namespace, name string) (*corev1.PodStatus, error) {
	rp, err := p.lookup(namespace, name)
	if err != nil {
		return nil, err
	}
	return rp.run.Status(), nil
}

// GetPods lists the pods the node holds.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	pods := make([]*runningPod, 0, len(p.pods))
	for _, rp := range p.pods {
		pods = append(pods, rp)
	}
	p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(pods))
	for _, rp := range pods {
		out = append(out, rp.withStatus())
	}
	return out, nil
}

// NotifyPods registers the library's status callback.
func (p *Provider) NotifyPods(_ context.Context, notify func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = notify
}

// GetContainerLogs serves `kubectl logs`.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	rp, err := p.lookup(namespace, podName)
	if err != nil {
		return nil, err
	}
	r, w := io.Pipe()
	go func() {
		w.CloseWithError(rp.run.Logs(ctx, containerName, opts, w))
	}()
	return r, nil
}

// RunInContainer serves `kubectl exec` (without a TTY: the site has none to give).
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	rp, err := p.lookup(namespace, podName)
	if err != nil {
		return err
	}
	code, err := rp.run.Exec(ctx, containerName, cmd, attach.Stdin(), attach.Stdout(), attach.Stderr())
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("command %q exited with code %d", cmd, code)
	}
	return nil
}

// AttachToContainer is not offered: a container's stdio goes to its log only.
func (p *Provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by the site's processnode")
}

// GetStatsSummary reports the node with no usage figures: the site measures none.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{}, nil
}

// GetMetricsResource reports no metrics, for the same reason.
func (p *Provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

// PortForward is not offered: pods listen on the host's network, reachable directly.
func (p *Provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not supported by the site's processnode: pods share the host's network")
}
