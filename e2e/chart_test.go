package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// chartDir is the Helm chart, relative to the repository root.
const chartDir = "manifests/chart/shadowgate"

// certManager renders the chart in its cert-manager mode.
var certManager = []string{"--set", "certManager.enabled=true"}

var helmBuild struct {
	once sync.Once
	path string
	err  error
}

// runHelm runs the helm that hack/build-helm.sh builds (once per run), and returns its stdout
// and, when it fails, an error carrying what it printed.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	helmBuild.once.Do(func() { helmBuild.path, helmBuild.err = harness.BuildHelm(cluster.root, os.Stderr) })
	if helmBuild.err != nil {
		t.Fatal(helmBuild.err)
	}
	cmd := exec.Command(helmBuild.path, args...)
	cmd.Dir = cluster.root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), err
}

// helm runs helm and fails the test when it fails.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmTemplate renders the chart as `helm install shadowgate -n shadowgate-system` would.
func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	return helm(t, append([]string{"template", "shadowgate", chartDir, "--namespace", "shadowgate-system"}, args...)...)
}

func TestChartLints(t *testing.T) {
	for _, args := range [][]string{nil, certManager} {
		out := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
		expectContains(t, out, "1 chart(s) linted, 0 chart(s) failed")
	}
}

// values.schema.json refuses a misspelt key or a value serve or the API server would refuse,
// at `helm install` rather than in a crash-looping pod or a failed webhook registration.
func TestChartRefusesBadValues(t *testing.T) {
	for set, want := range map[string]string{
		"replicaCount=3":                          "additional properties 'replicaCount' not allowed",
		"webhooks.failurePolicy=fail":             "/webhooks/failurePolicy",
		"logFormat=text":                          "/logFormat",
		"shadowGracePeriod=2 minutes":             "/shadowGracePeriod",
		"webhooks.timeoutSeconds.validatePods=60": "/webhooks/timeoutSeconds/validatePods",
		"webhooks.virtualNodes={Bad_Name}":        "/webhooks/virtualNodes/0",
		"leastPrivilege.imagePrefixes={}":         "/leastPrivilege/imagePrefixes",
		"image.digest=latest":                     "/image/digest",
	} {
		_, err := runHelm(t, "template", "shadowgate", chartDir, "--set", set)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: got %v, want an error naming %s", set, err, want)
		}
	}
}

// The PodDisruptionBudget never blocks a node drain: it keeps minAvailable replicas through
// one, so it is rendered only with more than one replica (with `replicas: 1`, which the schema
// allows, minAvailable 1 would let no drain evict the only one, ever), and a numeric
// minAvailable that is not below replicas is refused.
func TestChartPodDisruptionBudgetNeverBlocksADrain(t *testing.T) {
	for _, c := range []struct {
		set      []string
		replicas int32
	}{{nil, 2}, {[]string{"--set", "replicas=3", "--set", "pdb.minAvailable=2"}, 3}} {
		r := parseRendered(t, helmTemplate(t, c.set...))
		var d appsv1.Deployment
		r.typed(t, "Deployment/shadowgate", &d)
		var pdb policyv1.PodDisruptionBudget
		r.typed(t, "PodDisruptionBudget/shadowgate", &pdb)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != c.replicas || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() >= int(c.replicas) {
			t.Errorf("%v: %v replicas, PodDisruptionBudget minAvailable %v: want %d replicas and fewer kept", c.set, d.Spec.Replicas, pdb.Spec.MinAvailable, c.replicas)
		}
	}
	r := parseRendered(t, helmTemplate(t, "--set", "replicas=1"))
	if _, ok := r["Deployment/shadowgate"]; !ok {
		t.Fatal("replicas=1: no Deployment rendered")
	}
	if _, ok := r["PodDisruptionBudget/shadowgate"]; ok {
		t.Error("replicas=1: a PodDisruptionBudget is rendered, which would let no node drain evict the only replica")
	}
	for _, set := range [][]string{{"--set", "pdb.minAvailable=2"}, {"--set", "replicas=3", "--set", "pdb.minAvailable=4"}} {
		_, err := runHelm(t, append([]string{"template", "shadowgate", chartDir}, set...)...)
		if err == nil || !strings.Contains(err.Error(), "pdb.minAvailable") || !strings.Contains(err.Error(), "must be below replicas") {
			t.Errorf("%v: got %v, want a refusal naming pdb.minAvailable", set, err)
		}
	}
}

