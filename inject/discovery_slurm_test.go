package inject

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// NodeDiscovery slurm, tested for real: a one-node Slurm (startSlurm), a login node whose
// users' commands reach it, the job's account, and HTTP servers standing for the compute node
// at the addresses Slurm is told to reach it at. The shadow's rendered scripts learn the node
// only from squeue and scontrol on the login node: the node file holds a decoy address, with a
// server of its own, so a script that read it would be caught.

// slurmPollEnv makes the scripts ask Slurm every 0.3 s rather than every 30.
const slurmPollEnv = "SHADOW_SLURM_POLL_INTERVAL=0.3"

type slurmSite struct {
	slurm  *slurm
	job    account
	login  *sshtest.Server
	key    string            // the job account's private key, which the login node accepts
	addrs  map[string]string // the node's addresses by the name its HTTP server answers with
	web    *site             // the shadow's listener, for requests
	mounts map[string]string
}

func newSlurmSite(t *testing.T) *slurmSite {
	t.Helper()
	sshtest.Require(t, "ssh", "ssh-keygen", "scontrol", "timeout", "useradd")
	s := &slurmSite{job: newAccount(t, jobUser), slurm: startSlurm(t)}
	keys := sharedDir(t)
	s.key = filepath.Join(keys, "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", s.key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	authorized := filepath.Join(keys, "authorized_keys")
	copyFile(t, s.key+".pub", authorized, 0o644)
	// A login node an hour east of UTC, whose users like Slurm's relative times: the lookup
	// reads times in UTC and ISO 8601 all the same.
	s.login = sshtest.StartSSHD(t, "AuthorizedKeysFile "+authorized, "SetEnv PATH=/usr/bin:/bin SLURM_CONF="+s.slurm.conf+" TZ=CET-1 SLURM_TIME_FORMAT=relative")

	s.addrs = map[string]string{"sgnode-a": sshtest.NodeAddress(t), "sgnode-b": sshtest.NodeAddress(t), "decoy": sshtest.NodeAddress(t)}
	s.web = &site{listen: sshtest.Loopback(t)}
	s.web.port = sshtest.FreePort(t, s.addrs["sgnode-a"], s.addrs["sgnode-b"], s.addrs["decoy"], s.web.listen)
	for name, addr := range s.addrs {
		sshtest.StartHTTP(t, addr, s.web.port, name)
	}
	s.setNodeAddr(t, "sgnode-a")

	s.mounts = map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir(), knownHostsDir: t.TempDir()}
	copyFile(t, s.key, filepath.Join(s.mounts[keyDir], keyFile), 0o400)
	copyFile(t, s.login.KnownHosts, filepath.Join(s.mounts[knownHostsDir], knownHostsKey), 0o644)
	writeAtomically(t, filepath.Join(s.mounts[nodeDir], validate.ComputeNodeKey), s.addrs["decoy"])
	return s
}

// shadow renders the shadow of a notebook pod with uid under NodeDiscovery slurm.
func (s *slurmSite) shadow(t *testing.T, uid, nodeWaitTimeout string) *Shadow {
	t.Helper()
	doc := loginPolicy(s.login, jobUser, "KnownHostsConfigMap: login-known-hosts\nNodeDiscovery: slurm\nNodeWaitTimeout: "+nodeWaitTimeout)
	pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: int32(s.web.port)})
	pod.UID = types.UID(uid)
	shadow, _ := render(t, doc, pod)
	return shadow
}

// setNodeAddr tells Slurm to reach its node at the address of the named server, as an admin's
// `scontrol update nodename=... nodeaddr=...` does.
func (s *slurmSite) setNodeAddr(t *testing.T, name string) {
	t.Helper()
	s.scontrol(t, "update", "nodename="+slurmNode, "nodeaddr="+s.addrs[name])
}

func (s *slurmSite) scontrol(t *testing.T, args ...string) {
	t.Helper()
	if out, err := s.slurm.command("scontrol", args...).CombinedOutput(); err != nil {
		t.Fatalf("scontrol %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (s *slurmSite) run(t *testing.T, shadow *Shadow, name string, env ...string) *process {
	t.Helper()
	return runContainer(t, container(t, shadow.Deployment, name), s.mounts, append([]string{pollEnv, slurmPollEnv}, env...)...)
}

// logins counts the logins the login node has accepted so far.
func (s *slurmSite) logins() int {
	return strings.Count(s.login.Log(), "Accepted publickey for "+jobUser)
}

// expectLog waits until p has logged want.
func expectLog(t *testing.T, p *process, want string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if !strings.Contains(p.out.String(), want) {
			return fmt.Errorf("the log lacks %q", want)
		}
		return nil
	})
}

