package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/validate"
)

// The kustomize components that harden an install, as a site's kustomization names them.
const (
	noReplicationComponent         = "manifests/components/no-credential-replication"
	copiesInPodNamespacesComponent = "manifests/components/credentials-in-pod-namespaces"
)

// kustomizeWith renders manifests/base with components, as a site's own kustomization would.
func kustomizeWith(t *testing.T, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, cluster.root) // kustomize takes no absolute path
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range components {
		paths = append(paths, filepath.Join(rel, c))
	}
	k := "resources: [" + filepath.Join(rel, "manifests/base") + "]\ncomponents: [" + strings.Join(paths, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return mustKubectl(t, "", "kustomize", dir)
}

// serveArgs are the arguments of the rendered shadowgate container.
func serveArgs(t *testing.T, r rendered) []string {
	t.Helper()
	var d appsv1.Deployment
	r.typed(t, "Deployment/shadowgate", &d)
	return d.Spec.Template.Spec.Containers[0].Args
}

// Without credential replication, neither install grants a Secret verb anywhere nor update on
// ConfigMaps (used only for credential ConfigMap copies), both run serve with
// --credential-replication=false, and they grant the same rules; with it (the default), the
// Secret and ConfigMap update rules are there, in the replication roles only: list and watch
// on Secrets in a Role of shadowgate's namespace, never cluster-wide.
func TestWithoutCredentialReplicationNoSecretIsGranted(t *testing.T) {
	replicationRules := func(r rendered) []string {
		var found []string
		for key, o := range r {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			var role rbacv1.ClusterRole
			r.typed(t, key, &role)
			for _, rule := range role.Rules {
				switch {
				case slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*"):
					found = append(found, key+": secrets "+strings.Join(rule.Verbs, ","))
				case slices.Contains(rule.Resources, "configmaps") && (slices.Contains(rule.Verbs, "update") || slices.Contains(rule.Verbs, "*")):
					found = append(found, key+": configmaps "+strings.Join(rule.Verbs, ","))
				}
			}
		}
		slices.Sort(found)
		return found
	}
	chart := parseRendered(t, helmTemplate(t, "--set", "credentialReplication=false"))
	kustomize := parseRendered(t, kustomizeWith(t, noReplicationComponent))
	for name, r := range map[string]rendered{"the chart with credentialReplication=false": chart, "kustomize with " + noReplicationComponent: kustomize} {
		if found := replicationRules(r); len(found) > 0 {
			t.Errorf("%s grants Secret verbs or ConfigMap update: %q", name, found)
		}
		if !slices.Contains(serveArgs(t, r), "--credential-replication=false") {
			t.Errorf("%s runs serve without --credential-replication=false: %q", name, serveArgs(t, r))
		}
	}
	for key, o := range kustomize {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
			var w, g rbacv1.ClusterRole
			kustomize.typed(t, key, &w)
			chart.typed(t, key, &g)
			compare(t, key+" rules", w.Rules, g.Rules)
		}
	}
	// Secrets are listed and watched in shadowgate's own namespace only, for the follower.
	want := []string{"ClusterRole/shadowgate-credential-replication: configmaps update", "ClusterRole/shadowgate-credential-replication: secrets get,create,update,delete",
		"Role/shadowgate-credential-sources: secrets list,watch"}
	for name, r := range map[string]rendered{"the chart's default": parseRendered(t, helmTemplate(t)), "the kustomize base": parseRendered(t, mustKubectl(t, "", "kustomize", filepath.Join(cluster.root, "manifests/base")))} {
		if found := replicationRules(r); !slices.Equal(found, want) {
			t.Errorf("%s grants these Secret and ConfigMap update rules, want only the replication role's %q: %q", name, want, found)
		}
	}
}

// Copies into pod namespaces are off unless asked for: the chart's default and the kustomize
// base run serve without the flag (its default is false), and the unsafe setting is one value
// or one component away, rendering --credentials-in-pod-namespaces=true. The least-privilege
// policy's copiesInPodNamespaces follows it, so shadowgate's account may write copies into pod
// namespaces only where serve makes them.
func TestCredentialsInPodNamespacesAreOptIn(t *testing.T) {
	const arg = "--credentials-in-pod-namespaces=true"
	for name, c := range map[string]struct {
		r    rendered
		want bool
	}{
		"the chart with credentialsInPodNamespaces=true":   {parseRendered(t, helmTemplate(t, "--set", "credentialsInPodNamespaces=true")), true},
		"kustomize with " + copiesInPodNamespacesComponent: {parseRendered(t, kustomizeWith(t, copiesInPodNamespacesComponent)), true},
		"the chart's default":                              {parseRendered(t, helmTemplate(t)), false},
		"the kustomize base":                               {parseRendered(t, mustKubectl(t, "", "kustomize", filepath.Join(cluster.root, "manifests/base"))), false},
	} {
		args := serveArgs(t, c.r)
		if got := slices.Contains(args, arg); got != c.want {
			t.Errorf("%s: %s among serve's arguments: %v, want %v: %q", name, arg, got, c.want, args)
		}
		if slices.Contains(args, "--credentials-in-pod-namespaces=false") {
			t.Errorf("%s passes the default explicitly: %q", name, args)
		}
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		c.r.typed(t, "ValidatingAdmissionPolicy/shadowgate-least-privilege", &vap)
		i := slices.IndexFunc(vap.Spec.Variables, func(v admissionregistrationv1.Variable) bool { return v.Name == "copiesInPodNamespaces" })
		if i < 0 || vap.Spec.Variables[i].Expression != strconv.FormatBool(c.want) {
			t.Errorf("%s: the least-privilege policy's copiesInPodNamespaces is not %v: %+v", name, c.want, vap.Spec.Variables)
		}
	}
}

