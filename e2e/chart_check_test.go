package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// checkInstall runs `shadowgate check install` as the kubeconfig's user and returns its exit
// code and what it printed.
func checkInstall(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.bin, append([]string{"check", "install", "--kubeconfig", kubeconfig}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("shadowgate check install %q: %v", args, err)
	return 0, "", ""
}

// `shadowgate check install` passes only when the API server sends its dry-run pod to a
// shadowgate that judges it. Before the install the pod is admitted unjudged: exit 1, saying
// so. The chart installed with webhooks.url (the API server calls serve at that URL, and the
// chart's certificate names its IP address), the chart's helm test account judges its
// namespace: exit 0, with shadowgate's warning; in another namespace it may not create pods,
// and in an exempt one nothing judges the pod. With serve stopped, failurePolicy Fail refuses
// the pod and the check names the webhook the API server could not call. Nothing is stored.
func TestCheckInstallProvesTheAPIServerReachesTheWebhook(t *testing.T) {
	c := newChartCluster(t)
	const ns = "install-check"
	c.must(t, "", "create", "namespace", ns)
	// The probe meets the restricted Pod Security Standard, so such a namespace judges it too.
	c.must(t, "", "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
	admin := c.cp.AdminKubeconfig

	code, _, stderr := checkInstall(t, admin, "-n", ns)
	if code != 1 || !strings.Contains(stderr, "shadowgate did not judge a dry-run pod in namespace install-check: the API server admitted the pod without shadowgate's judgement") {
		t.Errorf("before the install: exit %d, want 1 and the pod admitted unjudged:\n%s", code, stderr)
	}
	if code, _, stderr := checkInstall(t, admin, "-n", "no-such-namespace", "--wait=30s"); code != 2 || !strings.Contains(stderr, "namespace no-such-namespace") {
		t.Errorf("a missing namespace: exit %d, want 2 naming it:\n%s", code, stderr)
	}

	values := []string{"--set", "webhooks.url=https://127.0.0.1:9443", "--set", "installCheck.namespace=" + ns}
	c.install(t, values...)
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
		urls := c.must(t, "", "get", kind, "shadowgate", "-o", "jsonpath={.webhooks[*].clientConfig.url}")
		if !strings.HasPrefix(urls, "https://127.0.0.1:") || strings.Contains(c.must(t, "", "get", kind, "shadowgate", "-o", "json"), `"service"`) {
			t.Fatalf("the installed %s is not called at webhooks.url: %s", kind, urls)
		}
	}
	// The helm test's ServiceAccount, Role and binding, as `helm test` makes them.
	var hooks []string
	for _, o := range parseRendered(t, helmTemplate(t, append(values, "--show-only", "templates/tests/install-check.yaml")...)) {
		if o.GetKind() != "Job" {
			b, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			hooks = append(hooks, string(b))
		}
	}
	c.must(t, strings.Join(hooks, "\n---\n"), "apply", "-f", "-")
	tester := filepath.Join(t.TempDir(), "install-check.kubeconfig")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.cp.ServiceAccountKubeconfig(ctx, c.k, harness.ReleaseNamespace, "shadowgate-install-check", tester); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := checkInstall(t, tester, "-n", ns, "--wait=1m")
	if code != 0 || !strings.Contains(stdout, "shadowgate judged a dry-run pod in namespace install-check: metadata.annotations[interlink.eu/reverse-forwards] is ignored: the pod is not placed on a virtual node") {
		t.Errorf("installed: exit %d, want 0 and shadowgate's judgement:\n%s%s", code, stdout, stderr)
	}
	if pods := c.must(t, "", "get", "pods", "-n", ns, "-o", "name"); pods != "" {
		t.Errorf("the dry run stored pods: %s", pods)
	}
	if code, _, stderr := checkInstall(t, tester, "-n", "default"); code != 2 || !strings.Contains(stderr, "you may not create pods in namespace default") {
		t.Errorf("the test's account in another namespace: exit %d, want 2 and a refusal naming the namespace:\n%s", code, stderr)
	}
	if code, _, stderr := checkInstall(t, admin, "-n", harness.ReleaseNamespace); code != 1 || !strings.Contains(stderr, "without shadowgate's judgement") {
		t.Errorf("in the exempt release namespace: exit %d, want 1:\n%s", code, stderr)
	}

	if err := c.sg.Stop(); err != nil {
		t.Fatal(err)
	}
	c.sg = nil
	code, _, stderr = checkInstall(t, admin, "-n", ns, "--wait=5s")
	if code != 1 || !strings.Contains(stderr, "within 5s") || !strings.Contains(stderr, `failed calling webhook "mutate-pods.shadowgate.interlink.eu"`) {
		t.Errorf("serve stopped: exit %d, want 1 naming the webhook the API server could not call:\n%s", code, stderr)
	}
}