func TestSlurmDiscoveryFindsTheJobsNodeAndFollowsIt(t *testing.T) {
	t.Parallel()
	s := newSlurmSite(t)
	const uid = "5d2e7a31-8c4b-4f0e-9b6a-2c1d3e4f5a6b"
	shadow := s.shadow(t, uid, "2m")
	// As the plugin submits it, named after the pod UID; held, so it stays queued.
	job := s.slurm.submit(t, s.job, uid, "sleep 600\n", nil, "--hold")

	wait := s.run(t, shadow, containerWaitForNode)
	expectLog(t, wait, "waiting for the compute node from Slurm (job "+uid)
	expectLog(t, wait, "job "+uid+" is PENDING in Slurm (reason JobHeldUser, expected start N/A): waiting for it to run")
	time.Sleep(time.Second)
	if !wait.running() {
		t.Fatalf("wait-for-node exited while the job is queued:\n%s", wait.out)
	}
	s.scontrol(t, "release", job.id)
	if code := wait.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("wait-for-node exited %d once the job ran:\n%s", code, wait.out)
	}
	for _, want := range []string{"runs on " + slurmNode + ", which Slurm reaches at " + s.addrs["sgnode-a"], "compute node is " + s.addrs["sgnode-a"]} {
		if !strings.Contains(wait.out.String(), want) {
			t.Errorf("wait-for-node's log lacks %q:\n%s", want, wait.out)
		}
	}

	forward := s.run(t, shadow, containerForward, "SHADOW_LISTEN_ADDRESS="+s.web.listen)
	s.web.expectReply(t, "sgnode-a")

	// One lookup, one login, per poll interval: over 3 s at 0.3 s, ten at most, and some.
	before := s.logins()
	time.Sleep(3 * time.Second)
	if n := s.logins() - before; n < 1 || n > 3/0.3+2 {
		t.Errorf("the login node accepted %d logins in 3 s of polling every 0.3 s, want one a poll at most", n)
	}

	// An admin moves the node to another address: the tunnel follows, in place.
	tunnel := forward.children(t, "ssh")
	s.setNodeAddr(t, "sgnode-b")
	s.web.expectReply(t, "sgnode-b")
	expectLog(t, forward, fmt.Sprintf("compute node changed from %s to %s, rebuilding the tunnel", s.addrs["sgnode-a"], s.addrs["sgnode-b"]))
	if now := forward.children(t, "ssh"); !forward.running() || len(tunnel) != 1 || len(now) != 1 || now[0] == tunnel[0] {
		t.Errorf("ssh under ssh-forward: %v before the move, %v after (running %v); want one, replaced in place", tunnel, now, forward.running())
	}

	// A requeue: while the job waits the tunnel stays where it was; once it runs again, at
	// another address, the tunnel follows it there.
	s.scontrol(t, "requeue", job.id)
	expectLog(t, forward, "no compute node from Slurm (job "+uid)
	s.web.expectReply(t, "sgnode-b")
	s.setNodeAddr(t, "sgnode-a")
	// Slurm holds a requeued job back (its begin time two minutes on), for the node to be done
	// with its last run; the test waits for that rather than starting it early, which slurmd
	// can refuse ("already killed, do not launch batch job"), failing the job.
	s.web.expectReplyWithin(t, "sgnode-a", 4*time.Minute)
	expectLog(t, forward, fmt.Sprintf("compute node changed from %s to %s, rebuilding the tunnel", s.addrs["sgnode-b"], s.addrs["sgnode-a"]))

	// The job ends: said plainly, and the tunnel is left as it is for Kubernetes to judge.
	if out, err := s.slurm.command("scancel", job.id).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v\n%s", err, out)
	}
	expectLog(t, forward, "no running job named "+uid+" in Slurm: it ended (CANCELLED")
	if !forward.running() {
		t.Errorf("ssh-forward exited when the job ended:\n%s", forward.out)
	}
	if strings.Contains(forward.out.String()+wait.out.String(), s.addrs["decoy"]) {
		t.Errorf("a script took the node file's address, with NodeDiscovery slurm")
	}

	t.Run("wait-for-node gives up after NodeWaitTimeout, naming Slurm's causes", func(t *testing.T) {
		for name, submit := range map[string]bool{
			"a job that was never submitted": false,
			"a job that ended before it ran": true,
		} {
			t.Run(name, func(t *testing.T) {
				uid := "6e3f8b42-9d5c-4a1f-8c7b-3d2e4f5a6b7c"
				want := "lists no job of that name for this user"
				if submit {
					uid = "7f4a9c53-ae6d-4b2a-9d8c-4e3f5a6b7c8d"
					job := s.slurm.submit(t, s.job, uid, "sleep 600\n", nil, "--hold")
					if out, err := s.slurm.command("scancel", job.id).CombinedOutput(); err != nil {
						t.Fatalf("scancel: %v\n%s", err, out)
					}
					want = "it ended (CANCELLED"
				}
				p := s.run(t, s.shadow(t, uid, "2s"), containerWaitForNode)
				p.expectFailure(t, 60*time.Second, "wait-for-node succeeded without a running job",
					"no running job named "+uid+" in Slurm: ", want,
					"no compute node after 2s (NodeWaitTimeout): Slurm on "+s.login.Host+" has not reported job "+uid+" running on a usable node",
					"squeue --me --name="+uid, "#SBATCH --job-name=<pod UID>", "NodeDiscovery: configmap")
			})
		}
	})

	// A job held back to a begin time: Slurm's reason and its expected start, in UTC whatever
	// the login node's zone, are said while it waits and in the message that ends the wait.
	t.Run("wait-for-node says why the job waits and when Slurm expects it to start", func(t *testing.T) {
		uid := "9b6cbe75-c08f-4d4c-9fae-6a5b7c8d9eaf"
		begin := time.Now().Add(time.Hour)
		job := s.slurm.submit(t, s.job, uid, "true\n", nil, "--begin=now+1hour")
		job.await(t, "%r", "BeginTime")
		term := filepath.Join(t.TempDir(), "termination-log")
		p := s.run(t, s.shadow(t, uid, "2s"), containerWaitForNode, envTerminationLog+"="+term)
		p.expectFailure(t, 60*time.Second, "wait-for-node succeeded with the job queued")
		got := readReason(term)
		m := regexp.MustCompile(`^NodeWaitTimedOut: .*; last: WaitingForNode: job ` + uid + ` is PENDING in Slurm \(reason BeginTime, expected start (\S+)\): waiting for it to run$`).FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("termination message %q does not say the job waits for its BeginTime", got)
		}
		start, err := time.Parse("2006-01-02T15:04:05Z", m[1])
		if d := start.Sub(begin); err != nil || d < -2*time.Minute || d > 2*time.Minute {
			t.Errorf("expected start %q (%v), want the job's begin time %s in UTC", m[1], err, begin.UTC().Format(time.RFC3339))
		}
		expectLog(t, p, "job "+uid+" is PENDING in Slurm (reason BeginTime, expected start "+m[1]+"): waiting for it to run")
	})

	// interLink's plugin reports a job's end half a minute after Slurm ends it: a job that ran
	// to its end before its node was found is JobCompleted, not a node wait that timed out.
	t.Run("wait-for-node says JobCompleted for a job that ran to its end", func(t *testing.T) {
		uid := "8a5bad64-bf7e-4c3b-8e9d-5f4a6b7c8d9e"
		job := s.slurm.submit(t, s.job, uid, "true\n", nil)
		job.await(t, "%T", "COMPLETED")
		term := filepath.Join(t.TempDir(), "termination-log")
		p := s.run(t, s.shadow(t, uid, "2s"), containerWaitForNode, envTerminationLog+"="+term)
		p.expectFailure(t, 60*time.Second, "wait-for-node succeeded without a running job")
		if got, want := readReason(term), "JobCompleted: job "+uid+" COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it"; got != want {
			t.Errorf("termination message %q, want %q", got, want)
		}
		if out := p.out.String(); strings.Contains(out, "NodeWaitTimedOut") || strings.Contains(out, "Likely causes") {
			t.Errorf("a job that completed timed the node wait out:\n%s", out)
		}
	})
}

