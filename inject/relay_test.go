package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
)

// relayLookup loads relay.py as a module, the way python3 -I runs it (no path from the
// environment), and answers queries against the tables recorded in relay/testdata. The
// recordings come from this kind of machine (little-endian); their uids were edited so each
// socket has an owner of its own.
const relayLookup = `
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("relay", "relay/relay.py")
relay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(relay)
tables = [open("relay/testdata/proc-net-tcp").read(), open("relay/testdata/proc-net-tcp6").read()]
ip = relay.ipaddress.ip_address
out = {}
for name, q in json.load(sys.stdin).items():
    if q["kind"] == "owner":
        out[name] = relay.owner(tables, (ip(q["client"][0]), q["client"][1]), (ip(q["server"][0]), q["server"][1]))
    else:
        out[name] = relay.socks_listener(tables, q["port"], q["uid"])
json.dump(out, sys.stdout)
`

func TestRelayReadsProcNet(t *testing.T) {
	sshtest.Require(t, "python3")
	type query struct {
		Kind   string `json:"kind"`
		Client []any  `json:"client,omitempty"`
		Server []any  `json:"server,omitempty"`
		Port   int    `json:"port,omitempty"`
		UID    int    `json:"uid,omitempty"`
	}
	owner := func(client string, cport int, server string, sport int) query {
		return query{Kind: "owner", Client: []any{client, cport}, Server: []any{server, sport}}
	}
	cases := map[string]struct {
		q    query
		want any
	}{
		"an IPv4 client is found in tcp by its own end of the connection":       {owner("127.0.0.1", 0xB188, "127.1.2.3", 0x4A38), 1001.0},
		"another user's IPv4 client is that user's":                             {owner("127.0.0.1", 0xB1A0, "127.1.2.3", 0x4A38), 1003.0},
		"an IPv6 client reaching the IPv4 listener v4-mapped is found in tcp6":  {owner("127.0.0.1", 0xB198, "127.1.2.3", 0x4A38), 1001.0},
		"an IPv6 client of an IPv6 listener is found in tcp6":                   {owner("::1", 0x9FDA, "::1", 0x4A39), 1002.0},
		"a connection nobody has is nobody's":                                   {owner("127.0.0.1", 1, "127.1.2.3", 0x4A38), nil},
		"a client closed before accept, an orphan shown as root's, is nobody's": {owner("127.0.0.1", 0xB1B0, "127.1.2.3", 0x4A38), nil},
		"a client in TIME_WAIT is nobody's":                                     {owner("127.0.0.1", 0xB1B8, "127.1.2.3", 0x4A38), nil},
		"a live client that has shut down its writing is its user's":            {owner("127.0.0.1", 0xB1C0, "127.1.2.3", 0x4A38), 1001.0},
		"a SOCKS listener of the job's user on 127.0.0.1 is ready":              {query{Kind: "socks", Port: 0x4A3B, UID: 1002}, "ok"},
		"another user's listener on 127.0.0.1 is not":                           {query{Kind: "socks", Port: 0x4A3B, UID: 1001}, "waiting"},
		"the job's user on 0.0.0.0 (GatewayPorts yes) is refused":               {query{Kind: "socks", Port: 0x4A3A, UID: 1001}, "wildcard"},
		"the job's user on :: is refused too":                                   {query{Kind: "socks", Port: 0x4A3C, UID: 1004}, "wildcard"},
		"no listener yet is waiting":                                            {query{Kind: "socks", Port: 1080, UID: 1001}, "waiting"},
	}
	queries := map[string]query{}
	for name, c := range cases {
		queries[name] = c.q
	}
	in, _ := json.Marshal(queries)
	out := runRelayModule(t, relayLookup, in)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, c := range cases {
		if got[name] != c.want {
			t.Errorf("%s: got %v, want %v", name, got[name], c.want)
		}
	}
}

func TestRelayLogsEachKindOfFailureOnceThenEveryThousandth(t *testing.T) {
	sshtest.Require(t, "python3")
	const script = `
import importlib.util
spec = importlib.util.spec_from_file_location("relay", "relay/relay.py")
relay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(relay)
log = relay.Log()
for _ in range(2500):
    log.failure("foreign", "refused")
log.failure("down", "not up")
`
	out := runRelayModule(t, script, nil)
	want := "interLink reverse tunnel: refused\n" +
		"interLink reverse tunnel: refused (1000 times so far)\n" +
		"interLink reverse tunnel: refused (2000 times so far)\n" +
		"interLink reverse tunnel: not up\n"
	if string(out) != want {
		t.Errorf("logged:\n%s\nwant:\n%s", out, want)
	}
}

func TestRelayRefusesToServeAsRoot(t *testing.T) {
	sshtest.Require(t, "python3")
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the relay as root, to see it refuse: run it as root, as make test does")
	}
	const script = `
import importlib.util, sys
spec = importlib.util.spec_from_file_location("relay", "relay/relay.py")
relay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(relay)
print("exit", relay.serve(sys.argv[1], "127.0.0.2", 1, [20000], ""))
`
	dir := t.TempDir()
	cmd := exec.Command("python3", "-I", "-B", "-c", script, dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("refusing to run as root")) || !bytes.HasSuffix(out, []byte("exit 1\n")) {
		t.Errorf("relay serve as root: %v\n%s", err, out)
	}
}