// shadowgate serve run as a ServiceAccount bound to everything but the replication role: it
// refuses to start on a policy that asks for replication, naming the field and the flag, and
// with one that does not, it admits an offloaded pod with its shadow, copying nothing.
func TestServeWithoutSecretRightsAdmitsWithoutReplication(t *testing.T) {
	const sa, ns = "shadowgate-no-secrets", "shadowgate-system"
	subject := "- {kind: ServiceAccount, name: " + sa + ", namespace: " + ns + "}\n"
	t.Cleanup(func() {
		kubectl(t, "", "delete", "--ignore-not-found", "serviceaccount/"+sa, "rolebinding/"+sa, "configmap/no-replication-policy", "-n", ns)
		kubectl(t, "", "delete", "--ignore-not-found", "clusterrolebinding/"+sa)
	})
	mustKubectl(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: "+sa+", namespace: "+ns+"}\n"+
		"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: "+sa+"}\n"+
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: shadowgate}\nsubjects:\n"+subject+
		"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: "+sa+", namespace: "+ns+"}\n"+
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: shadowgate-leader-election}\nsubjects:\n"+subject,
		"apply", "-f", "-")
	for _, verb := range []string{"get", "create", "update"} {
		if r := kubectl(t, "", "auth", "can-i", verb, "secrets", "--all-namespaces", "--as=system:serviceaccount:"+ns+":"+sa); strings.TrimSpace(r.Stdout) != "no" {
			t.Fatalf("the ServiceAccount may %s Secrets: %s", verb, r.Output())
		}
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.cp.ServiceAccountKubeconfig(ctx, cluster.kubectl, ns, sa, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The example policy replicates by default.
	cmd := exec.CommandContext(ctx, cluster.bin, "serve", "--kubeconfig", kubeconfig, "--namespace", ns, "--credential-replication=false",
		"--cert-dir", t.TempDir(), "--port", "0", "--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0", "--log-format", "console")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	want := "error: policy ConfigMap shadowgate-system/shadowgate-policy is invalid, or asks for what this shadowgate may not do (shadowgate policy check finds the same offline, given serve's credential flags):\n" +
		"* data[policy.yaml].virtualNodes[cern-vk].Network.SSH.ReplicateCredentials: Invalid value: true: shadowgate runs with --credential-replication=false,"
	if ctx.Err() != nil {
		t.Fatalf("serve on a replicating policy did not exit in time (%v): %v:\n%s", ctx.Err(), err, out)
	}
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) {
		t.Errorf("serve on a replicating policy: want exit code 1 and %q, got %v:\n%s", want, err, out)
	}

	doc := strings.ReplaceAll(examplePolicyDocument(t), "      SSH:\n", "      SSH:\n        ReplicateCredentials: false\n")
	mustKubectl(t, "", "create", "configmap", "no-replication-policy", "-n", ns, "--from-literal=policy.yaml="+doc)
	s, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: dir, GracePeriod: gracePeriod, Kubeconfig: kubeconfig,
		Args: []string{"--credential-replication=false", "--policy-configmap=no-replication-policy"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Errorf("serve without Secret rights did not stop cleanly: %v", err)
		}
	}()
	createNamespaces(t, "no-replication")
	// Only shadowgate's own ServiceAccount may mark a namespace it creates; this serve runs as
	// another, so the admin hands the shadow namespace over first, and lets it mark its shadow
	// objects as docs/install.md says for another account.
	handOverShadowNamespaces(t, "no-replication")
	exemptFromObjectMarks(t, "system:serviceaccount:"+ns+":"+sa)
	p := offloaded{name: "trainer", namespace: "no-replication", node: "hpc-vk", ports: []int32{8888}}
	r, err := s.Review("/validate-pods", 10*time.Second, "application/json", harness.PodCreateReview("nr1", p.namespace, p.name, []byte(p.json())))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed {
		t.Fatalf("the pod was refused: %+v", r.Result)
	}
	mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace())
	if ok, out := exists(t, "secret", "hpc-ssh-key", "-n", p.shadowNamespace()); ok {
		t.Errorf("a Secret was copied without replication: %s", out)
	}
	if log := readLog(t, s.Log); strings.Contains(log, copiesWarning) {
		t.Errorf("serve without replication warns of copies into pod namespaces: %s", s.Log)
	}
}