// rendered indexes objects by kind/name.
type rendered map[string]*unstructured.Unstructured

func parseRendered(t *testing.T, docs string) rendered {
	t.Helper()
	objs := rendered{}
	for _, doc := range strings.Split(docs, "\n---") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if len(o.Object) > 0 {
			objs[o.GetKind()+"/"+o.GetName()] = o
		}
	}
	return objs
}

// typed converts the object named key into out, failing when it is missing.
func (r rendered) typed(t *testing.T, key string, out any) {
	t.Helper()
	o, ok := r[key]
	if !ok {
		t.Fatalf("no %s among the rendered objects", key)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// The chart grants exactly the kustomize install's RBAC and registers exactly its webhooks:
// same names, rules, selectors, matchConditions, failure policies, timeouts and Service
// references; only a self-signed caBundle is the chart's own. Its Deployment mounts the same
// volumes and passes every argument kustomize's does. Its ValidatingAdmissionPolicies (the
// least-privilege one with the default leastPrivilege.imagePrefixes) and their bindings are
// kustomize's. In cert-manager mode it also renders the cert-manager overlay's Issuers and
// Certificates and annotates the webhooks as it does.
func TestChartMatchesKustomize(t *testing.T) {
	for _, c := range []struct {
		kustomization string
		values        []string
	}{{"manifests/base", nil}, {"manifests/overlays/cert-manager", certManager}} {
		t.Run(filepath.Base(c.kustomization), func(t *testing.T) {
			want := parseRendered(t, mustKubectl(t, "", "kustomize", filepath.Join(cluster.root, c.kustomization)))
			got := parseRendered(t, helmTemplate(t, c.values...))
			for key, o := range want {
				switch g, ok := got[key]; {
				case !ok && o.GetKind() != "Namespace": // the namespace is made before `helm install`
					t.Errorf("the chart renders no %s", key)
				case ok && strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/"):
					compare(t, key, o.Object["spec"], g.Object["spec"])
				}
			}
			for key, o := range want {
				switch o.GetKind() {
				case "ClusterRole", "Role": // a Role's rules have a ClusterRole's shape
					var w, g rbacv1.ClusterRole
					want.typed(t, key, &w)
					got.typed(t, key, &g)
					compare(t, key+" rules", w.Rules, g.Rules)
				case "ClusterRoleBinding", "RoleBinding":
					var w, g rbacv1.ClusterRoleBinding
					want.typed(t, key, &w)
					got.typed(t, key, &g)
					compare(t, key, []any{w.RoleRef, w.Subjects}, []any{g.RoleRef, g.Subjects})
				case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
					if g, ok := got[key]; ok {
						compare(t, key, collapseSpaces(o.Object["spec"]), collapseSpaces(g.Object["spec"]))
					}
				case "Deployment":
					var w, g appsv1.Deployment
					want.typed(t, key, &w)
					got.typed(t, key, &g)
					compare(t, key+" volumes", w.Spec.Template.Spec.Volumes, g.Spec.Template.Spec.Volumes)
					for _, arg := range w.Spec.Template.Spec.Containers[0].Args {
						if !slices.Contains(g.Spec.Template.Spec.Containers[0].Args, arg) {
							t.Errorf("%s: the chart's container lacks the argument %s", key, arg)
						}
					}
				}
			}
			var wm, gm admissionv1.MutatingWebhookConfiguration
			want.typed(t, "MutatingWebhookConfiguration/shadowgate", &wm)
			got.typed(t, "MutatingWebhookConfiguration/shadowgate", &gm)
			for i := range gm.Webhooks {
				gm.Webhooks[i].ClientConfig.CABundle = nil // the chart's self-signed CA
			}
			compare(t, "mutating webhooks", []any{wm.Annotations, wm.Webhooks}, []any{gm.Annotations, gm.Webhooks})
			var wv, gv admissionv1.ValidatingWebhookConfiguration
			want.typed(t, "ValidatingWebhookConfiguration/shadowgate", &wv)
			got.typed(t, "ValidatingWebhookConfiguration/shadowgate", &gv)
			for i := range gv.Webhooks {
				gv.Webhooks[i].ClientConfig.CABundle = nil // the chart's self-signed CA
			}
			compare(t, "validating webhooks", []any{wv.Annotations, wv.Webhooks}, []any{gv.Annotations, gv.Webhooks})
		})
	}
}

// collapseSpaces is v with every run of white space in its strings made one space: CEL reads
// an expression kustomize re-folds with an extra line break as the chart's.
func collapseSpaces(v any) any {
	switch v := v.(type) {
	case string:
		return strings.Join(strings.Fields(v), " ")
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = collapseSpaces(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = collapseSpaces(e)
		}
		return out
	}
	return v
}

func compare(t *testing.T, what string, kustomize, chart any) {
	t.Helper()
	if d := cmp.Diff(kustomize, chart); d != "" {
		t.Errorf("%s: the chart differs from kustomize (-kustomize +chart):\n%s", what, d)
	}
}

// The policy value is the policy document: given as a string (--set-file) it is stored
// verbatim, given as a mapping it is stored as YAML, and either way the ConfigMap the chart
// renders is one `shadowgate policy check` accepts.
func TestChartStoresThePolicyDocument(t *testing.T) {
	doc := examplePolicyDocument(t)
	docFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(docFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var mapping any
	if err := yaml.Unmarshal([]byte(doc), &mapping); err != nil {
		t.Fatal(err)
	}
	values, err := yaml.Marshal(map[string]any{"policy": mapping})
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--set-file", "policy=" + docFile}, {"--values", valuesFile}} {
		out := helmTemplate(t, append(args, "--show-only", "templates/policy.yaml")...)
		stored := parseRendered(t, out)["ConfigMap/shadowgate-policy"]
		got, _, _ := unstructured.NestedString(stored.Object, "data", "policy.yaml")
		if args[0] == "--set-file" && got != doc {
			t.Errorf("--set-file: stored %q, want the document verbatim", got)
		}
		var gotMapping any
		if err := yaml.Unmarshal([]byte(got), &gotMapping); err != nil || !cmp.Equal(gotMapping, mapping) {
			t.Errorf("%s: stored a different policy (%v):\n%s", args[0], err, cmp.Diff(mapping, gotMapping))
		}
		cmFile := filepath.Join(t.TempDir(), "configmap.yaml")
		if err := os.WriteFile(cmFile, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(cluster.bin, "policy", "check", "--policy", cmFile).CombinedOutput(); err != nil {
			t.Errorf("%s: shadowgate policy check refuses the rendered ConfigMap: %v\n%s", args[0], err, out)
		}
	}
}

// examplePolicyDocument is the document in manifests/examples/policy.yaml.
func examplePolicyDocument(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil || cm.Data["policy.yaml"] == "" {
		t.Fatalf("manifests/examples/policy.yaml holds no policy document (%v)", err)
	}
	return cm.Data["policy.yaml"]
}

// `helm test` runs one Job per SSH virtual node of the policy: shadowgate doctor for that
// node, in the node's shadow image under the shadow's restricted security context, with the
// credentials the policy names mounted under the key names the policy gives them (its
// defaults where it gives none, as the Go policy's Defaults fill them in), and shadowgate's
// binary copied in by an init container of shadowgate's image. doctor.enabled=false renders
// none; the Jobs are hooks, never part of the install.
func TestChartRendersADoctorJobPerSSHVirtualNode(t *testing.T) {
	doc := examplePolicyDocument(t)
	pol, errs := policy.Decode([]byte(doc), field.NewPath("policy.yaml"))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	docFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(docFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := parseRendered(t, helmTemplate(t, "--set-file", "policy="+docFile))
	webhookPods := webhookSelectors(t, objs)
	jobs := 0
	for name, node := range pol.VirtualNodes {
		ssh := node.Network.SSH
		var job batchv1.Job
		key := "Job/shadowgate-doctor-" + name
		if !node.Network.SSHShadow() {
			if _, ok := objs[key]; ok {
				t.Errorf("%s is rendered for a node that is not in ssh mode", key)
			}
			continue
		}
		jobs++
		objs.typed(t, key, &job)
		if job.Annotations["helm.sh/hook"] != "test" {
			t.Errorf("%s is not a helm test hook: %v", key, job.Annotations)
		}
		for what, sel := range webhookPods {
			if sel.Matches(labels.Set(job.Spec.Template.Labels)) {
				t.Errorf("%s's pods, labelled %v, are selected by the webhook's %s (%s)", key, job.Spec.Template.Labels, what, sel)
			}
		}
		spec := job.Spec.Template.Spec
		if len(spec.InitContainers) != 1 || !strings.HasPrefix(spec.InitContainers[0].Image, "ghcr.io/interlink-hq/shadowgate:") ||
			!slices.Equal(spec.InitContainers[0].Args, []string{"copy-binary", "/doctor/shadowgate"}) {
			t.Errorf("%s: the init container does not copy shadowgate: %+v", key, spec.InitContainers)
		}
		c := spec.Containers[0]
		if c.Image != ssh.Image {
			t.Errorf("%s runs image %s, want the node's shadow image %s", key, c.Image, ssh.Image)
		}
		if !slices.Contains(c.Command, "--node="+name) || c.Command[0] != "/doctor/shadowgate" || c.Command[1] != "doctor" {
			t.Errorf("%s: command %q does not run doctor for the node", key, c.Command)
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken ||
			c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("%s does not run under the shadow's restricted security context", key)
		}
		secretKey := map[string]string{}
		for _, v := range spec.Volumes {
			if v.Secret != nil {
				secretKey[v.Secret.SecretName] = v.Secret.Items[0].Key
			}
		}
		want := map[string]string{ssh.KeySecret: ssh.KeySecretKey}
		if ssh.Auth == "kerberos" {
			want = map[string]string{ssh.KeytabSecret: ssh.KeytabSecretKey}
		}
		if !maps.Equal(secretKey, want) {
			t.Errorf("%s mounts Secrets %v, want %v", key, secretKey, want)
		}
	}
	if jobs == 0 {
		t.Fatal("the example policy has no SSH node to check")
	}
	for key := range parseRendered(t, helmTemplate(t, "--set-file", "policy="+docFile, "--set", "doctor.enabled=false")) {
		if strings.HasPrefix(key, "Job/shadowgate-doctor-") {
			t.Errorf("doctor.enabled=false still renders %s", key)
		}
	}
}

// The kustomize component manifests/components/doctor is the chart's doctor Job for the
// example policy's hpc-vk, pod for pod: the two installs check a site the same way. Only the
// init container's image tag (the chart's appVersion) and the chart's labels differ.
func TestDoctorComponentIsTheChartsJob(t *testing.T) {
	docFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(docFile, []byte(examplePolicyDocument(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	const key = "Job/shadowgate-doctor-hpc-vk"
	var chart, component batchv1.Job
	parseRendered(t, helmTemplate(t, "--set-file", "policy="+docFile)).typed(t, key, &chart)
	parseRendered(t, kustomizeWith(t, "manifests/components/doctor")).typed(t, key, &component)
	for what, sel := range webhookSelectors(t, parseRendered(t, kustomizeWith(t, "manifests/components/doctor"))) {
		if sel.Matches(labels.Set(component.Spec.Template.Labels)) {
			t.Errorf("the component's doctor pods, labelled %v, are selected by the webhook's %s (%s)", component.Spec.Template.Labels, what, sel)
		}
	}
	chartSpec, componentSpec := chart.Spec.Template.Spec, component.Spec.Template.Spec
	chartSpec.InitContainers[0].Image, componentSpec.InitContainers[0].Image = "", ""
	compare(t, key+" pod", componentSpec, chartSpec)
	compare(t, key+" limits", []any{component.Spec.BackoffLimit, component.Spec.ActiveDeadlineSeconds}, []any{chart.Spec.BackoffLimit, chart.Spec.ActiveDeadlineSeconds})
}

// webhookSelectors are the selectors of the webhook's pods among rendered objects: its
// Deployment's, Service's and PodDisruptionBudget's. A doctor pod they selected would be
// counted as a replica by the budget and sit beside the webhook under its Deployment.
func webhookSelectors(t *testing.T, objs rendered) map[string]labels.Selector {
	t.Helper()
	var d appsv1.Deployment
	var svc corev1.Service
	var pdb policyv1.PodDisruptionBudget
	objs.typed(t, "Deployment/shadowgate", &d)
	objs.typed(t, "Service/shadowgate", &svc)
	objs.typed(t, "PodDisruptionBudget/shadowgate", &pdb)
	sels := map[string]labels.Selector{"Service": labels.SelectorFromSet(svc.Spec.Selector)}
	for what, ls := range map[string]*metav1.LabelSelector{"Deployment": d.Spec.Selector, "PodDisruptionBudget": pdb.Spec.Selector} {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatalf("%s selector: %v", what, err)
		}
		sels[what] = sel
	}
	return sels
}