// hostileStub is a squeue and a scontrol for the login node that print what a case gives them:
// the files <dir>/<job name>.squeue and <dir>/<host>.scontrol. Real Slurm cannot be made to
// print hostile answers, so this table alone runs these stubs instead of it; everything else
// about the lookup is real (OpenSSH, the login shell, the rendered scripts).
const hostileStub = `#!/bin/sh
key=
for a; do
  case $a in --name=*) key=${a#--name=} ;; -*) ;; *) key=$a ;; esac
done
cat -- "%s/$key.%s"
`

// stubSlurm is a directory holding hostileStub's squeue and scontrol, which answer from the
// files <dir>/<key>.<command>; a login node with it first in its PATH answers as the test says.
func stubSlurm(t *testing.T) string {
	t.Helper()
	sshtest.Require(t, "ssh", "timeout")
	stubs := t.TempDir()
	for _, cmd := range []string{"squeue", "scontrol"} {
		writeExecutable(t, filepath.Join(stubs, cmd), fmt.Sprintf(hostileStub, stubs, cmd))
	}
	return stubs
}

func TestSlurmDiscoveryRefusesHostileAnswers(t *testing.T) {
	stubs := stubSlurm(t)
	login := sshtest.StartSSHD(t, "SetEnv PATH="+stubs+":/usr/bin:/bin")
	pwned := filepath.Join(t.TempDir(), "pwned")
	long := strings.Repeat("a", 254)
	node := func(host, addr string) string {
		return "NodeName=" + host + " Arch=x86_64 CoresPerSocket=1 NodeAddr=" + addr + " NodeHostName=" + host + " State=MIXED\n"
	}
	type answer struct{ squeue, scontrol, want string }
	cases := map[string]answer{
		"a well-formed answer is taken, so the refusals below are the checks' doing": {"4100 RUNNING h0\n", node("h0", "10.1.2.3"), "compute node is 10.1.2.3"},
		"a NodeAddr that is an ssh option is refused": {"4100 RUNNING h1\n", node("h1", "-oProxyCommand=touch"),
			"NodeAddr '-oProxyCommand=touch' of h1 is not a hostname or IP address"},
		"a NodeAddr with shell characters is refused": {"4100 RUNNING h2\n", node("h2", "$(touch${IFS}"+pwned+");x"),
			"NodeAddr '$(touch${IFS}" + pwned + ");x' of h2 is not a hostname"},
		"a NodeAddr longer than a hostname can be is refused": {"4100 RUNNING h3\n", node("h3", long), "NodeAddr '" + long[:100]},
		"a batch host with shell characters is refused":       {"4100 RUNNING h4;touch>" + pwned + " N/A None\n", "", "batch host 'h4;touch>" + pwned + "' is not a hostname"},
		"a batch host that starts with '-' is refused":        {"4100 RUNNING -oProxyCommand=x\n", "", "batch host '-oProxyCommand=x' is not a hostname"},
		// A co-tenant of the same site account named a job after the pod's UID: neither is
		// taken, and the refusal names both, not the one that ended.
		"two running jobs of the pod's name are refused, naming both": {"4101 RUNNING h5\n4000 COMPLETED h5\n4102 RUNNING h6\n", "",
			"DuplicateJobName: refusing Slurm's answer on <login> for job <uid>: 2 running job(s) and none waiting have that name (job ids 4101, 4102)"},
		// The co-tenant's job runs while the pod's own is still queued: it is not taken either.
		"a running job beside a queued one of the pod's name is refused, naming both": {"4101 RUNNING h11\n4102 PENDING n/a\n", "",
			"DuplicateJobName: refusing Slurm's answer on <login> for job <uid>: 1 running job(s) and PENDING waiting have that name (job ids 4101, 4102)"},
		// interLink's plugin reports a job's end half a minute after Slurm ends it: a job that
		// ran to its end is said so, and no node wait times out over it.
		"a job of the pod's name whose every ended line is COMPLETED is JobCompleted": {"4100 COMPLETED h13\n3999 COMPLETED h13\n", "",
			"JobCompleted: job <uid> COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it"},
		"a COMPLETED job beside a CANCELLED one of the pod's name is NoRunningJob": {"4100 COMPLETED h14\n3999 CANCELLED h14\n", "",
			"NodeWaitTimedOut: no compute node after 2s (NodeWaitTimeout): Slurm on <login> has not reported job <uid> running; last: NoRunningJob: no running job named <uid> in Slurm: it ended (COMPLETED, CANCELLED)"},
		"a running job beside an older COMPLETED one of the pod's name is taken": {"4100 RUNNING h15\n3999 COMPLETED h15\n", node("h15", "10.1.2.15"), "compute node is 10.1.2.15"},
		// A job Slurm is ending ran; how it ended is not known yet: no waiting for it to run,
		// and the node wait, quiet meanwhile, names it when it times out.
		"a COMPLETING job of the pod's name is Connecting": {"4100 COMPLETING h16\n", "",
			"NodeWaitTimedOut: no compute node after 2s (NodeWaitTimeout): Slurm on <login> has not reported job <uid> running; last: Connecting: job <uid> is COMPLETING in Slurm: its end is not known yet"},
		"a STAGE_OUT job beside a CANCELLED one of the pod's name is Connecting": {"4100 STAGE_OUT h17\n3999 CANCELLED h17\n", "",
			"last: Connecting: job <uid> is STAGE_OUT in Slurm: its end is not known yet"},
		"a running job beside a COMPLETING one of the pod's name is refused, naming both": {"4101 RUNNING h18\n4100 COMPLETING h18\n", "",
			"DuplicateJobName: refusing Slurm's answer on <login> for job <uid>: 1 running job(s) and none waiting (and COMPLETING ending) have that name (job ids 4101, 4100)"},
		"two node lines for the batch host are refused": {"4100 RUNNING h7\n", node("h7", "10.0.0.7") + node("h7", "10.0.0.8"),
			"scontrol show node h7 printed 2 lines, want 1"},
		"a node line of another node is refused":        {"4100 RUNNING h8\n", node("other", "10.0.0.9"), "printed no NodeAddr for that node"},
		"a job line whose state is no state is refused": {"4100 running; touch " + pwned + " h9\n", "", "a job line that is not <job id> <state> <batch host>: job 4100 running; touch"},
		"a job line whose job id is no number is refused": {"--jobid=1 RUNNING h12\n", "",
			"a job line that is not <job id> <state> <batch host>: job --jobid=1 RUNNING h12"},
		"escape sequences are not echoed raw": {"4100 RUNNING h10\x1b]0;owned\x07\r\x1b[2Jx\n", "",
			"batch host 'h10]0;owned [2Jx' is not a hostname"},
		"an answer over 16 KiB is refused": {strings.Repeat("4100 PENDING n/a\n", 2000), "", "longer than 16384 bytes"},
		// What Slurm says of a queued job, squeue's %S and %r, is said with it: in Slurm's own
		// shapes only, and a value in another is unreadable, never quoted.
		"a queued job's reason and expected start are said": {"4100 PENDING n/a 2026-12-06T04:00:00 BeginTime\n", "",
			"last: WaitingForNode: job <uid> is PENDING in Slurm (reason BeginTime, expected start 2026-12-06T04:00:00Z): waiting for it to run"},
		"a queued job with no expected start says N/A": {"4100 PENDING n/a N/A Priority\n", "",
			"job <uid> is PENDING in Slurm (reason Priority, expected start N/A): waiting for it to run"},
		"a reason with a node list and a space is said whole": {"4100 PENDING n/a N/A ReqNodeNotAvail, UnavailableNodes:n[01-03]\n", "",
			"job <uid> is PENDING in Slurm (reason ReqNodeNotAvail, UnavailableNodes:n[01-03], expected start N/A): waiting"},
		"the first queued job's reason is said when two wait": {"4100 PENDING n/a N/A Resources\n4101 REQUEUE_HOLD n/a Unknown JobHeldAdmin\n", "",
			"job <uid> is PENDING, REQUEUE_HOLD in Slurm (reason Resources, expected start N/A): waiting"},
		"a reason with shell or escape characters is unreadable": {"4100 PENDING n/a N/A $(touch${IFS}" + pwned + ")\x1b[2J\n", "",
			"job <uid> is PENDING in Slurm (reason unreadable, expected start N/A): waiting"},
		"a reason longer than 128 characters is unreadable": {"4100 PENDING n/a N/A " + strings.Repeat("R", 129) + "\n", "",
			"job <uid> is PENDING in Slurm (reason unreadable, expected start N/A): waiting"},
		"a start time that is not Slurm's is unreadable": {"4100 PENDING n/a Tomorr;04:00 Priority\n", "",
			"job <uid> is PENDING in Slurm (reason Priority, expected start unreadable): waiting"},
		"a running job's start and reason are not checked, only its node": {"4100 RUNNING h19 2026-12-06T03:00:00 None\n", node("h19", "10.1.2.19"), "compute node is 10.1.2.19"},
	}
	i := 0
	for name, c := range cases {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		i++
		if err := os.WriteFile(filepath.Join(stubs, uid+".squeue"), []byte(c.squeue), 0o644); err != nil {
			t.Fatal(err)
		}
		c.want = strings.NewReplacer("<login>", login.Host, "<uid>", uid).Replace(c.want)
		line, _, _ := strings.Cut(c.squeue, "\n")
		host, _, _ := strings.Cut(strings.TrimPrefix(line, "4100 RUNNING "), " ")
		if c.scontrol != "" {
			if err := os.WriteFile(filepath.Join(stubs, host+".scontrol"), []byte(c.scontrol), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			doc := fmt.Sprintf(`
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: %s, Port: %d, User: %s, KeySecret: k, KnownHostsConfigMap: h, NodeWaitTimeout: 2s}
`, login.Host, login.Port, login.User)
			pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888})
			pod.UID = types.UID(uid)
			shadow, _ := render(t, doc, pod)
			mounts := map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir(), knownHostsDir: t.TempDir()}
			copyFile(t, login.ClientKey, filepath.Join(mounts[keyDir], keyFile), 0o400)
			copyFile(t, login.KnownHosts, filepath.Join(mounts[knownHostsDir], knownHostsKey), 0o644)
			p := runContainer(t, container(t, shadow.Deployment, containerWaitForNode), mounts, pollEnv, slurmPollEnv)
			code := p.wait(t, 60*time.Second)
			out := p.out.String()
			if !strings.Contains(out, c.want) {
				t.Errorf("the log lacks %q:\n%q", c.want, out)
			}
			if completed := strings.HasPrefix(c.want, "JobCompleted: "); completed && strings.Contains(out, "NodeWaitTimedOut") {
				t.Errorf("a job that completed timed the node wait out:\n%s", out)
			}
			if taken := strings.Contains(out, "compute node is "); taken != (code == 0) || taken != strings.HasPrefix(c.want, "compute node is ") {
				t.Errorf("exit code %d, node taken %v:\n%s", code, taken, out)
			}
			if strings.ContainsAny(out, "\x1b\x07\r\x00") {
				t.Errorf("the log carries control characters from the answer: %q", out)
			}
			if _, err := os.Stat(pwned); err == nil {
				t.Errorf("the answer ran a command")
			}
		})
	}
}

