package inject

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// TestBastionCarriesTheForward runs ssh-forward against two real sshds: the bastion, which
// opens channels to the login sshd alone, and the login node behind it. The shadow's key and
// host key checking serve both hops.
func TestBastionCarriesTheForward(t *testing.T) {
	for name, opt := range map[string]siteOptions{
		"portforward mode through the bastion, both host keys pinned":               {mode: policy.ForwardModePortForward, pinned: true, bastion: true},
		"exec mode through the bastion, both host keys pinned":                      {mode: policy.ForwardModeExec, pinned: true, bastion: true},
		"portforward mode through the bastion, both host keys learned at first use": {mode: policy.ForwardModePortForward, bastion: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, opt)
			s.publish(t, "node07")
			s.forward(t)
			for range 2 {
				s.expectReply(t, "node07")
			}
			// sshd's log reaches Log() through a pipe copied on its own goroutine.
			eventually(t, 10*time.Second, func() error {
				if !strings.Contains(s.bastion.Log(), "Accepted publickey for "+s.bastion.User) {
					return fmt.Errorf("the bastion's log shows no login:\n%s", s.bastion.Log())
				}
				return nil
			})
			if opt.pinned {
				return
			}
			// accept-new learns each hop's key into the one known_hosts, under its own name
			// (hashed, as the image's ssh_config may say: ssh-keygen -F finds it either way).
			learned := filepath.Join(s.mounts[stateDir], "known_hosts")
			for _, srv := range []*sshtest.Server{s.bastion, s.login} {
				name := fmt.Sprintf("[%s]:%d", srv.Host, srv.Port)
				if out, err := exec.Command("ssh-keygen", "-F", name, "-f", learned).CombinedOutput(); err != nil {
					t.Errorf("the learned known_hosts has no key for %s: %v\n%s", name, err, out)
				}
			}
		})
	}
}

// TestBastionHopCarriesTheLoginsOptions: every container that logs in to the login node goes
// through the bastion, and the hop has the login's BatchMode, host key checking and credential
// (the key, or GSSAPI without delegation), with the bastion's own user and port.
func TestBastionHopCarriesTheLoginsOptions(t *testing.T) {
	pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888})
	pod.Annotations = map[string]string{"interlink.eu/reverse-forwards": "minio.user:9000"}
	base := "virtualNodes:\n  hpc-vk:\n    Network:\n      EnableTunnel: true\n      ShadowMode: ssh\n      SSH:\n" +
		"        LoginHost: login.hpc.example.org\n        User: alice\n        KnownHostsConfigMap: site-known-hosts\n" +
		"        Bastion: {Host: bastion.hpc.example.org, Port: 2222, User: alice-jump}\n        ExtraOptions: [ServerAliveInterval=15]\n" +
		"        Reverse: {Enabled: true}\n"
	common := []string{"-o 'User=alice-jump'", "-o 'Port=2222'", "-o 'BatchMode=yes'", "-o 'GlobalKnownHostsFile=/dev/null'",
		"-o 'StrictHostKeyChecking=yes'", "-o 'UserKnownHostsFile=/etc/interlink-shadow/known-hosts/known_hosts'",
		"-o 'ServerAliveInterval=15'", "-W '[%h]:%p' -- 'bastion.hpc.example.org'"}
	for name, tc := range map[string]struct {
		auth string
		want []string
	}{
		"publickey": {auth: "        KeySecret: hpc-ssh-key\n",
			want: []string{"-o 'IdentityFile=/etc/interlink-shadow/ssh/id'", "-o 'IdentitiesOnly=yes'", "-o 'PreferredAuthentications=publickey'"}},
		"kerberos": {auth: "        Auth: kerberos\n        KeytabSecret: hpc-keytab\n        Principal: alice@EXAMPLE.ORG\n",
			want: []string{"-o 'GSSAPIAuthentication=yes'", "-o 'GSSAPIDelegateCredentials=no'", "-o 'PreferredAuthentications=gssapi-with-mic'"}},
	} {
		t.Run(name, func(t *testing.T) {
			shadow, _ := render(t, base+tc.auth, pod)
			spec := shadow.Deployment.Spec.Template.Spec
			logins := 0
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				opts := envValue(c, envSSHOptions)
				if opts == "" {
					continue
				}
				logins++
				var hop string
				for _, o := range strings.Split(opts, "\n") {
					if h, ok := strings.CutPrefix(o, "ProxyCommand="); ok {
						hop = h
						break
					}
				}
				if !strings.HasPrefix(hop, "ssh ") {
					t.Errorf("%s: no ProxyCommand through the bastion among its options:\n%s", c.Name, opts)
					continue
				}
				for _, w := range append(common, tc.want...) {
					if !strings.Contains(hop, w) {
						t.Errorf("%s: the hop lacks %s: %s", c.Name, w, hop)
					}
				}
				if got, want := envValue(c, envBastion), "alice-jump@bastion.hpc.example.org:2222"; got != want {
					t.Errorf("%s: %s = %q, want %q", c.Name, envBastion, got, want)
				}
			}
			// wait-for-node (Slurm discovery), ssh-forward and ssh-reverse.
			if logins != 3 {
				t.Errorf("%d containers log in to the login node, want 3", logins)
			}
		})
	}
}

// Slurm is asked over the same login: behind a bastion whose host key is not pinned,
// wait-for-node fails at once with HostKeyUnknown naming the bastion, as it does for the login
// node's, rather than waiting out NodeWaitTimeout.
func TestSlurmDiscoveryBehindAnUnpinnedBastionFailsAtOnce(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{mode: policy.ForwardModePortForward, pinned: true, bastion: true, bastionUnpinned: true,
		discovery: policy.NodeDiscoverySlurm, nodeTimeout: "1h"})
	term := filepath.Join(t.TempDir(), "termination-log")
	p := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, pollEnv,
		"SHADOW_SLURM_POLL_INTERVAL=0.3", envTerminationLog+"="+term)
	p.expectFailure(t, 30*time.Second, "the bastion's host key is unknown; want a failure, not a wait")
	expectReason(t, term, "HostKeyUnknown", strings.NewReplacer(), []string{
		fmt.Sprintf("through the bastion %s@%s:%d", s.login.User, s.bastion.Host, s.bastion.Port),
		fmt.Sprintf("host key is known for [%s]:%d", s.bastion.Host, s.bastion.Port)})
}
