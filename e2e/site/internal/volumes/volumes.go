package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/downward"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Sources is where volume contents come from.
type Sources struct {
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	// Tokens gives serviceAccountToken projections (the kube-api-access volume every pod
	// gets unless automountServiceAccountToken is false); nil refuses them.
	Tokens TokenSource
}

// Pod is the materialised volumes of one pod under one directory.
type Pod struct {
	// mu serialises SetUp, Refresh and Remove, which the pod's start and the node's resync
	// call from different goroutines: two writers of one volume would race on ..data.
	mu      sync.Mutex
	dir     string
	sources Sources
	// tmpfs are the emptyDirs of medium Memory mounted on the host, unmounted by Remove.
	tmpfs []string
	// ready is set once SetUp succeeded: Refresh waits for it, so a pod still waiting for a
	// Secret is reported once, by SetUp.
	ready bool
}

// New prepares the volumes of pod under dir (created if missing).
func New(dir string, sources Sources) *Pod {
	return &Pod{dir: dir, sources: sources}
}

// Path is the host directory of the named volume.
func (v *Pod) Path(name string) string { return filepath.Join(v.dir, name) }

// SetUp materialises every volume of pod; it can be called again (retry after a missing
// Secret) and rewrites only what changed. Its error names the first volume it could not set
// up in the kubelet's words (MountVolume.SetUp failed for volume "<name>" : secret "<secret>"
// not found), for the node's FailedMount Event.
func (v *Pod) SetUp(pod *corev1.Pod) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, vol := range pod.Spec.Volumes {
		if err := v.setUpOne(pod, vol); err != nil {
			return fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", vol.Name, err)
		}
	}
	v.ready = true
	return nil
}

// Refresh rewrites the API-backed volumes whose source changed, as the kubelet's periodic
// resync does; emptyDirs are left alone, and so is a pod whose SetUp has not succeeded yet.
func (v *Pod) Refresh(pod *corev1.Pod) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		return nil
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir != nil {
			continue
		}
		if err := v.setUpOne(pod, vol); err != nil {
			return fmt.Errorf("volume %q: %w", vol.Name, err)
		}
	}
	return nil
}

// Remove unmounts the pod's tmpfs volumes and deletes its volume directory.
func (v *Pod) Remove() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ready = false
	for _, m := range v.tmpfs {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
			return fmt.Errorf("unmount tmpfs %s: %w", m, err)
		}
	}
	v.tmpfs = nil
	return os.RemoveAll(v.dir)
}

func (v *Pod) setUpOne(pod *corev1.Pod, vol corev1.Volume) error {
	dir := v.Path(vol.Name)
	fsGroup := podFSGroup(pod)
	switch {
	case vol.EmptyDir != nil:
		return v.setUpEmptyDir(dir, vol.EmptyDir, fsGroup)
	case vol.ConfigMap != nil, vol.Secret != nil, vol.Projected != nil, vol.DownwardAPI != nil:
		payload, err := v.payload(pod, vol)
		if err != nil {
			return err
		}
		changed, err := writeAtomic(dir, payload, func(tsDir string) error {
			if fsGroup == nil {
				return nil
			}
			return setOwnership(tsDir, *fsGroup, true)
		})
		if err != nil || !changed || fsGroup == nil {
			return err
		}
		// The kubelet walks the whole volume: its root and links too, not only the data.
		return setOwnership(dir, *fsGroup, true)
	default:
		return fmt.Errorf("unsupported volume type (the site node supports configMap, secret, projected, downwardAPI, emptyDir)")
	}
}

func (v *Pod) setUpEmptyDir(dir string, src *corev1.EmptyDirVolumeSource, fsGroup *int64) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	// The kubelet's emptyDir is world-writable: any container user may write to it.
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	if src.Medium == corev1.StorageMediumMemory {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0777"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
		}
		v.tmpfs = append(v.tmpfs, dir)
	}
	if fsGroup != nil {
		return setOwnership(dir, *fsGroup, false)
	}
	return nil
}

