package validate_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// testPolicy has a node for every case the rules distinguish. hpc-vk allows the destinations
// its cases forward to, so they judge the other rules of forwards; dest-vk, own-vk (the
// defaults) and none-vk are TestReverseDestinations'.
const testPolicy = `virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
        Reverse:
          Enabled: true
          AllowedDestinations: {Namespaces: [default, b, d, f], CIDRs: [10.96.0.0/12, "fd00::/8"]}
  dest-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
        Reverse:
          Enabled: true
          AllowedDestinations: {Namespaces: [shared], NameSuffixes: [example.org], CIDRs: [10.20.0.0/16, "fd00:20::/64"]}
  own-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: login.hpc.example.org, User: alice, KeySecret: hpc-ssh-key, Reverse: {Enabled: true}}
  none-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
        Reverse: {Enabled: true, AllowedDestinations: {PodNamespace: false, Namespaces: [shared]}}
  socks-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: login.hpc.example.org, User: alice, KeySecret: hpc-ssh-key, Reverse: {Enabled: true, AllowSocks: true}}
  noreverse-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: login.hpc.example.org, User: alice, KeySecret: hpc-ssh-key}
  wstunnel-vk:
    Network:
      EnableTunnel: true
`

func mustPolicy(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, errs := validate.ParsePolicy([]byte(doc), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatalf("test policy refused: %v", errs)
	}
	return p
}

func podOn(node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "user", Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "train", Image: "python", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
		},
	}
}

