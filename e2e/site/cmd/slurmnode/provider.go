package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/batch"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/slurm"
	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// jobIDFile, in the job directory, lets a restarted node adopt the pod's job instead of
// submitting it again.
const jobIDFile = "job-id"

// provider turns the pods bound to the node into Slurm jobs and reports their status.
type provider struct {
	cfg    options
	slurm  slurm.Client
	lister nodeutil.ProviderConfig
	client kubernetes.Interface
	// work is the work directory: every job directory is reached through it, so a link the
	// account puts in a job directory cannot send the node's reads and writes elsewhere.
	work *os.Root

	mu     sync.Mutex
	pods   map[string]*podJob // by namespace/name
	notify func(*corev1.Pod)
}

// podJob is one pod and its job.
type podJob struct {
	// pod is the pod as the node stored it at creation, with the status the node reports.
	pod      *corev1.Pod
	jobID    string // empty: the pod was refused before it became a job
	state    string // Slurm's last state, for the log
	nodeAddr string
	ended    bool
	deleting bool
	// endSeen is when the node first saw the job ended, which the pod learns -job-end-delay
	// later.
	endSeen time.Time
	// published is the compute node address the pod's node ConfigMaps hold.
	published string
}

func key(namespace, name string) string { return namespace + "/" + name }

func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	pj := &podJob{pod: pod.DeepCopy()}
	uid := string(pod.UID)
	if id, err := p.work.ReadFile(path.Join(uid, jobIDFile)); err == nil && validJobID.Match(id) {
		pj.jobID = string(id)
		log.Printf("adopted job %s for pod %s/%s", pj.jobID, pod.Namespace, pod.Name)
	} else if err := p.submit(ctx, pj); err != nil {
		return err
	}
	if pj.jobID != "" {
		pj.pod.Status = podStatus(pod, jobView{id: pj.jobID, job: slurm.Job{State: "PENDING", Reason: "submitted"}})
	}
	p.mu.Lock()
	p.pods[key(pod.Namespace, pod.Name)] = pj
	p.mu.Unlock()
	p.changed(pj.pod)
	return nil
}

var validJobID = regexp.MustCompile(`^[0-9]+$`)