// Slurm revises a queued job's expected start on every scheduling pass: wait-for-node's state
// file follows each answer, its log a new reason or a start that moved by 10 minutes or more.
func TestSlurmDiscoveryLogsAQueuedJobsStartOnlyWhenItMoves(t *testing.T) {
	stubs := stubSlurm(t)
	login := sshtest.StartSSHD(t, "SetEnv PATH="+stubs+":/usr/bin:/bin")
	const uid = "0c7dcf86-d1a0-4e5d-8abf-7b6c8d9eafb0"
	squeue := filepath.Join(stubs, uid+".squeue")
	pending := func(start, reason string) string { return "4100 PENDING n/a " + start + " " + reason + "\n" }
	said := func(start, reason string) string {
		return "job " + uid + " is PENDING in Slurm (reason " + reason + ", expected start " + start + "Z): waiting for it to run"
	}
	writeAtomically(t, squeue, pending("2026-12-06T04:00:00", "Priority"))
	pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888})
	pod.UID = types.UID(uid)
	shadow, _ := render(t, fmt.Sprintf(`
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: %s, Port: %d, User: %s, KeySecret: k, KnownHostsConfigMap: h, NodeWaitTimeout: 10m}
`, login.Host, login.Port, login.User), pod)
	mounts := map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir(), knownHostsDir: t.TempDir()}
	copyFile(t, login.ClientKey, filepath.Join(mounts[keyDir], keyFile), 0o400)
	copyFile(t, login.KnownHosts, filepath.Join(mounts[knownHostsDir], knownHostsKey), 0o644)
	p := runContainer(t, container(t, shadow.Deployment, containerWaitForNode), mounts, pollEnv, slurmPollEnv)
	expectLog(t, p, said("2026-12-06T04:00:00", "Priority"))

	state := filepath.Join(mounts[stateDir], "node-discovery."+containerWaitForNode)
	for _, c := range []struct {
		start, reason string
		logged        bool
	}{
		{"2026-12-06T04:09:59", "Priority", false},
		{"2026-12-06T03:50:01", "Priority", false},
		{"2026-12-06T04:10:00", "Priority", true},
		{"2026-12-06T04:11:00", "Resources", true},
		{"N/A", "Resources", true},
	} {
		writeAtomically(t, squeue, pending(c.start, c.reason))
		want := said(c.start, c.reason)
		if c.start == "N/A" {
			want = strings.Replace(want, "N/AZ", "N/A", 1)
		}
		eventually(t, 30*time.Second, func() error {
			if got, _ := os.ReadFile(state); strings.TrimSpace(string(got)) != "WaitingForNode: "+want {
				return fmt.Errorf("the state file holds %q, want %q", got, want)
			}
			return nil
		})
		if c.logged {
			expectLog(t, p, want)
		}
	}
	for _, quiet := range []string{"04:09:59", "03:50:01"} {
		if strings.Contains(p.out.String(), quiet) {
			t.Errorf("an expected start that moved by less than 10 minutes (%s) was logged:\n%s", quiet, p.out)
		}
	}
	if !p.running() {
		t.Errorf("wait-for-node exited while the job is queued:\n%s", p.out)
	}
}

