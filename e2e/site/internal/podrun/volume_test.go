package podrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The shadow's case: a Secret with an ssh key (defaultMode 0400, items) read as user 65534
// through fsGroup 65534, which OpenSSH accepts only if the file is not the user's own.
func TestSecretVolumeIsReadableAsTheFSGroupAndRefreshedInPlace(t *testing.T) {
	keyDir := t.TempDir()
	key := filepath.Join(keyDir, "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	priv, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh", Namespace: "ns"},
		Data: map[string][]byte{"private-key": priv, "other": []byte("not projected")}}
	w := newWorld(secret)
	uid := int64(65534)
	mode := int32(0o400)
	c := sh("shadow", `
		stat -c '%a %u %g' /etc/shadow-test/ssh/id_ed25519 "$(readlink -f /etc/shadow-test/ssh/id_ed25519)"
		ls /etc/shadow-test/ssh
		id -u; id -G
		ssh-keygen -y -f /etc/shadow-test/ssh/id_ed25519 >/dev/null && echo key-accepted
		stat -c 'volume root %a %u %g' /etc/shadow-test/ssh
		while :; do sleep 0.1; grep -q rotated /etc/shadow-test/ssh/id_ed25519 && { echo saw-rotation; break; }; done
		sleep 60`)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "ssh", MountPath: "/etc/shadow-test/ssh", ReadOnly: true}}
	pod := testPod("ssh", corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid},
		Containers:      []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "ssh", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "ssh", DefaultMode: &mode, Items: []corev1.KeyToPath{{Key: "private-key", Path: "id_ed25519"}},
		}}}},
	})
	p := run(t, w, pod)
	// The volume root's line comes after the key's verdict: wait for it, not for the verdict.
	eventually(t, "the key checked and the volume root listed", func() bool {
		return strings.Contains(logText(p, "shadow", api.ContainerLogOpts{}), "volume root ")
	})
	out := logsOf(t, p, "shadow", api.ContainerLogOpts{})
	lines := strings.Split(out, "\n")
	// The per-key path is a symlink (777); what it resolves to carries the kubelet's mode.
	if want := "440 0 65534"; lines[1] != want {
		t.Errorf("key file is %q, want mode, owner, group %q (0400 plus the fsGroup read bit, root-owned)\nlog:\n%s", lines[1], want, out)
	}
	if !strings.Contains(out, "volume root 2755 0 65534\n") {
		t.Errorf("the volume's root is not setgid, group-searchable and of the fsGroup as the kubelet leaves it:\n%s", out)
	}
	if lines[2] != "id_ed25519" {
		t.Errorf("volume lists %q, want only the item's path", lines[2])
	}
	if lines[3] != "65534" || !strings.Contains(" "+lines[4]+" ", " 65534 ") {
		t.Errorf("container runs as uid %q groups %q, want 65534 with group 65534", lines[3], lines[4])
	}
	rotated := secret.DeepCopy()
	rotated.Data["private-key"] = []byte("rotated\n")
	w.put(rotated)
	if err := p.vols.Refresh(pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container to see the rotated Secret", func() bool {
		return strings.Contains(logText(p, "shadow", api.ContainerLogOpts{}), "saw-rotation")
	})
	entries, _ := os.ReadDir(p.vols.Path("ssh"))
	var ts int
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..2") {
			ts++
		}
	}
	if ts != 1 {
		t.Errorf("volume holds %d timestamped dirs after the refresh, want 1 (the old one removed)", ts)
	}
}

// A mount below a file of the host (this machine's /etc/shadow, the password file in every
// Debian image too) is refused, as runc refuses one below a file of the image: the container
// does not start, and the host's file is untouched.
func TestAMountBelowAHostFileIsRefused(t *testing.T) {
	before, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Fatalf("the test needs the host's /etc/shadow file: %v", err)
	}
	w := newWorld(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "node", Namespace: "ns"}, Data: map[string]string{"node": "n1"}})
	c := sh("main", "cat /etc/shadow/node/node")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "node", MountPath: "/etc/shadow/node"}}
	p := run(t, w, testPod("filebelow", corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "node", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "node"}}}}}}))
	eventually(t, "the mount refused", func() bool {
		w := containerStatus(p.Status(), "main").State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "/etc/shadow is a file, not a directory")
	})
	if after, _ := os.ReadFile("/etc/shadow"); string(after) != string(before) {
		t.Error("the host's /etc/shadow changed")
	}
}