func ann(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func annPath(key string) string { return field.NewPath("metadata", "annotations").Key(key).String() }

var (
	fwd   = validate.AnnotationReverseForwards
	socks = validate.AnnotationReverseSocksPort
	bind  = validate.AnnotationReverseBind
	vpn   = validate.AnnotationPodVPN
)

func TestPodAnnotations(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	cases := map[string]struct {
		node         string
		annotations  map[string]string
		want         []vt.Err
		wantWarnings []string // substrings, one per expected warning
	}{
		"the guide's trainer forwards are admitted": {node: "hpc-vk",
			annotations: ann(fwd, "minio.user.svc.cluster.local:9000 6443:kubernetes.default.svc.cluster.local:443")},
		"a bare Service name is admitted":         {node: "hpc-vk", annotations: ann(fwd, "minio:9000")},
		"an IPv6 literal in brackets is admitted": {node: "hpc-vk", annotations: ann(fwd, "8080:[fd00::1]:80")},
		"a forward whose port is not a number is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:http"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "minio:http"}}},
		"a forward with a port out of range is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:99999"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "minio:99999"}}},
		"a forward with port 0 is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:0"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "minio:0"}}},
		"a forward whose host carries a shell character is refused": {node: "hpc-vk", annotations: ann(fwd, "$(id):9000"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "$(id):9000"}}},
		"a forward to the metadata service's link-local address is refused": {node: "hpc-vk", annotations: ann(fwd, "8080:169.254.169.254:80"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "8080:169.254.169.254:80"}}},
		"a forward to a link-local IPv6 address is refused": {node: "hpc-vk", annotations: ann(fwd, "8080:[fe80::1]:80"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "8080:[fe80::1]:80"}}},
		"a forward to a Service IP is admitted": {node: "hpc-vk", annotations: ann(fwd, "6443:10.96.0.1:443")},
		"a forward with too many colons is refused": {node: "hpc-vk", annotations: ann(fwd, "1:2:minio:9000"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "1:2:minio:9000"}}},
		"a Service port below 1024 without a listen port is refused": {node: "hpc-vk", annotations: ann(fwd, "kubernetes.default.svc:443"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "kubernetes.default.svc:443"}}},
		"a listen port below 1024 is refused": {node: "hpc-vk", annotations: ann(fwd, "80:web.user.svc:8080"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "80:web.user.svc:8080"}}},
		"a duplicate listen port is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:9000 9000:other.ns.svc:80"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "9000:other.ns.svc:80"}}},
		"an empty forwards annotation is refused": {node: "hpc-vk", annotations: ann(fwd, " "),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: " "}}},
		"every bad entry is reported": {node: "hpc-vk", annotations: ann(fwd, "a:1 b:x"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "a:1"}, {Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "b:x"}}},
		"a loopback bind address is admitted": {node: "hpc-vk", annotations: ann(fwd, "minio:9000", bind, "127.0.10.1")},
		"bind 127.0.0.1 is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:9000", bind, "127.0.0.1"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(bind), Value: "127.0.0.1"}}},
		"bind ::ffff:127.0.0.1 is refused after parsing": {node: "hpc-vk", annotations: ann(fwd, "minio:9000", bind, "::ffff:127.0.0.1"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(bind), Value: "::ffff:127.0.0.1"}}},
		"a non-loopback bind is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:9000", bind, "10.0.0.5"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(bind), Value: "10.0.0.5"}}},
		"a bind that is not an address is refused": {node: "hpc-vk", annotations: ann(fwd, "minio:9000", bind, "localhost"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(bind), Value: "localhost"}}},
		"a bind without forwards is admitted with a warning": {node: "hpc-vk", annotations: ann(bind, "127.0.10.1"),
			wantWarnings: []string{"is ignored"}},
		"pod-vpn alone is admitted": {node: "hpc-vk", annotations: ann(vpn, "true")},
		"pod-vpn with reverse forwards is refused": {node: "hpc-vk", annotations: ann(vpn, "true", fwd, "minio:9000"),
			want: []vt.Err{{Type: field.ErrorTypeForbidden, Field: annPath(fwd), Value: ""}}},
		"SOCKS where the policy does not allow it is refused": {node: "hpc-vk", annotations: ann(socks, "1080"),
			want: []vt.Err{{Type: field.ErrorTypeForbidden, Field: annPath(socks), Value: ""}}},
		"SOCKS where the policy allows it is admitted with a warning": {node: "socks-vk", annotations: ann(socks, "1080"),
			wantWarnings: []string{"every user of that node"}},
		"a SOCKS port that is not a number is refused": {node: "socks-vk", annotations: ann(socks, "socks"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(socks), Value: "socks"}}},
		"a SOCKS port on a forward's listen port is refused": {node: "socks-vk", annotations: ann(socks, "9000", fwd, "minio:9000"),
			want:         []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(socks), Value: "9000"}},
			wantWarnings: []string{"every user of that node"}},
		"reverse forwards where the node's policy has Reverse disabled are refused": {node: "noreverse-vk", annotations: ann(fwd, "minio:9000"),
			want: []vt.Err{{Type: field.ErrorTypeForbidden, Field: annPath(fwd), Value: ""}}},
		"reverse forwards on a wstunnel node are refused": {node: "wstunnel-vk", annotations: ann(fwd, "minio:9000"),
			want: []vt.Err{{Type: field.ErrorTypeForbidden, Field: annPath(fwd), Value: ""}}},
		"removed annotations are admitted with a warning": {node: "hpc-vk",
			annotations:  ann(validate.AnnotationReverseOwnerOnly, "false", validate.AnnotationReverseNodeExec, "srun"),
			wantWarnings: []string{"reverse-node-exec] is ignored", "reverse-owner-only] is ignored"}},
		"a misspelt reverse annotation is refused": {node: "hpc-vk", annotations: ann("interlink.eu/reverse-forward", "minio:9000"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: annPath("interlink.eu/reverse-forward"), Value: "interlink.eu/reverse-forward"}}},
		"shadow-same-ns true is admitted": {node: "hpc-vk", annotations: ann(validate.AnnotationShadowSameNS, "true")},
		"shadow-same-ns yes is refused": {node: "hpc-vk", annotations: ann(validate.AnnotationShadowSameNS, "yes"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: annPath(validate.AnnotationShadowSameNS), Value: "yes"}}},
		"extra ports are admitted": {node: "hpc-vk", annotations: ann(validate.AnnotationExtraPorts, "8080:http:TCP,9090")},
		"a UDP extra port is admitted with a warning": {node: "hpc-vk", annotations: ann(validate.AnnotationExtraPorts, "5353:mdns:UDP"),
			wantWarnings: []string{"5353/UDP is skipped"}},
		"an extra port that is not a number is refused": {node: "hpc-vk", annotations: ann(validate.AnnotationExtraPorts, "web"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(validate.AnnotationExtraPorts), Value: "web"}}},
		"an extra port with an unknown protocol is refused": {node: "hpc-vk", annotations: ann(validate.AnnotationExtraPorts, "8080:web:QUIC"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: annPath(validate.AnnotationExtraPorts), Value: "QUIC"}}},
		"a case variant of a reverse annotation is refused, not ignored": {node: "hpc-vk", annotations: ann("interlink.eu/Reverse-Forwards", "minio:9000"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: annPath("interlink.eu/Reverse-Forwards"), Value: "interlink.eu/Reverse-Forwards"}}},
		"64 forwards are admitted": {node: "hpc-vk", annotations: ann(fwd, forwardsList(64, ""))},
		"65 forwards are refused before they are parsed": {node: "hpc-vk", annotations: ann(fwd, forwardsList(65, "")),
			want: []vt.Err{{Type: field.ErrorTypeTooMany, Field: annPath(fwd), Value: 65}}},
		"a forwards annotation over its byte limit is refused unechoed": {node: "hpc-vk", annotations: ann(fwd, strings.Repeat("minio:9000 ", 2000)),
			want: []vt.Err{{Type: field.ErrorTypeTooLong, Field: annPath(fwd), Value: "<value omitted>"}}},
		"duplicate listen ports get distinct suggestions": {node: "hpc-vk", annotations: ann(fwd, "10000:a.b:1 10000:c.d:2 10000:e.f:3"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "10000:c.d:2"}, {Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: "10000:e.f:3"}}},
		"the errors of one annotation stop after 16": {node: "hpc-vk", annotations: ann(fwd, forwardsList(40, "x")),
			want: append(forwardErrors(16, "x"), vt.Err{Type: field.ErrorTypeForbidden, Field: annPath(fwd), Value: ""})},
		"annotations over the API server's 256 KiB are refused before any is parsed": {node: "hpc-vk",
			annotations: ann(fwd, "$(id):1", validate.AnnotationPreExec, strings.Repeat("x", 256<<10)),
			want:        []vt.Err{{Type: field.ErrorTypeTooLong, Field: "metadata.annotations", Value: "<value omitted>"}}},
		"an offloaded pod with 1,001 annotations is refused": {node: "hpc-vk", annotations: manyAnnotations(1001),
			want: []vt.Err{{Type: field.ErrorTypeTooMany, Field: "metadata.annotations", Value: 1001}}},
		"a pod on no listed node may carry 1,001 annotations": {node: "worker-1", annotations: manyAnnotations(1001)},
		"65 extra ports are refused": {node: "hpc-vk", annotations: ann(validate.AnnotationExtraPorts, strings.TrimSuffix(strings.Repeat("8080,", 65), ",")),
			want: []vt.Err{{Type: field.ErrorTypeTooMany, Field: annPath(validate.AnnotationExtraPorts), Value: 65}}},
		"reverse annotations on a pod for no listed node are admitted with a warning": {node: "worker-1", annotations: ann(fwd, "garbage"),
			wantWarnings: []string{"not placed on a virtual node"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, d := validate.Pod(podOn(tc.node, tc.annotations), validate.Config{Policy: pol})
			vt.Expect(t, d.Errors, tc.want)
			expectWarnings(t, d.Warnings, tc.wantWarnings)
		})
	}
}

