package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// checkEnvValue holds the lines of the multi-value variables to what they were built from: a
// newline smuggled into one value makes every line a well-formed option or forward, so only
// the count and the whole values tell it.
func TestCheckEnvValueCatchesASmuggledLine(t *testing.T) {
	o := &validate.Offload{Node: policy.Defaults(), Forwards: []validate.Forward{{ListenPort: 9000, DialHost: "minio.user", Port: 9000}}}
	o.Node.Network.SSH.User = "alice"
	o.Node.Network.SSH.ExtraOptions = []string{"Compression=yes"}
	fixed := func(extra ...string) string {
		before := []string{"User=alice", "Port=22", "BatchMode=yes", "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=accept-new",
			"UserKnownHostsFile=/run/shadow/known_hosts", "IdentityFile=/k/id", "IdentitiesOnly=yes", "PreferredAuthentications=publickey", "ExitOnForwardFailure=yes"}
		return strings.Join(append(append(before, extra...), "ServerAliveInterval=30", "ServerAliveCountMax=3", "ConnectTimeout=30"), "\n")
	}
	for name, c := range map[string]struct {
		env  corev1.EnvVar
		want string // the start of the error; empty for none
	}{
		"the options as built pass": {corev1.EnvVar{Name: envSSHOptions, Value: fixed("Compression=yes")}, ""},
		"an ExtraOption that brought a second line is refused": {corev1.EnvVar{Name: envSSHOptions, Value: fixed("Compression=yes", "ProxyJump=evil")},
			"15 ssh option lines, want 13 fixed and the policy's 1 ExtraOptions"},
		"a line that is not the ExtraOption, whole, is refused": {corev1.EnvVar{Name: envSSHOptions, Value: fixed("Compression=no")},
			`ssh option line "Compression=no" is not the policy's ExtraOption "Compression=yes", whole`},
		"the forwards as built pass": {corev1.EnvVar{Name: envReverseForwards, Value: "9000 minio.user 9000"}, ""},
		"a forward that brought a second line is refused": {corev1.EnvVar{Name: envReverseForwards, Value: "9000 minio.user 9000\n22 evil 22"},
			"2 reverse forward lines for the pod's 1 forwards"},
		"a forward that is not the pod's is refused": {corev1.EnvVar{Name: envReverseForwards, Value: "9000 evil 9000"},
			`reverse forward "9000 evil 9000" is not the pod's forward 9000 to minio.user:9000`},
	} {
		got := ""
		if err := checkEnvValue(c.env, o); err != nil {
			got = err.Error()
		}
		if (got == "") != (c.want == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: error %q, want %q", name, got, c.want)
		}
	}
}
