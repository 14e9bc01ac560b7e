package offload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// kubectl runs the real kubectl as the cluster admin and fails the test when it fails.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return site.kubectl.MustRun(ctx, t, stdin, args...)
}

// kubectlOutput runs kubectl as the cluster admin and returns what it printed, or an error
// with its output: for checks polled until they hold.
func kubectlOutput(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return site.kubectl.Must(ctx, "", args...)
}

// waitFor is harness.Eventually for a check that says why it does not hold yet, failing
// with the nodes' logs.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	harness.Eventually(t, timeout, what, func() (bool, string) {
		if err := check(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}, siteLogs)
}

// siteLogs is the end of each node's log, for a failure message.
func siteLogs() string {
	var b strings.Builder
	for node, file := range site.local.NodeLogs {
		data, _ := os.ReadFile(file)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "--- the end of %s's log (%s):\n%s\n", node, file, strings.Join(lines, "\n"))
	}
	return b.String()
}

// notebook is the guide's notebook pod (manifests/examples/notebook.yaml) placed in namespace
// on node.
func notebook(t *testing.T, namespace, node string) string {
	t.Helper()
	data, err := os.ReadFile(site.root + "/manifests/examples/notebook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(data), "namespace: user", "namespace: "+namespace, 1)
	return strings.Replace(doc, "kubernetes.io/hostname: "+harness.HPCNode, "kubernetes.io/hostname: "+node, 1)
}

// jobOutput is the batch job's own output (the pre-exec's lines among it) of the pod with uid
// on a virtual node, from the job directory the node keeps while the pod exists.
func jobOutput(node, uid string) string {
	data, err := os.ReadFile(filepath.Join(site.local.HPC.Dir, "jobs", node, uid, "job.out"))
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// containerLog is the log of a container of the shadow's pods, for a failure message.
func (s shadow) containerLog(container string) string {
	out, err := kubectlOutput("logs", "-n", s.namespace, "-l", "interlink.eu/shadow="+s.name, "-c", container, "--tail=30")
	if err != nil {
		return err.Error()
	}
	return out
}

// jobState is the state of the Slurm job named uid (the virtual node names jobs after their
// pod's UID), "" when Slurm holds none.
func jobState(uid string) (state, node string, err error) {
	out, err := site.local.HPC.Slurm("squeue", "-h", "--name="+uid, "-o", "%T %N").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("squeue: %v %s", err, out)
	}
	state, node, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return state, node, nil
}

// waitForJob waits for the job of the pod with uid to be in state.
func waitForJob(t *testing.T, uid, want string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("the Slurm job of pod UID %s to be %q", uid, want), func() error {
		state, _, err := jobState(uid)
		if err != nil {
			return err
		}
		if state != want {
			return fmt.Errorf("squeue says %q", state)
		}
		return nil
	})
}

// shadow names the shadow of pod in namespace, with or without shadow-same-ns.
type shadow struct{ name, namespace string }

func shadowOf(pod, namespace string, sameNamespace bool) shadow {
	return shadow{inject.ShadowName(pod, namespace, sameNamespace), inject.ShadowNamespace(namespace, sameNamespace)}
}

// readyPod waits for the shadow's pod to be Ready and returns its name, UID and IP.
func (s shadow) readyPod(t *testing.T, timeout time.Duration) (name, uid, ip string) {
	t.Helper()
	selector := "interlink.eu/shadow=" + s.name
	waitFor(t, timeout, "a Ready pod of shadow "+s.namespace+"/"+s.name, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := site.kubectl.Must(ctx, "", "get", "pod", "-n", s.namespace, "-l", selector, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.podIP} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[3] == "True" {
				name, uid, ip = f[0], f[1], f[2]
				return nil
			}
		}
		describe, _ := site.kubectl.Must(ctx, "", "describe", "pod", "-n", s.namespace, "-l", selector)
		return fmt.Errorf("pods: %q\n%s", out, describe)
	})
	return name, uid, ip
}

// get fetches url and returns its body.
func get(url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s %s", url, resp.Status, body)
	}
	return string(body), nil
}

// deleteAndWaitGone deletes the pod and waits until its job has left Slurm and its shadow
// Deployment is gone, so the next test finds the ports free.
func deleteAndWaitGone(t *testing.T, namespace, pod, uid string, s shadow) {
	t.Helper()
	kubectl(t, "", "delete", "pod", "-n", namespace, pod, "--wait=true", "--timeout=90s")
	waitForJob(t, uid, "", 90*time.Second)
	waitFor(t, 90*time.Second, "shadow "+s.namespace+"/"+s.name+" to be removed", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := site.kubectl.Must(ctx, "", "get", "deployment,pod", "-n", s.namespace, "-l", "interlink.eu/pod-uid="+uid, "-o", "name")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
}

// notebookPage is the URL of the stand-in notebook of pod ns/notebook through the shadow pod
// at ip, and a check that it serves that pod's page.
func notebookPage(ns, ip string) (url string, page func() error) {
	url = fmt.Sprintf("http://%s:8888/", ip)
	return url, func() error {
		body, err := get(url)
		if err == nil && !strings.Contains(body, "stand-in notebook for pod "+ns+"/notebook") {
			err = fmt.Errorf("the page is not the notebook's: %q", body)
		}
		return err
	}
}