// submit renders the pod, materialises its job directory and submits the script. A pod the
// node cannot run is failed with the reason; an error is worth the library's retry.
func (p *provider) submit(ctx context.Context, pj *podJob) error {
	pod := pj.pod
	uid := string(pod.UID)
	job, err := batch.Render(batch.Input{
		Pod:                pod,
		JobDir:             path.Join(p.cfg.workDir, uid),
		CommandPrefix:      p.cfg.commandPrefix,
		SingularityOptions: strings.Fields(p.cfg.singularityOptions),
		LauncherDir:        p.cfg.launcherDir,
		ConfigMap:          p.lister.ConfigMaps.ConfigMaps(pod.Namespace).Get,
		Secret:             p.lister.Secrets.Secrets(pod.Namespace).Get,
	})
	var refusal *batch.Refusal
	if errors.As(err, &refusal) {
		log.Printf("refused pod %s/%s: %s", pod.Namespace, pod.Name, refusal.Reason)
		pod.Status = refusedStatus(pod, "SlurmJobRefused", refusal.Reason)
		return nil
	}
	if err != nil {
		return fmt.Errorf("rendering the job of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, n := range job.Notes {
		log.Printf("pod %s/%s: %s", pod.Namespace, pod.Name, n)
	}
	if err := p.materialise(uid, job.Files); err != nil {
		return fmt.Errorf("writing the job directory of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	id, err := p.slurm.Submit(ctx, path.Join(p.cfg.workDir, uid), batch.ScriptFile)
	if err != nil {
		log.Printf("sbatch error for pod %s/%s: %v", pod.Namespace, pod.Name, err)
		pod.Status = refusedStatus(pod, "SbatchFailed", err.Error())
		return nil
	}
	if err := p.work.WriteFile(path.Join(uid, jobIDFile), []byte(id), 0o600); err != nil {
		log.Printf("pod %s/%s: cannot record job %s for a restart to adopt: %v", pod.Namespace, pod.Name, id, err)
	}
	pj.jobID = id
	log.Printf("submitted job %s for pod %s/%s", id, pod.Namespace, pod.Name)
	return nil
}

// materialise writes the job directory afresh, owned by the account and private to it.
func (p *provider) materialise(uid string, files []batch.File) error {
	if err := p.work.RemoveAll(uid); err != nil {
		return err
	}
	owned := func(name string) error {
		return p.work.Lchown(name, int(p.slurm.Account.UID), int(p.slurm.Account.GID))
	}
	mkdir := func(dir string) error {
		// Each level is created and handed over in turn, so none is left to root.
		parts := strings.Split(dir, "/")
		for i := range parts {
			d := strings.Join(parts[:i+1], "/")
			if err := p.work.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			if err := owned(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mkdir(uid); err != nil {
		return err
	}
	for _, f := range files {
		name := path.Join(uid, f.Path)
		if err := mkdir(path.Dir(name)); err != nil {
			return err
		}
		if f.Dir {
			if err := mkdir(name); err != nil {
				return err
			}
			continue
		}
		if err := p.work.WriteFile(name, f.Data, f.Mode); err != nil {
			return err
		}
		if err := p.work.Chmod(name, f.Mode); err != nil { // WriteFile's mode passes the umask
			return err
		}
		if err := owned(name); err != nil {
			return err
		}
	}
	return nil
}

// UpdatePod is called when the pod's metadata or mutable spec changed in the API server; a
// job's spec cannot change once submitted. With -write-back-creation-copy the node hands the
// library the pod as given, as interLink's virtual kubelet does, so the status loop's next
// creation copy differs from the last pod the library saw and is written back.
func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	if p.cfg.writeBackCreationCopy {
		p.changed(pod)
	}
	return nil
}

// DeletePod cancels the job; the poll removes the job directory once the job has ended.
func (p *provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	pj, ok := p.pods[key(pod.Namespace, pod.Name)]
	if ok {
		pj.deleting = true
	}
	p.mu.Unlock()
	if !ok || pj.pod.UID != pod.UID {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	if pj.jobID == "" {
		return nil
	}
	if err := p.slurm.Cancel(ctx, pj.jobID); err != nil {
		return err
	}
	log.Printf("cancelled job %s of deleted pod %s/%s", pj.jobID, pod.Namespace, pod.Name)
	return nil
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pj, ok := p.pods[key(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return pj.pod.DeepCopy(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(p.pods))
	for _, pj := range p.pods {
		pods = append(pods, pj.pod.DeepCopy())
	}
	return pods, nil
}

// NotifyPods starts following the jobs: the library calls it once, with the node's context.
func (p *provider) NotifyPods(ctx context.Context, notify func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = notify
	p.mu.Unlock()
	go p.follow(ctx)
	if p.cfg.writeBackCreationCopy {
		go p.writeBack(ctx)
	}
}

// changed hands the library the pod whose status it writes through pods/status, metadata
// included: with -write-back-creation-copy the pod as stored at creation, as interLink's
// virtual kubelet does; otherwise the pod's metadata as the API server has it now.
func (p *provider) changed(pod *corev1.Pod) {
	p.mu.Lock()
	notify := p.notify
	p.mu.Unlock()
	if notify == nil {
		return
	}
	pod = pod.DeepCopy()
	if !p.cfg.writeBackCreationCopy {
		if current, err := p.lister.Pods.Pods(pod.Namespace).Get(pod.Name); err == nil && current.UID == pod.UID {
			status := pod.Status
			pod = current.DeepCopy()
			pod.Status = status
		}
	}
	notify(pod)
}

// writeBack is interLink's virtual kubelet's status loop: every -status-interval, each pod not
// yet Succeeded or Failed, nor being deleted, is handed to the library again as stored at
// creation. The library writes a pod it is handed unless it equals the last one it was handed;
// UpdatePod hands it the changed pod first, so what others wrote into its annotations since is
// reverted within an interval.
func (p *provider) writeBack(ctx context.Context) {
	every(ctx, p.cfg.statusInterval, func() {
		p.mu.Lock()
		pods := make([]*corev1.Pod, 0, len(p.pods))
		for _, pj := range p.pods {
			if phase := pj.pod.Status.Phase; !pj.deleting && phase != corev1.PodSucceeded && phase != corev1.PodFailed {
				pods = append(pods, pj.pod.DeepCopy())
			}
		}
		p.mu.Unlock()
		for _, pod := range pods {
			p.changed(pod)
		}
	})
}

// follow polls Slurm for every job until ctx ends.
func (p *provider) follow(ctx context.Context) {
	every(ctx, p.cfg.poll, func() {
		p.mu.Lock()
		jobs := make([]*podJob, 0, len(p.pods))
		for _, pj := range p.pods {
			jobs = append(jobs, pj)
		}
		p.mu.Unlock()
		for _, pj := range jobs {
			p.poll(ctx, pj)
		}
	})
}

// every calls f each interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}

// poll brings one pod up to date with its job. Only follow calls it, so a podJob's fields
// other than pod and deleting are its own.
func (p *provider) poll(ctx context.Context, pj *podJob) {
	p.mu.Lock()
	pod, deleting := pj.pod.DeepCopy(), pj.deleting
	p.mu.Unlock()
	name := key(pod.Namespace, pod.Name)
	if pj.jobID == "" || pj.ended {
		if deleting {
			p.forget(ctx, pj, name)
		}
		return
	}
	v := jobView{id: pj.jobID}
	job, err := p.slurm.Job(ctx, pj.jobID)
	switch {
	case errors.Is(err, slurm.ErrNoJob):
		v.lost = true
		v.job = slurm.Job{State: "UNKNOWN"}
	case err != nil:
		log.Printf("job %s of pod %s: %v", pj.jobID, name, err)
		return
	default:
		v.job = job
	}
	v.exits = p.exits(pod)
	if v.lost && len(v.exits) == len(pod.Spec.Containers)+len(pod.Spec.InitContainers) {
		// The record is gone but every container said how it ended: that is the answer.
		v.lost, v.job.State = false, "COMPLETED"
	}
	if job.BatchHost != "" && pj.nodeAddr == "" {
		addr, err := p.slurm.NodeAddr(ctx, job.BatchHost)
		if err != nil {
			log.Printf("job %s of pod %s: %v", pj.jobID, name, err)
		}
		pj.nodeAddr = addr
	}
	v.nodeAddr = pj.nodeAddr
	if state := v.job.State; state != pj.state {
		where := ""
		if job.BatchHost != "" {
			where = fmt.Sprintf(" on %s (%s)", job.BatchHost, pj.nodeAddr)
		}
		log.Printf("job %s of pod %s: %s%s", pj.jobID, name, state, where)
		pj.state = state
	}
	pj.ended = v.ended()
	if p.cfg.publishNodeConfigMap {
		want := ""
		if v.running() {
			want = pj.nodeAddr
		}
		if want != pj.published {
			n, err := p.publish(ctx, pod, want)
			switch {
			case err != nil:
				log.Printf("pod %s: publishing compute node %q: %v", name, want, err)
				pj.ended = false // try again at the next poll
			case n > 0 || want == "":
				pj.published = want
			default:
				pj.ended = false // no node ConfigMap yet: look again at the next poll
			}
		}
	}
	// A deleted pod's end is the virtual kubelet's own, at once; any other waits for the
	// plugin's status cache.
	if v.ended() && !deleting {
		if pj.endSeen.IsZero() && p.cfg.endDelay > 0 {
			log.Printf("job %s of pod %s ended; its pod learns it in %s (-job-end-delay)", pj.jobID, name, p.cfg.endDelay)
		}
		if !pj.reportEnd(time.Now(), p.cfg.endDelay) {
			pj.ended = false // look again at the next poll
			return
		}
	}
	status := podStatus(pod, v)
	if reflect.DeepEqual(status, pod.Status) {
		return
	}
	p.mu.Lock()
	pj.pod.Status = status
	updated := pj.pod.DeepCopy()
	p.mu.Unlock()
	p.changed(updated)
}

// reportEnd says whether the pod may learn, at now, that its job ended: delay after the node
// first saw the end, as the plugin's status cache tells it.
func (pj *podJob) reportEnd(now time.Time, delay time.Duration) bool {
	if pj.endSeen.IsZero() {
		pj.endSeen = now
	}
	return now.Sub(pj.endSeen) >= delay
}

// forget removes a deleted pod whose job has ended: its job directory and its entry.
func (p *provider) forget(ctx context.Context, pj *podJob, name string) {
	if pj.published != "" {
		if _, err := p.publish(ctx, pj.pod, ""); err != nil {
			log.Printf("pod %s: clearing its compute node: %v", name, err)
			return
		}
	}
	if err := p.work.RemoveAll(string(pj.pod.UID)); err != nil {
		log.Printf("pod %s: removing its job directory: %v", name, err)
		return
	}
	p.mu.Lock()
	if p.pods[name] == pj {
		delete(p.pods, name)
	}
	p.mu.Unlock()
	log.Printf("removed the job directory of deleted pod %s", name)
}

// exits reads the exit codes the script recorded, by containerKey.
func (p *provider) exits(pod *corev1.Pod) map[string]exit {
	exits := map[string]exit{}
	read := func(c corev1.Container, init bool) {
		name := path.Join(string(pod.UID), batch.ContainerStatus(c.Name, init))
		f, err := p.work.Open(name)
		if err != nil {
			return
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil || !info.Mode().IsRegular() {
			return
		}
		data, err := io.ReadAll(io.LimitReader(f, 16))
		if err != nil {
			return
		}
		code, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
		if err != nil {
			return
		}
		exits[containerKey(c.Name, init)] = exit{code: int32(code), at: info.ModTime()}
	}
	for _, c := range pod.Spec.InitContainers {
		read(c, true)
	}
	for _, c := range pod.Spec.Containers {
		read(c, false)
	}
	return exits
}

// The kubelet API beyond logs: a batch job has no exec, attach or port forward, and the node
// keeps no stats.

func (p *provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errdefs.InvalidInput("a Slurm job has no exec")
}

func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("a Slurm job has no attach")
}

func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errdefs.InvalidInput("a Slurm job has no port forward: the shadow reaches it")
}

func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errdefs.InvalidInput("the Slurm node keeps no stats")
}

func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errdefs.InvalidInput("the Slurm node keeps no metrics")
}