// The job name comes from the pod UID; anything else is refused before any lookup, so squeue
// never gets an empty --name (every job) or an option.
func TestSlurmDiscoveryRefusesAJobNameThatIsNoUID(t *testing.T) {
	sshtest.Require(t, "sh", "bash")
	pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888})
	shadow, _ := render(t, `
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: login.example.org, User: alice, KeySecret: k}
`, pod)
	for name, value := range map[string]string{
		"an empty job name, which squeue would take for every job": "",
		"an option":                          "--all",
		"a name with a shell character":      "0b5e3c2a-5d1f-4c1e-9a47-6f0d3f1b2c3;",
		"upper-case hex, which no UID holds": "0B5E3C2A-5D1F-4C1E-9A47-6F0D3F1B2C3D",
	} {
		for _, c := range []string{containerWaitForNode, containerForward} {
			t.Run(c+": "+name, func(t *testing.T) {
				mounts := map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir()}
				p := runContainer(t, container(t, shadow.Deployment, c), mounts, envReverseJobName+"="+value)
				p.expectFailure(t, 15*time.Second, "the script ran with a job name that is no pod UID",
					"SHADOW_REVERSE_JOB_NAME holds '"+value+"', not the pod UID the batch job is named after")
			})
		}
	}
}

// TestSlurmQueryPassesShellcheck checks the text run on the login node, which reaches no
// shell on this side and so no other syntax check.
func TestSlurmQueryPassesShellcheck(t *testing.T) {
	sshtest.Require(t, "sh", "shellcheck")
	query, err := exec.Command("sh", "-c", commonFunctions+`printf '%s\n' "$slurm_query"`).Output()
	if err != nil || !strings.Contains(string(query), "squeue --me") {
		t.Fatalf("slurm_query: %v\n%s", err, query)
	}
	cmd := exec.Command("shellcheck", "--shell=sh", "-")
	cmd.Stdin = strings.NewReader(string(query))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// TestSlurmDiscoveryNamesTheJobsEndOnAFailedForward: once the job's port stops answering,
// ssh-forward reports what Slurm said last rather than the refused channel: JobCompleted for a
// job that ran to its end, NoRunningJob for any other end. The login node's squeue and
// stubRunningJob has stubSlurm's squeue in stubs say that job uid runs on host, and its
// scontrol that host is at addr; it returns the file squeue answers for uid from.
func stubRunningJob(t *testing.T, stubs, uid, host, addr string) string {
	t.Helper()
	squeue := filepath.Join(stubs, uid+".squeue")
	writeAtomically(t, squeue, "4100 RUNNING "+host+"\n")
	writeAtomically(t, filepath.Join(stubs, host+".scontrol"), "NodeName="+host+" Arch=x86_64 NodeAddr="+addr+" NodeHostName="+host+" State=MIXED\n")
	return squeue
}

// forwardThrough renders the shadow of a pod with uid forwarding port, logging in to login,
// and the volumes its ssh-forward container mounts, with login's key and known hosts.
func forwardThrough(t *testing.T, login *sshtest.Server, uid string, port int) (*Shadow, map[string]string) {
	t.Helper()
	doc := fmt.Sprintf(`
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: %s, Port: %d, User: %s, KeySecret: k, KnownHostsConfigMap: h}
`, login.Host, login.Port, login.User)
	pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: int32(port)})
	pod.UID = types.UID(uid)
	shadow, _ := render(t, doc, pod)
	mounts := map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir(), knownHostsDir: t.TempDir()}
	copyFile(t, login.ClientKey, filepath.Join(mounts[keyDir], keyFile), 0o400)
	copyFile(t, login.KnownHosts, filepath.Join(mounts[knownHostsDir], knownHostsKey), 0o644)
	return shadow, mounts
}