// forwardsList is n forwards with distinct listen ports from 20000, each port suffixed with
// suffix (a suffix makes every entry an error).
func forwardsList(n int, suffix string) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf("%d:minio:9000%s", 20000+i, suffix)
	}
	return strings.Join(entries, " ")
}

// manyAnnotations is n annotations of no meaning to shadowgate.
func manyAnnotations(n int) map[string]string {
	ann := map[string]string{}
	for i := range n {
		ann[fmt.Sprintf("example.org/key-%d", i)] = "v"
	}
	return ann
}

// forwardErrors are the errors of forwardsList's first n entries.
func forwardErrors(n int, suffix string) []vt.Err {
	errs := make([]vt.Err, n)
	for i := range errs {
		errs[i] = vt.Err{Type: field.ErrorTypeInvalid, Field: annPath(fwd), Value: fmt.Sprintf("%d:minio:9000%s", 20000+i, suffix)}
	}
	return errs
}

func expectWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("warnings = %q, want %d matching %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d = %q, want it to say %q", i, got[i], w)
		}
	}
}

func TestUDPContainerPortWarns(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	pod := podOn("hpc-vk", nil)
	pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP})
	_, d := validate.Pod(pod, validate.Config{Policy: pol})
	expectWarnings(t, d.Warnings, []string{`spec.containers[0].ports[1]: container "train" port 53/UDP is skipped`})
	if !d.Allowed() {
		t.Fatal(d.Errors)
	}
}