// runRelayModule runs a python3 program that loads relay/relay.py, with stdin, and returns its
// output. -B: loading the module would otherwise write its bytecode into the source tree.
func runRelayModule(t *testing.T, program string, stdin []byte) []byte {
	t.Helper()
	cmd := exec.Command("python3", "-I", "-B", "-c", program)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if _, err := os.Stat("relay/__pycache__"); err == nil {
		t.Error("relay/__pycache__ exists: a test or a run of relay.py wrote bytecode into the source tree")
	}
	return out
}

// relayOwners accepts argv[1] connections and prints, a line each, what the client said it
// is, the uid the relay attributes its connection to, and whether the relay reads
// /proc/net/tcp instead of asking sock_diag. With argv[2] "no-netlink", the kernel refuses
// the relay's sock_diag socket, as a kernel without it or a sandbox does.
const relayOwners = `
import importlib.util, json, socket, sys
spec = importlib.util.spec_from_file_location("relay", "relay/relay.py")
relay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(relay)
if sys.argv[2] == "no-netlink":
    relay.NETLINK_SOCK_DIAG = 255  # no such netlink protocol: socket() fails
owners = relay.Owners()
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
owners.probe(listener)
print(listener.getsockname()[1], flush=True)
for _ in range(int(sys.argv[1])):
    conn, _ = listener.accept()
    claimed = conn.makefile().readline().strip()
    uid = owners.of(relay.endpoint(conn.getpeername()), relay.endpoint(conn.getsockname()))
    print(json.dumps([claimed, uid, owners.proc]), flush=True)
    conn.close()
`

// The relay lets a connection through only when its client end belongs to the relay's own
// user, so attributing it to the wrong uid would open the job's tunnel to another user of
// the node. The relay runs as the job's user, as on a node, and asks sock_diag; where it
// cannot, it says so and reads /proc/net/tcp, with the same answers.
func TestRelayAttributesEachConnectionToTheUserWhoseSocketItIs(t *testing.T) {
	sshtest.Require(t, "python3", "socat")
	t.Run("by sock_diag", func(t *testing.T) { testRelayOwners(t, "netlink") })
	t.Run("by /proc/net/tcp where netlink is refused", func(t *testing.T) { testRelayOwners(t, "no-netlink") })
}

func testRelayOwners(t *testing.T, netlink string) {
	job, other := newAccount(t, jobUser), newAccount(t, otherUser)
	clients := []struct {
		network  string
		uid, gid uint32
	}{
		{"tcp4", job.uid, job.gid}, {"tcp4", other.uid, other.gid}, {"tcp4", 0, 0},
		{"tcp6", other.uid, other.gid}, {"tcp6", job.uid, job.gid},
	}
	// The job's python3, as its shell finds it (the PATH of this process may name one of
	// root's own).
	cmd := exec.Command("/bin/sh", "-c", `exec python3 -I -B -c "$1" "$2" "$3"`, "sh", relayOwners, strconv.Itoa(len(clients)), netlink)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: job.uid, Gid: job.gid}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("the relay module printed no port: %s", stderr.String())
	}
	port := strings.TrimSpace(lines.Text())
	for _, c := range clients {
		claim := fmt.Sprintf("%s uid %d\n", c.network, c.uid)
		if c.network == "tcp4" {
			// As the benchmarks connect as the job's user (dialTCPAs).
			conn, err := dialTCPAs(c.network, c.uid, "127.0.0.1:"+port, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = conn.Write([]byte(claim))
			defer conn.Close()
		} else {
			// An IPv6 client (a JVM's default) reaches the IPv4 listener at its v4-mapped
			// address, which Go's dialer does not dial. socat's input stays open until the
			// answer: a closed client end is nobody's.
			in, w := io.Pipe()
			socat := exec.Command("socat", "-", "TCP6:[::ffff:127.0.0.1]:"+port)
			socat.Stdin = in
			socat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid}}
			if err := socat.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = w.Write([]byte(claim)) }()
			defer func() { w.Close(); _ = socat.Wait() }()
		}
		if !lines.Scan() {
			t.Fatalf("no answer for %s uid %d: %s", c.network, c.uid, stderr.String())
		}
		var got []any
		if err := json.Unmarshal(lines.Bytes(), &got); err != nil || len(got) != 3 {
			t.Fatalf("%q: %v", lines.Text(), err)
		}
		if want := fmt.Sprintf("%s uid %d", c.network, c.uid); got[0] != want || got[1] != float64(c.uid) {
			t.Errorf("a connection of %s was attributed to uid %v", want, got[1])
		}
		if proc := netlink == "no-netlink"; got[2] != proc {
			t.Errorf("reading /proc/net/tcp: %v, want %v", got[2], proc)
		}
	}
	said := strings.Contains(stderr.String(), "sock_diag is unavailable (")
	if netlink == "no-netlink" && !said {
		t.Errorf("the relay did not say it reads /proc/net/tcp instead of asking sock_diag: %q", stderr.String())
	} else if netlink == "netlink" && stderr.Len() > 0 {
		t.Errorf("the relay said: %s", stderr.String())
	}
}
