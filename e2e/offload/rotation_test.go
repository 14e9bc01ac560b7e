package offload

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// copyBound is how soon a rotated source reaches the shadow's copy (docs/security.md, "When a
// source changes"); nodeRefresh how soon after that the cluster node has rewritten the mounted
// file, a few of its 2 s resyncs, as the kubelet does within its sync period.
const (
	copyBound   = 10 * time.Second
	nodeRefresh = 10 * time.Second
)

// The site key is rotated as docs/security.md says: the new key authorized beside the old,
// the source Secret changed, and once the copy and the mounted file have it, the old key
// removed from the site. The running tunnel keeps carrying the notebook's page on the session
// it logged in with, and the next login, after the login node comes back, is made with the
// new key and restores the tunnel in the same shadow pod.
func TestARotatedKeyReachesARunningShadow(t *testing.T) {
	const ns = "rotate-key"
	hpc := site.local.HPC
	authorized := filepath.Join(hpc.Dir, "keys", harness.SiteAccount)
	oldAuthorized, err := os.ReadFile(authorized)
	if err != nil {
		t.Fatal(err)
	}
	oldKey := kubectl(t, "", "get", "secret", harness.SiteKeySecret, "-n", "shadowgate-system", "-o", "jsonpath={.data.id_ed25519}")
	// Registered first, so it runs last: the tests after this one log in with the old key.
	t.Cleanup(func() {
		if err := os.WriteFile(authorized, oldAuthorized, 0o644); err != nil {
			t.Error(err)
		}
		kubectl(t, "", "patch", "secret", harness.SiteKeySecret, "-n", "shadowgate-system", "--type=merge", "-p", `{"data":{"id_ed25519":"`+oldKey+`"}}`)
	})
	_, s, _ := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil))
	podName, _, ip := s.readyPod(t, 3*time.Minute)
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "notebook-"+ns)
	url, page := notebookPage(ns, ip)
	waitFor(t, time.Minute, "the notebook's page at "+url, page)

	newKey := filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rotated@site", "-f", newKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	newPub, err := os.ReadFile(newKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	newPrivate, err := os.ReadFile(newKey)
	if err != nil {
		t.Fatal(err)
	}
	fingerprint, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", newKey+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	newFingerprint := strings.Fields(string(fingerprint))[1]

	if err := os.WriteFile(authorized, append(append([]byte{}, oldAuthorized...), newPub...), 0o644); err != nil {
		t.Fatal(err)
	}
	encoded := base64.StdEncoding.EncodeToString(newPrivate)
	kubectl(t, "", "patch", "secret", harness.SiteKeySecret, "-n", "shadowgate-system", "--type=merge", "-p", `{"data":{"id_ed25519":"`+encoded+`"}}`)
	waitFor(t, copyBound, "the shadow's copy of the key holds the new key", func() error {
		got, err := kubectlOutput("get", "secret", harness.SiteKeySecret, "-n", s.namespace, "-o", "jsonpath={.data.id_ed25519}")
		if err == nil && got != encoded {
			err = fmt.Errorf("the copy in %s holds another key", s.namespace)
		}
		return err
	})
	time.Sleep(nodeRefresh)
	if err := os.WriteFile(authorized, newPub, 0o644); err != nil {
		t.Fatal(err)
	}

	// The session logged in with the old key carries traffic still.
	for range 3 {
		if err := page(); err != nil {
			t.Fatalf("the running tunnel stopped carrying the page once the old key left the site: %v", err)
		}
		time.Sleep(2 * time.Second)
	}
	if evs := tunnelEventsOf(t, ns, "notebook", "TunnelFailed"); len(evs) != 0 {
		t.Fatalf("the tunnel failed after the rotation: %+v", evs)
	}

	// The next login is made with the new key, the old one being gone.
	sshdLog := hpc.Logins["hpc"].Log
	restartLogin := stopLoginUntilUnreachable(t, ns)
	restartLogin()
	waitForTunnelEvent(t, 3*time.Minute, ns, "notebook", "TunnelRecovered", "LoginUnreachable")
	waitFor(t, time.Minute, "the notebook's page at "+url+" again", page)
	if again, _, _ := s.readyPod(t, time.Minute); again != podName {
		t.Errorf("the shadow pod was replaced (%s, then %s): a rotation must not restart it", podName, again)
	}
	log, err := os.ReadFile(sshdLog)
	if err != nil {
		t.Fatal(err)
	}
	accepted := false
	for line := range strings.Lines(string(log)) {
		accepted = accepted || (strings.Contains(line, "Accepted publickey for "+harness.SiteAccount) && strings.Contains(line, newFingerprint))
	}
	if !accepted {
		t.Errorf("the login node accepted no login with the new key %s; its log:\n%s", newFingerprint, log)
	}
}
