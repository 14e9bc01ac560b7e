package batch

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/downward"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Input is one pod and what its rendering needs.
type Input struct {
	Pod *corev1.Pod
	// JobDir is the pod's job directory, where the files go and the job writes its output.
	JobDir string
	// CommandPrefix is the site's own shell, run before the pod's pre-exec, as the plugin's
	// CommandPrefix: empty, the job exports nothing of its own.
	CommandPrefix string
	// SingularityOptions follow `singularity exec` or `run` on every container's line, as the
	// plugin's SingularityDefaultOptions.
	SingularityOptions []string
	// LauncherDir goes first on the job's PATH: it holds singularity and apptainer.
	LauncherDir string
	// ConfigMap and Secret look objects up in the pod's namespace; a NotFound error is what
	// an optional reference may meet.
	ConfigMap func(name string) (*corev1.ConfigMap, error)
	Secret    func(name string) (*corev1.Secret, error)
}

// DefaultSingularityOptions are the plugin's SingularityDefaultOptions when its configuration
// sets none.
const DefaultSingularityOptions = "--nv --no-eval --containall"

// Job is the rendered job directory.
type Job struct {
	// Files go into the job directory, the script among them; parent directories are
	// implied (mode 0700).
	Files []File
	// Notes say what the rendering left out on purpose, for the node's log.
	Notes []string
}

// File is a file or an empty directory of the job directory, readable by the account only.
type File struct {
	Path string // slash-separated, relative to the job directory
	Dir  bool
	Mode fs.FileMode
	Data []byte
}

// The job directory's layout, shared by the script and the node that reads it.
const (
	ScriptFile = "job.sh"
	OutputFile = "job.out"
)

// ContainerOutput and ContainerStatus are where a container's output and its exit code go.
func ContainerOutput(container string, init bool) string {
	return containerPrefix(container, init) + ".out"
}
func ContainerStatus(container string, init bool) string {
	return containerPrefix(container, init) + ".status"
}

func containerPrefix(container string, init bool) string {
	if init {
		return "init-" + container
	}
	return "run-" + container
}