// scontrol are hostileStub's, so the job can be made to end as each case needs.
func TestSlurmDiscoveryNamesTheJobsEndOnAFailedForward(t *testing.T) {
	stubs := stubSlurm(t)
	login := sshtest.StartSSHD(t, "SetEnv PATH="+stubs+":/usr/bin:/bin")
	// Each case's batch host is its own, hc<i>: the stub's scontrol answers by host.
	for i, c := range []struct{ name, ended, want string }{
		{"a job whose every ended line is COMPLETED is JobCompleted", "4100 COMPLETED hc%d\n",
			"JobCompleted: job <uid> COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it"},
		{"a COMPLETED job beside a CANCELLED one is NoRunningJob", "4100 COMPLETED hc%[1]d\n3999 CANCELLED hc%[1]d\n",
			"NoRunningJob: no running job named <uid> in Slurm: it ended (COMPLETED, CANCELLED)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			uid := fmt.Sprintf("%08x-0000-4000-8000-0000000000ec", i)
			node, listen := sshtest.NodeAddress(t), sshtest.Loopback(t) // nothing listens on node
			port := sshtest.FreePort(t, node, listen)
			squeue := stubRunningJob(t, stubs, uid, fmt.Sprintf("hc%d", i), node)
			shadow, mounts := forwardThrough(t, login, uid, port)
			p := runContainer(t, container(t, shadow.Deployment, containerForward), mounts, pollEnv, slurmPollEnv,
				"SHADOW_CHECK_INTERVAL=0.5", "SHADOW_LISTEN_ADDRESS="+listen)
			status := filepath.Join(mounts[stateDir], statusDir, containerForward)
			r := strings.NewReplacer("%node", node, "%port", strconv.Itoa(port))
			// While the job runs, the refused port is the reason.
			expectReason(t, status, "NodeConnectionRefused", r, []string{"%node", "port %port"})
			writeAtomically(t, squeue, fmt.Sprintf(c.ended, i))
			reason, message, _ := strings.Cut(strings.ReplaceAll(c.want, "<uid>", uid), ": ")
			expectReason(t, status, reason, strings.NewReplacer(), []string{message})
			if !p.running() {
				t.Errorf("ssh-forward exited when the job ended:\n%s", p.out)
			}
		})
	}
}