// copiesWarning starts the warning serve logs at start while it copies the site's Secret into
// the namespaces of shadow-same-ns pods.
const copiesWarning = "WARNING: pods with interlink.eu/shadow-same-ns have the site's key or keytab copied into their own namespace"

// The suite's serve runs with the defaults, replication on and no copies into pod namespaces,
// and warns of none; serve given the unsafe --credentials-in-pod-namespaces=true says at start
// what that exposes, naming the flag.
func TestServeWarnsOfCopiesIntoPodNamespacesOnlyWhenAskedFor(t *testing.T) {
	if log := readLog(t, cluster.sg.Log); strings.Contains(log, copiesWarning) {
		t.Errorf("serve with the defaults warns of copies into pod namespaces: %s", cluster.sg.Log)
	}
	s, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: t.TempDir(), GracePeriod: gracePeriod,
		Args: []string{"--credentials-in-pod-namespaces=true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Errorf("serve did not stop cleanly: %v", err)
		}
	}()
	if log := readLog(t, s.Log); !strings.Contains(log, copiesWarning) || !strings.Contains(log, "--credentials-in-pod-namespaces=true") {
		t.Errorf("serve with --credentials-in-pod-namespaces=true does not warn of copies into pod namespaces, naming the flag: %s", s.Log)
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A tenant with edit's rights on pods and Secrets in its namespace asks for its shadow
// beside its pod on a node that replicates the site's key: with serve's defaults kubectl apply
// is refused, naming the annotation and where the shadow lives instead, and no copy of the key
// reaches the namespace; without the annotation the same pod is admitted, its shadow and the
// copy in <ns>-shadow, where the tenant may read nothing.
func TestATenantCannotHaveTheSiteKeyCopiedIntoItsNamespace(t *testing.T) {
	const ns, tenant = "tenant-same-ns", "tenant-same-ns-author"
	createNamespaces(t, ns)
	// edit's rules on pods and Secrets, granted directly: no controller manager aggregates edit here.
	mustKubectl(t, "", "create", "role", "author", "-n", ns, "--verb=get,list,watch,create,update,patch,delete", "--resource=pods,secrets")
	mustKubectl(t, "", "create", "rolebinding", "author", "-n", ns, "--role=author", "--user="+tenant)
	as := "--as=" + tenant
	p := offloaded{name: "notebook", namespace: ns, node: "hpc-vk", ports: []int32{8888},
		annotations: map[string]string{validate.AnnotationShadowSameNS: "true"}}
	r := kubectl(t, p.json(), as, "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("the same-ns pod was admitted:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "metadata.annotations[interlink.eu/shadow-same-ns]: Forbidden",
		"Secret hpc-ssh-key of virtual node hpc-vk", "the shadow lives in "+ns+"-shadow")
	if ok, out := exists(t, "secret", "hpc-ssh-key", "-n", ns); ok {
		t.Errorf("the refused pod had the site's key copied into its namespace: %s", out)
	}

	delete(p.annotations, validate.AnnotationShadowSameNS)
	mustKubectl(t, p.json(), as, "apply", "-f", "-")
	mustKubectl(t, "", "get", "secret", "hpc-ssh-key", "-n", p.shadowNamespace())
	if out := kubectl(t, "", "auth", "can-i", "get", "secrets", "-n", p.shadowNamespace(), as); strings.TrimSpace(out.Stdout) != "no" {
		t.Errorf("the tenant may read Secrets in %s: %s", p.shadowNamespace(), out.Output())
	}
}

// exemptFromObjectMarks lets user mark shadow objects until the test ends, as docs/install.md
// has an admin patch the shadowgate-shadow-object-marks policy for an account of another name.
func exemptFromObjectMarks(t *testing.T, user string) {
	t.Helper()
	const policy, path = "validatingadmissionpolicy/shadowgate-shadow-object-marks", "/spec/matchConditions/0/expression"
	was := mustKubectl(t, "", "get", policy, "-o", "jsonpath={.spec.matchConditions[0].expression}")
	patch := func(expression string) string {
		b, err := json.Marshal([]map[string]string{{"op": "replace", "path": path, "value": expression}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mustKubectl(t, "", "patch", policy, "--type=json", "-p", patch(was+" && request.userInfo.username != '"+user+"'"))
	t.Cleanup(func() { mustKubectl(t, "", "patch", policy, "--type=json", "-p", patch(was)) })
	// The API server takes a changed policy up a moment later: a marked ConfigMap, not stored.
	probe := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: marks-probe, namespace: default, labels: {app.kubernetes.io/managed-by: shadowgate}}\n"
	eventually(t, time.Minute, "the exemption of "+user+" in force", func() (bool, string) {
		r := kubectl(t, probe, "create", "--dry-run=server", "--as="+user, "-f", "-")
		return r.Err == nil, r.Output()
	})
}