func podFSGroup(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// payload computes the files of an API-backed volume.
func (v *Pod) payload(pod *corev1.Pod, vol corev1.Volume) (map[string]File, error) {
	out := map[string]File{}
	switch {
	case vol.ConfigMap != nil:
		return out, v.addConfigMap(out, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional, modeOr(vol.ConfigMap.DefaultMode))
	case vol.Secret != nil:
		return out, v.addSecret(out, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional, modeOr(vol.Secret.DefaultMode))
	case vol.DownwardAPI != nil:
		return out, addDownwardAPI(out, pod, vol.DownwardAPI.Items, modeOr(vol.DownwardAPI.DefaultMode))
	}
	def := modeOr(vol.Projected.DefaultMode)
	for i, s := range vol.Projected.Sources {
		var err error
		switch {
		case s.ConfigMap != nil:
			err = v.addConfigMap(out, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, def)
		case s.Secret != nil:
			err = v.addSecret(out, pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, def)
		case s.DownwardAPI != nil:
			err = addDownwardAPI(out, pod, s.DownwardAPI.Items, def)
		case s.ServiceAccountToken != nil:
			err = v.addToken(out, pod, s.ServiceAccountToken, def)
		default:
			err = fmt.Errorf("projected source %d: unsupported (configMap, secret, downwardAPI and serviceAccountToken are)", i)
		}
		if err != nil {
			// The kubelet's projected volume reports its sources' errors as they are.
			return nil, err
		}
	}
	return out, nil
}

// modeOr is the kubelet's default volume file mode.
func modeOr(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func (v *Pod) addConfigMap(out map[string]File, ns, name string, items []corev1.KeyToPath, optional *bool, def os.FileMode) error {
	cm, err := v.sources.ConfigMaps.ConfigMaps(ns).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil
		}
		// The lister's error is the kubelet's: configmap "<name>" not found.
		return err
	}
	data := map[string][]byte{}
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		data[k] = b
	}
	return project(out, "configmap "+ns+"/"+name, data, items, optional, def)
}

func (v *Pod) addToken(out map[string]File, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, def os.FileMode) error {
	if v.sources.Tokens == nil {
		return fmt.Errorf("serviceAccountToken: this node has no token source")
	}
	tok, err := v.sources.Tokens.Token(pod, src)
	if err != nil {
		return err
	}
	out[src.Path] = File{Data: tok, Mode: def}
	return nil
}

func (v *Pod) addSecret(out map[string]File, ns, name string, items []corev1.KeyToPath, optional *bool, def os.FileMode) error {
	s, err := v.sources.Secrets.Secrets(ns).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil
		}
		// The lister's error is the kubelet's: secret "<name>" not found.
		return err
	}
	return project(out, "secret "+ns+"/"+name, s.Data, items, optional, def)
}

// project maps keys to paths as the kubelet does: every key under its own name without
// items, only the listed keys with them (a missing key fails unless optional).
func project(out map[string]File, what string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, def os.FileMode) error {
	if len(items) == 0 {
		for k, b := range data {
			out[k] = File{Data: b, Mode: def}
		}
		return nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		mode := def
		if it.Mode != nil {
			mode = os.FileMode(*it.Mode)
		}
		out[it.Path] = File{Data: b, Mode: mode}
	}
	return nil
}

func addDownwardAPI(out map[string]File, pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def os.FileMode) error {
	for _, it := range items {
		if it.FieldRef == nil {
			return fmt.Errorf("downwardAPI %q: only fieldRef is supported", it.Path)
		}
		val, err := downward.Field(pod, it.FieldRef.FieldPath, "")
		if err != nil {
			return fmt.Errorf("downwardAPI %q: %w", it.Path, err)
		}
		mode := def
		if it.Mode != nil {
			mode = os.FileMode(*it.Mode)
		}
		out[it.Path] = File{Data: []byte(val), Mode: mode}
	}
	return nil
}