// TestSlurmDiscoveryAsksAfreshOnAFailedForward: a job's server stops as the job ends, up to a
// poll interval before discovery asks Slurm again. The check that fails asks Slurm itself,
// once, so it reports the job's end, never the refused port; a check that passes asks
// nothing. Discovery here polls once an hour, so only the check's own lookup can know.
func TestSlurmDiscoveryAsksAfreshOnAFailedForward(t *testing.T) {
	stubs := stubSlurm(t)
	for i, c := range []struct{ name, ended, want string }{
		{"a job that COMPLETED is JobCompleted", "4100 COMPLETED hf%d\n",
			"JobCompleted: job <uid> COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it"},
		{"a job Slurm is COMPLETING is Connecting", "4100 COMPLETING hf%d\n",
			"Connecting: job <uid> is COMPLETING in Slurm: its end is not known yet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A login node of its own, whose logins are this case's alone.
			login := sshtest.StartSSHD(t, "SetEnv PATH="+stubs+":/usr/bin:/bin")
			uid := fmt.Sprintf("%08x-0000-4000-8000-0000000000fa", i)
			node, listen := sshtest.NodeAddress(t), sshtest.Loopback(t)
			port := sshtest.FreePort(t, node, listen)
			// The job's server: it stops, as the job's does, when the job ends.
			server, err := net.Listen("tcp", net.JoinHostPort(node, strconv.Itoa(port)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { server.Close() })
			go func() {
				for {
					conn, err := server.Accept()
					if err != nil {
						return
					}
					// As a job's server: it hangs up once the check has.
					go func() { _, _ = io.Copy(io.Discard, conn); conn.Close() }()
				}
			}()
			squeue := stubRunningJob(t, stubs, uid, fmt.Sprintf("hf%d", i), node)
			shadow, mounts := forwardThrough(t, login, uid, port)
			p := runContainer(t, container(t, shadow.Deployment, containerForward), mounts, pollEnv,
				"SHADOW_SLURM_POLL_INTERVAL=3600", "SHADOW_CHECK_INTERVAL=0.5", "SHADOW_LISTEN_ADDRESS="+listen)
			status := filepath.Join(mounts[stateDir], statusDir, containerForward)
			expectReason(t, status, "Ready", strings.NewReplacer(), []string{node})
			// Passing checks log in nowhere: the status is written again by each, and the login
			// node has seen no login since the first Ready.
			logins := func() int { return strings.Count(login.Log(), "Accepted publickey for ") }
			before, first := logins(), statusTime(t, status)
			eventually(t, 30*time.Second, func() error {
				if at := statusTime(t, status); at < first+2 {
					return fmt.Errorf("the status was written at %d, not yet 2 s after %d", at, first)
				}
				return nil
			})
			if got := readReason(status); !strings.HasPrefix(got, "Ready: ") {
				t.Fatalf("the tunnel is no longer Ready: %q", got)
			}
			if after := logins(); after != before {
				t.Errorf("passing checks logged in %d times; want none", after-before)
			}
			// Slurm ends the job, then its server stops: discovery still says NodeFound.
			writeAtomically(t, squeue, fmt.Sprintf(c.ended, i))
			server.Close()
			reason, message, _ := strings.Cut(strings.ReplaceAll(c.want, "<uid>", uid), ": ")
			expectReason(t, status, reason, strings.NewReplacer(), []string{message})
			if strings.Contains(p.out.String(), "status: NodeConnectionRefused") {
				t.Errorf("a check reported the refused port before the job's end:\n%s", p.out)
			}
			if !p.running() {
				t.Errorf("ssh-forward exited when the job ended:\n%s", p.out)
			}
		})
	}
}

// statusTime is the epoch a status file's line was written at.
func statusTime(t *testing.T, file string) int64 {
	t.Helper()
	at, _, _ := strings.Cut(sshtest.ReadFile(t, file), " ")
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		t.Fatalf("%s holds no epoch: %v", file, err)
	}
	return n
}