var (
	podUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// dnsLabel is what container and volume names are; they become file names.
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// nodePath is what the node's own directories may be: they go into #SBATCH lines, which
	// sbatch splits on its own, and into bind lists.
	nodePath = regexp.MustCompile(`^/[A-Za-z0-9._/+-]*$`)
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Render renders the pod's job directory.
func Render(in Input) (*Job, error) {
	pod := in.Pod
	if !podUID.MatchString(string(pod.UID)) {
		return nil, refusef("pod UID %q is not a Kubernetes UID; the job is named after it", pod.UID)
	}
	for what, dir := range map[string]string{"job directory": in.JobDir, "launcher directory": in.LauncherDir} {
		if !nodePath.MatchString(dir) {
			return nil, fmt.Errorf("the node's %s %q is not an absolute path of letters, digits and ._/+-", what, dir)
		}
	}
	flags, err := sbatchFlags(pod.Annotations["slurm-job.vk.io/flags"])
	if err != nil {
		return nil, err
	}
	r := &renderer{in: in, job: &Job{}}
	if err := r.volumes(); err != nil {
		return nil, err
	}
	if runsAnImage(pod) {
		r.add(standInPage(pod))
	}
	s := &script{}
	s.line("#!/bin/bash")
	s.line("#SBATCH --job-name=" + string(pod.UID))
	s.line("#SBATCH --output=" + path.Join(in.JobDir, OutputFile))
	for _, f := range flags {
		s.line("#SBATCH " + f)
	}
	podName := pod.Namespace + "/" + pod.Name
	s.line("# The site's slurmnode rendered this job for pod " + podName + ", as interLink's Slurm plugin would.")
	s.line("# The pod's words are single-quoted so that the shell expands nothing in them:")
	s.line("# shellcheck disable=SC2016")
	s.line("PATH=" + s.q(in.LauncherDir) + ":$PATH")
	s.line("export PATH")
	s.line("sg_job_dir=" + s.q(in.JobDir))
	s.line("# The job directory, exported as the plugin's scripts export it:")
	s.line(`export workingPath="$sg_job_dir" SANDBOX="$sg_job_dir"`)
	s.raw(statusFunction)
	if len(pod.Spec.InitContainers) > 0 {
		s.raw(initFunction)
	}
	s.raw(containerFunctions)
	s.line("printf 'pod %s runs as Slurm job %s on %s\\n' " + s.q(podName) + ` "${SLURM_JOB_ID:-}" "${SLURMD_NODENAME:-}"`)
	if in.CommandPrefix != "" {
		s.line("# The site's CommandPrefix, verbatim:")
		s.raw(in.CommandPrefix + "\n")
	}
	if preExec, ok := pod.Annotations["slurm-job.vk.io/pre-exec"]; ok {
		s.line("# slurm-job.vk.io/pre-exec, verbatim:")
		s.raw(preExec + "\n")
		s.line("# end of slurm-job.vk.io/pre-exec")
	}
	for _, c := range pod.Spec.InitContainers {
		if err := r.container(s, "sg_init", c, true); err != nil {
			return nil, err
		}
	}
	for _, c := range pod.Spec.Containers {
		if err := r.container(s, "sg_start", c, false); err != nil {
			return nil, err
		}
	}
	s.line("sg_wait")
	if s.err != nil {
		return nil, s.err
	}
	r.job.Files = append(r.job.Files, File{Path: ScriptFile, Mode: 0o700, Data: []byte(s.b.String())})
	sort.Slice(r.job.Files, func(i, j int) bool { return r.job.Files[i].Path < r.job.Files[j].Path })
	return r.job, nil
}

// The script runs the containers as the plugin's does: init containers one after the other,
// the job stopping at the first that fails; then every container in the background, the job's
// exit code the highest of theirs. Each container's exit code is written beside its output,
// where the node reads it.
const statusFunction = `
# sg_status NAME CODE records a container's exit code; the rename makes it whole or absent.
sg_status() {
  printf '%s\n' "$2" >"$sg_job_dir/$1.status.tmp" && mv -f "$sg_job_dir/$1.status.tmp" "$sg_job_dir/$1.status"
}
`

const initFunction = `
# sg_init NAME CMD... runs an init container to its end.
sg_init() {
  local name=$1 rc=0
  shift
  "$@" >"$sg_job_dir/init-$name.out" 2>&1 || rc=$?
  sg_status "init-$name" "$rc"
  if [ "$rc" -ne 0 ]; then
    printf 'init container %s failed with exit code %s; the containers do not start\n' "$name" "$rc" >&2
    exit "$rc"
  fi
}
`

const containerFunctions = `
# sg_start NAME CMD... starts a container in the background.
sg_pids=()
sg_start() {
  local name=$1
  shift
  {
    local rc=0
    "$@" >"$sg_job_dir/run-$name.out" 2>&1 || rc=$?
    sg_status "run-$name" "$rc"
    exit "$rc"
  } &
  sg_pids+=("$!")
}

# sg_wait waits for every container and exits with the highest exit code.
sg_wait() {
  local pid code rc=0
  for pid in "${sg_pids[@]}"; do
    code=0
    wait "$pid" || code=$?
    if [ "$code" -gt "$rc" ]; then
      rc=$code
    fi
  done
  exit "$rc"
}

`

// script builds the batch script, keeping the first quoting error.
type script struct {
	b   strings.Builder
	err error
}

func (s *script) line(l string) { s.b.WriteString(l + "\n") }
func (s *script) raw(t string)  { s.b.WriteString(t) }

func (s *script) q(word string) string {
	quoted, err := quote(word)
	if err != nil && s.err == nil {
		s.err = err
	}
	return quoted
}

type renderer struct {
	in  Input
	job *Job
	// volumeDirs are the pod's volumes the rendering materialised, by name: the bind source
	// and whether it is always read-only (ConfigMaps, Secrets, projected, downward API).
	volumeDirs map[string]volumeDir
}

type volumeDir struct {
	source   string
	readOnly bool
}

func (r *renderer) note(format string, args ...any) {
	r.job.Notes = append(r.job.Notes, fmt.Sprintf(format, args...))
}

func (r *renderer) add(f File) { r.job.Files = append(r.job.Files, f) }

// container renders one container's line as the plugin writes it: `singularity exec` with
// the container's command, or `singularity run` (the image's own entrypoint) without one; the
// default options, its env file, binds, working directory, image, command and arguments.
func (r *renderer) container(s *script, run string, c corev1.Container, init bool) error {
	if !dnsLabel.MatchString(c.Name) {
		return refusef("container name %q is not a DNS label", c.Name)
	}
	verb := "exec"
	if len(c.Command) == 0 {
		verb = "run"
	}
	words := []string{run, s.q(c.Name), "singularity", verb}
	for _, o := range r.in.SingularityOptions {
		words = append(words, s.q(o))
	}
	env, err := r.env(c)
	if err != nil {
		return err
	}
	if len(env) > 0 {
		envFile := path.Join("env", c.Name)
		r.add(File{Path: envFile, Mode: 0o600, Data: env})
		words = append(words, "--env-file", s.q(path.Join(r.in.JobDir, envFile)))
	}
	binds, err := r.binds(c)
	if err != nil {
		return err
	}
	for _, b := range binds {
		words = append(words, "--bind", s.q(b))
	}
	if c.WorkingDir != "" {
		words = append(words, "--pwd", s.q(c.WorkingDir))
	}
	image := c.Image
	if !strings.Contains(image, "://") && !strings.HasPrefix(image, "/") {
		// The plugin's default ImagePrefix: Singularity pulls a bare name from Docker Hub.
		image = "docker://" + image
	}
	words = append(words, s.q(image))
	for _, w := range append(append([]string{}, c.Command...), c.Args...) {
		words = append(words, s.q(w))
	}
	s.line(strings.Join(words, " "))
	return nil
}

// binds are the container's volume mounts as singularity binds, src:dst[:ro].
func (r *renderer) binds(c corev1.Container) ([]string, error) {
	var binds []string
	for _, m := range c.VolumeMounts {
		v, ok := r.volumeDirs[m.Name]
		if !ok {
			continue // a volume the rendering left out, with a note
		}
		source := v.source
		if m.SubPath != "" {
			if !fs.ValidPath(m.SubPath) {
				return nil, refusef("container %s: subPath %q of volume %s leaves the volume", c.Name, m.SubPath, m.Name)
			}
			source = path.Join(source, m.SubPath)
		}
		if !path.IsAbs(m.MountPath) {
			return nil, refusef("container %s: mount path %q is not absolute", c.Name, m.MountPath)
		}
		for _, p := range []string{source, m.MountPath} {
			if strings.ContainsAny(p, ",:") {
				return nil, refusef("container %s: %q cannot go into a singularity bind list (it holds ',' or ':')", c.Name, p)
			}
		}
		bind := source + ":" + path.Clean(m.MountPath)
		if v.readOnly || m.ReadOnly {
			bind += ":ro"
		}
		binds = append(binds, bind)
	}
	return binds, nil
}

// env renders the container's environment as an env file of NAME='value' lines, which
// singularity's --env-file reads with shell rules: envFrom first, then env, a later line
// winning, as Kubernetes orders them.
func (r *renderer) env(c corev1.Container) ([]byte, error) {
	var b strings.Builder
	put := func(name, value string) error {
		if !envName.MatchString(name) {
			return refusef("container %s: environment variable name %q is not a shell name, which singularity cannot set", c.Name, name)
		}
		quoted, err := quote(value)
		if err != nil {
			return refusef("container %s: environment variable %s: %s", c.Name, name, err)
		}
		b.WriteString(name + "=" + quoted + "\n")
		return nil
	}
	for _, from := range c.EnvFrom {
		data, err := r.envSource(from)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		keys := sortedKeys(data)
		for _, k := range keys {
			if !envName.MatchString(from.Prefix + k) {
				r.note("container %s: key %q of envFrom is not a shell name and was left out, as the kubelet leaves out invalid names", c.Name, from.Prefix+k)
				continue
			}
			if err := put(from.Prefix+k, data[k]); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range c.Env {
		value, skip, err := r.envValue(c.Name, e)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		if err := put(e.Name, value); err != nil {
			return nil, err
		}
	}
	return []byte(b.String()), nil
}

func (r *renderer) envSource(from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := optional(r.in.ConfigMap(from.ConfigMapRef.Name))(from.ConfigMapRef.Optional)
		if err != nil || cm == nil {
			return nil, err
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		secret, err := optional(r.in.Secret(from.SecretRef.Name))(from.SecretRef.Optional)
		if err != nil || secret == nil {
			return nil, err
		}
		return stringData(secret.Data), nil
	}
	return nil, refusef("an envFrom source other than a ConfigMap or Secret")
}

// envValue resolves one env entry; skip is an optional reference that is not there.
func (r *renderer) envValue(container string, e corev1.EnvVar) (value string, skip bool, err error) {
	if e.ValueFrom == nil {
		return e.Value, false, nil
	}
	switch from := e.ValueFrom; {
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := optional(r.in.ConfigMap(ref.Name))(ref.Optional)
		if err != nil {
			return "", false, fmt.Errorf("container %s: env %s: %w", container, e.Name, err)
		}
		if cm != nil {
			if v, ok := cm.Data[ref.Key]; ok {
				return v, false, nil
			}
		}
		return missingKey(container, e.Name, "ConfigMap", ref.Name, ref.Key, ref.Optional)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		secret, err := optional(r.in.Secret(ref.Name))(ref.Optional)
		if err != nil {
			return "", false, fmt.Errorf("container %s: env %s: %w", container, e.Name, err)
		}
		if secret != nil {
			if v, ok := secret.Data[ref.Key]; ok {
				return string(v), false, nil
			}
		}
		return missingKey(container, e.Name, "Secret", ref.Name, ref.Key, ref.Optional)
	case from.FieldRef != nil:
		v, err := r.field(from.FieldRef.FieldPath)
		if err != nil {
			return "", false, refusef("container %s: env %s: %s", container, e.Name, err)
		}
		return v, false, nil
	}
	return "", false, refusef("container %s: env %s: only values, ConfigMap and Secret keys and metadata fields can be rendered before the job runs", container, e.Name)
}

func missingKey(container, env, kind, name, key string, opt *bool) (string, bool, error) {
	if opt != nil && *opt {
		return "", true, nil
	}
	return "", false, fmt.Errorf("container %s: env %s: %s %s has no key %s", container, env, kind, name, key)
}

// field is a downward API field known before the job runs: not the pod's IP, which is the
// compute node's once Slurm has placed the job.
func (r *renderer) field(fieldPath string) (string, error) {
	v, err := downward.Field(r.in.Pod, fieldPath, "")
	if err != nil {
		return "", refusef("%v: the site renders a pod's fields before the job runs, so only its metadata, spec.nodeName and spec.serviceAccountName", err)
	}
	return v, nil
}

// optional turns a lookup into one that yields nil for a missing object an optional reference
// allows.
func optional[T any](obj *T, err error) func(*bool) (*T, error) {
	return func(opt *bool) (*T, error) {
		if err != nil && apierrors.IsNotFound(err) && opt != nil && *opt {
			return nil, nil
		}
		return obj, err
	}
}

func stringData(data map[string][]byte) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = string(v)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