func TestOffloadParsesWhatInjectNeeds(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	o, d := validate.Pod(podOn("hpc-vk", ann(fwd, "minio:9000 6443:kubernetes.default.svc.cluster.local:443", bind, "127.0.10.1")), validate.Config{Policy: pol})
	if !d.Allowed() {
		t.Fatal(d.Errors)
	}
	want := []validate.Forward{
		{ListenPort: 9000, Host: "minio", Port: 9000, DialHost: "minio.user", Entry: "minio:9000"},
		{ListenPort: 6443, Host: "kubernetes.default.svc.cluster.local", Port: 443, DialHost: "kubernetes.default.svc.cluster.local", Entry: "6443:kubernetes.default.svc.cluster.local:443"},
	}
	if len(o.Forwards) != 2 || o.Forwards[0] != want[0] || o.Forwards[1] != want[1] {
		t.Errorf("forwards = %+v, want %+v", o.Forwards, want)
	}
	if o.Bind.String() != "127.0.10.1" || o.NodeName != "hpc-vk" || !o.WantsReverse() {
		t.Errorf("offload = %+v", o)
	}
}

func TestContainerPortsOfAnOffloadedPod(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	portPath := "spec.containers[0].ports[0].containerPort"
	cases := map[string]struct {
		node string
		port int32
		want []vt.Err
	}{
		"port 8888 is admitted":                 {node: "hpc-vk", port: 8888},
		"port 0 is refused":                     {node: "hpc-vk", port: 0, want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: portPath, Value: int32(0)}}},
		"port 70000 is refused":                 {node: "hpc-vk", port: 70000, want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: portPath, Value: int32(70000)}}},
		"a pod on no listed node is not judged": {node: "worker-1", port: 70000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := podOn(tc.node, nil)
			pod.Spec.Containers[0].Ports[0].ContainerPort = tc.port
			_, d := validate.Pod(pod, validate.Config{Policy: pol})
			vt.Expect(t, d.Errors, tc.want)
		})
	}
}

func TestRunAsUserOfAnOffloadedPod(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	runAsUser := "spec.securityContext.runAsUser"
	cases := map[string]struct {
		node        string
		annotations map[string]string
		uid         *int64
		want        []vt.Err
	}{
		"A pod without runAsUser on an SSH-shadow node is admitted.": {node: "hpc-vk"},
		"A pod with runAsUser on an SSH-shadow node is refused: its job would run as the account it chose.": {node: "hpc-vk", uid: ptr.To[int64](0),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: runAsUser, Value: int64(0)}}},
		"A pod-vpn pod with runAsUser has no shadow, and is admitted.": {node: "hpc-vk", annotations: ann(vpn, "true"), uid: ptr.To[int64](1000)},
		"A pod with runAsUser on no listed node is not judged.":        {node: "worker-1", uid: ptr.To[int64](0)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := podOn(tc.node, tc.annotations)
			if tc.uid != nil {
				pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tc.uid}
			}
			_, d := validate.Pod(pod, validate.Config{Policy: pol})
			vt.Expect(t, d.Errors, tc.want)
			if len(tc.want) > 0 && !strings.Contains(d.Errors.ToAggregate().Error(), "sbatch --uid=0") {
				t.Errorf("the refusal does not say why: %v", d.Errors)
			}
		})
	}
}
