package inject

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

var testBind = netip.MustParseAddr("127.0.10.1")

// relayHeredoc ends the relay's here-document in scripts/reverse-preexec.sh.
const relayHeredoc = "SHADOWGATE_RELAY_PY"

func forward(listen int, host, dial string, port int) validate.Forward {
	return validate.Forward{ListenPort: listen, Host: host, Port: port, DialHost: dial}
}

func TestPreExecPassesTheShells(t *testing.T) {
	sshtest.Require(t, "shellcheck", "bash")
	node := policy.Defaults()
	absolute := policy.Defaults()
	absolute.Network.SSH.Reverse.PythonPath = "/opt/python/3.12/bin/python3"
	for name, o := range map[string]*validate.Offload{
		"forwards by name":                  {Node: node, Forwards: []validate.Forward{forward(9000, "minio", "minio.user", 9000)}},
		"forwards to IP addresses only":     {Node: node, Forwards: []validate.Forward{forward(8080, "10.0.0.7", "10.0.0.7", 80), forward(8443, "fd00::1", "fd00::1", 443)}},
		"a SOCKS port only":                 {Node: node, SocksPort: 1080},
		"forwards and a SOCKS port":         {Node: node, SocksPort: 1080, Forwards: []validate.Forward{forward(6443, "kubernetes.default.svc.cluster.local", "kubernetes.default.svc.cluster.local", 443)}},
		"python named by its absolute path": {Node: absolute, Forwards: []validate.Forward{forward(9000, "minio", "minio.user", 9000)}},
	} {
		t.Run(name, func(t *testing.T) {
			snippet, err := preExec(o, testBind)
			if err != nil {
				t.Fatal(err)
			}
			// The plugin's batch script may be sh or bash, and the user's pre-exec follows.
			script := filepath.Join(t.TempDir(), "pre-exec")
			if err := os.WriteFile(script, []byte(snippet+"module load cuda\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, check := range [][]string{{"sh", "-n", script}, {"bash", "-n", script}, {"shellcheck", "-s", "sh", script}} {
				if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil {
					t.Errorf("%s: %v\n%s", strings.Join(check, " "), err, out)
				}
			}
		})
	}
}

func TestPreExecCallsTheSnippetWithTheValidatedValues(t *testing.T) {
	node := policy.Defaults()
	for name, c := range map[string]struct {
		o    *validate.Offload
		want string
	}{
		"a bare Service name keeps its own name in /etc/hosts, though the shadow dials it qualified": {
			&validate.Offload{Node: node, Forwards: []validate.Forward{forward(9000, "minio", "minio.user", 9000)}},
			"'127.0.10.1' 'python3' '9000' '' 'minio'",
		},
		"IP addresses and localhost are not names /etc/hosts can redirect": {
			&validate.Offload{Node: node, Forwards: []validate.Forward{forward(8080, "10.0.0.7", "10.0.0.7", 80), forward(8081, "localhost", "localhost", 80), forward(8082, "fd00::1", "fd00::1", 80)}},
			"'127.0.10.1' 'python3' '8080,8081,8082' '' ''",
		},
		"a name listed twice is mapped once": {
			&validate.Offload{Node: node, Forwards: []validate.Forward{forward(9000, "minio.user.svc", "minio.user.svc", 9000), forward(9001, "MinIO.user.svc", "MinIO.user.svc", 9001)}},
			"'127.0.10.1' 'python3' '9000,9001' '' 'minio.user.svc'",
		},
		"a Service's full name maps its shorter names too, the bare one only in the pod's namespace": {
			&validate.Offload{Node: node, Namespace: "user", Forwards: []validate.Forward{
				forward(9000, "minio.user.svc.cluster.local", "minio.user.svc.cluster.local", 9000),
				forward(6443, "kubernetes.default.svc.cluster.local", "kubernetes.default.svc.cluster.local", 443)}},
			"'127.0.10.1' 'python3' '9000,6443' '' 'minio.user.svc.cluster.local,minio.user.svc,minio.user,minio,kubernetes.default.svc.cluster.local,kubernetes.default.svc,kubernetes.default'",
		},
		"a SOCKS port alone has no ports and no names": {
			&validate.Offload{Node: node, SocksPort: 1080},
			"'127.0.10.1' 'python3' '' '1080' ''",
		},
	} {
		t.Run(name, func(t *testing.T) {
			snippet, err := preExec(c.o, testBind)
			if err != nil {
				t.Fatal(err)
			}
			if want := "\nshadowgate_reverse_tunnel " + c.want + " || exit 1\n" + markerEnd + "\n"; !strings.HasSuffix(snippet, want) {
				t.Errorf("the snippet does not end in%s", want)
			}
		})
	}
}

func TestPreExecRefusesAValueItWouldHaveToEscape(t *testing.T) {
	o := &validate.Offload{Node: policy.Defaults(), Forwards: []validate.Forward{forward(9000, "minio'; reboot; '", "x", 9000)}}
	if _, err := preExec(o, testBind); err == nil {
		t.Fatal("preExec took a name with a quote")
	}
}

func TestPreExecHoldsTheCarriedRelayVerbatim(t *testing.T) {
	if !strings.Contains(preExecBody, "<<'"+relayHeredoc+"'") {
		t.Fatalf("the snippet does not quote the relay's here-document %s", relayHeredoc)
	}
	for _, line := range strings.Split(relayPy, "\n") {
		if line == relayHeredoc {
			t.Fatalf("relay.py has a line %s, which would end its here-document early", relayHeredoc)
		}
	}
	if !strings.Contains(preExecBody, carriedRelay) {
		t.Error("the snippet does not hold relay.py, without its docstrings, as it is")
	}
}

func TestPreExecBindsTheHostsFileAfterTheJobsOwnBinds(t *testing.T) {
	for name, c := range map[string]struct {
		env                  []string
		singularity, apptain string
	}{
		"neither variable set": {nil, "/tmp/h:/etc/hosts", "/tmp/h:/etc/hosts"},
		"only the legacy SINGULARITY_BIND: Apptainer would ignore it once APPTAINER_BIND is set, so both carry it": {
			[]string{"SINGULARITY_BIND=/data"}, "/data,/tmp/h:/etc/hosts", "/data,/tmp/h:/etc/hosts"},
		"only APPTAINER_BIND":                                      {[]string{"APPTAINER_BIND=/scratch"}, "/tmp/h:/etc/hosts", "/scratch,/tmp/h:/etc/hosts"},
		"both set: each keeps its own":                             {[]string{"SINGULARITY_BIND=/data", "APPTAINER_BIND=/scratch"}, "/data,/tmp/h:/etc/hosts", "/scratch,/tmp/h:/etc/hosts"},
		"an empty APPTAINER_BIND counts as unset, as in Apptainer": {[]string{"SINGULARITY_BIND=/data", "APPTAINER_BIND="}, "/data,/tmp/h:/etc/hosts", "/data,/tmp/h:/etc/hosts"},
	} {
		t.Run(name, func(t *testing.T) {
			script := preExecBody + `
shadowgate_reverse_bind_hosts /tmp/h
sh -c 'printf "%s\n%s\n" "$SINGULARITY_BIND" "$APPTAINER_BIND"'
`
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, c.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if want := c.singularity + "\n" + c.apptain + "\n"; string(out) != want {
				t.Errorf("exported SINGULARITY_BIND, APPTAINER_BIND:\n%s\nwant:\n%s", out, want)
			}
		})
	}
}
