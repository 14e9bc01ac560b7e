package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func indexer(objs ...any) cache.Indexer {
	ix := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		_ = ix.Add(o)
	}
	return ix
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTheAtomicWriterSwapsOneDataLink(t *testing.T) {
	dir := t.TempDir()
	changed, err := writeAtomic(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o600}}, nil)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	data, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !strings.HasPrefix(data, "..20") {
		t.Fatalf("..data is %q (%v), want a link to a timestamped dir", data, err)
	}
	for name, want := range map[string]string{"a": "..data/a", "sub": "..data/sub"} {
		if got, _ := os.Readlink(filepath.Join(dir, name)); got != want {
			t.Errorf("%s links to %q, want %q", name, got, want)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "sub/b")); fi.Mode().Perm() != 0o600 {
		t.Errorf("sub/b mode %v, want 0600", fi.Mode().Perm())
	}
	if changed, _ := writeAtomic(dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o600}}, nil); changed {
		t.Error("an unchanged payload was rewritten")
	}
	if _, err := writeAtomic(dir, map[string]File{"a": {Data: []byte("new"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "a")); got != "new" {
		t.Errorf("a reads %q after the update", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Error("the link of a path the payload dropped is still there")
	}
	if _, err := os.Stat(filepath.Join(dir, data)); !os.IsNotExist(err) {
		t.Error("the old timestamped dir is still there")
	}
	if _, err := writeAtomic(dir, map[string]File{"../escape": {Data: nil, Mode: 0o644}}, nil); err == nil {
		t.Error("a path leaving the volume was accepted")
	}
}

func TestVolumesAreMaterialisedAsTheKubeletDoes(t *testing.T) {
	mode := int32(0o400)
	optional := true
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"app.conf": "x=1", "other": "y"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"token": []byte("t0k")}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
				Items: []corev1.KeyToPath{{Key: "app.conf", Path: "conf/app.conf", Mode: &mode}}}}},
			{Name: "opt", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: &optional}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "uid", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}},
				}}},
			}}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		}},
	}
	cms := indexer(cm)
	v := New(t.TempDir(), Sources{ConfigMaps: corev1listers.NewConfigMapLister(cms), Secrets: corev1listers.NewSecretLister(indexer(sec))})
	if err := v.SetUp(pod); err != nil {
		t.Fatal(err)
	}
	defer v.Remove()
	for path, want := range map[string]string{
		"cfg/conf/app.conf": "x=1",
		"proj/token":        "t0k",
		"proj/labels":       "a=\"1\"\nb=\"2\"",
		"proj/uid":          "u-1",
	} {
		if got := read(t, v.Path(path)); got != want {
			t.Errorf("%s reads %q, want %q", path, got, want)
		}
	}
	if _, err := os.Stat(v.Path("cfg/other")); !os.IsNotExist(err) {
		t.Error("a key not in items was projected")
	}
	if fi, _ := os.Stat(v.Path("cfg/conf/app.conf")); fi.Mode().Perm() != 0o400 {
		t.Errorf("item mode %v, want 0400", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(v.Path("opt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") {
			t.Errorf("optional missing Secret's volume holds %s, want it empty but for the writer's ..data", e.Name())
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(v.Path("mem"), &st); err != nil || st.Type != 0x01021994 {
		t.Errorf("medium Memory emptyDir is not a tmpfs (type %x, %v)", st.Type, err)
	}
	updated := cm.DeepCopy()
	updated.Data["app.conf"] = "x=2"
	_ = cms.Update(updated)
	if err := v.Refresh(pod); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v.Path("cfg/conf/app.conf")); got != "x=2" {
		t.Errorf("after the ConfigMap changed the file reads %q", got)
	}
	missing := pod.DeepCopy()
	missing.Spec.Volumes = []corev1.Volume{{Name: "req", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope"}}}}
	// The kubelet's FailedMount message, word for word.
	if err := v.SetUp(missing); err == nil || err.Error() != `MountVolume.SetUp failed for volume "req" : secret "nope" not found` {
		t.Errorf("a missing required Secret gives %v, want the kubelet's message naming the volume and the Secret", err)
	}
}

func TestFSGroupOwnershipFollowsSetVolumeOwnership(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		readOnly        bool
		file, directory os.FileMode
	}{
		"read-only volumes get group read":              {true, 0o440, os.ModeSetgid | 0o750},
		"writable volumes get group read and write too": {false, 0o660, os.ModeSetgid | 0o770},
	} {
		t.Run(name, func(t *testing.T) {
			_ = os.Chmod(filepath.Join(dir, "key"), 0o400)
			_ = os.Chmod(filepath.Join(dir, "d"), 0o700)
			if err := setOwnership(dir, 65534, tc.readOnly); err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(filepath.Join(dir, "key"))
			if fi.Mode() != tc.file || fi.Sys().(*syscall.Stat_t).Gid != 65534 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("file %v uid %d gid %d, want %v root:65534", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, fi.Sys().(*syscall.Stat_t).Gid, tc.file)
			}
			di, _ := os.Stat(filepath.Join(dir, "d"))
			if di.Mode()&(os.ModeSetgid|os.ModePerm) != tc.directory {
				t.Errorf("dir %v, want %v", di.Mode(), tc.directory)
			}
		})
	}
}
