package offload

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// minio is an in-cluster HTTP server, a Deployment and Service on the cluster node from the
// site's page server image, answering with a page that names its namespace.
func minio(namespace string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: minio, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: minio}}
  template:
    metadata: {labels: {app: minio}}
    spec:
      nodeSelector: {kubernetes.io/hostname: %[2]s}
      containers:
      - name: minio
        image: %[3]s
        args: [-listen, ':9000', -page, 'minio of %[1]s']
        ports: [{containerPort: 9000}]
        readinessProbe: {tcpSocket: {port: 9000}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: minio, namespace: %[1]s}
spec:
  selector: {app: minio}
  ports: [{port: 9000, targetPort: 9000}]
`, namespace, harness.ClusterNode, site.local.PageServerImage)
}

// The reverse tunnel on the site: a job lists minio by its full Service name, by its bare
// same-namespace name and through the SOCKS proxy; its pre-exec waits for the tunnel, and the
// workload then fetches the in-cluster page all three ways. Another Unix user of the compute
// node is refused by the relay.
func TestTheJobReachesAClusterServiceThroughTheReverseTunnel(t *testing.T) {
	const ns = "reverse"
	kubectl(t, "", "create", "namespace", ns)
	kubectl(t, minio(ns), "apply", "-f", "-")
	kubectl(t, "", "rollout", "status", "-n", ns, "deployment/minio", "--timeout=2m")

	full := "minio." + ns + ".svc.cluster.local"
	// Each fetch is tried twice, as a client would while a Service's endpoints settle.
	fetch := `for u in "$@"; do python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().strip(), "via", sys.argv[1])' "$u" || { sleep 2; false; } || ` +
		`python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().strip(), "via", sys.argv[1])' "$u"; done; ` +
		`curl -sS --retry 3 --retry-all-errors --max-time 10 --socks5-hostname 127.0.0.1:1080 http://` + full + `:9000/ | sed 's/$/ via socks/'; sleep 600`
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "analysis", Namespace: ns, Annotations: map[string]string{
			"interlink.eu/reverse-forwards":   full + ":9000 9001:minio:9000",
			"interlink.eu/reverse-socks-port": "1080",
		}},
		Spec: corev1.PodSpec{
			NodeSelector:  map[string]string{"kubernetes.io/hostname": harness.HPCNode},
			Tolerations:   []corev1.Toleration{{Key: "virtual-node.interlink/no-schedule", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "docker://python:3", Command: []string{"/bin/bash", "-c", fetch, "fetch",
				"http://" + full + ":9000/", "http://minio:9001/"}}},
		},
	}
	manifest, _ := json.Marshal(pod) // a typed Pod always marshals
	kubectl(t, string(manifest), "apply", "-f", "-")
	uid := kubectl(t, "", "get", "pod", "-n", ns, "analysis", "-o", "jsonpath={.metadata.uid}")
	sh := shadowOf("analysis", ns, false)
	t.Cleanup(func() { deleteAndWaitGone(t, ns, "analysis", uid, sh) })

	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	page := "minio of " + ns
	waitFor(t, 4*time.Minute, "the job to fetch minio's page three ways", func() error {
		logs, err := kubectlOutput("logs", "-n", ns, "analysis")
		if err != nil {
			return err
		}
		for _, via := range []string{"via http://" + full + ":9000/", "via http://minio:9001/", "via socks"} {
			if !strings.Contains(logs, page+" "+via) {
				return fmt.Errorf("no %q in the workload's log:\n%s\n--- the batch job's output:\n%s\n--- the shadow's ssh-reverse:\n%s",
					page+" "+via, logs, jobOutput(harness.HPCNode, uid), sh.containerLog("ssh-reverse"))
			}
		}
		return nil
	})

	bind := kubectl(t, "", "get", "pod", "-n", ns, "analysis", "-o", `jsonpath={.metadata.annotations.interlink\.eu/reverse-bind}`)
	other := site.local.HPC.Other
	uidN, _ := strconv.Atoi(other.Uid)
	gidN, _ := strconv.Atoi(other.Gid)
	probe := site.local.HPC.Slurm("srun", "-N1", "--quiet", "/usr/bin/python3", "-c",
		`import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())`, "http://"+bind+":9000/")
	probe.Dir = "/"
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uidN), Gid: uint32(gidN)}}
	out, err := probe.CombinedOutput()
	var exit *exec.ExitError
	if err == nil || strings.Contains(string(out), page) {
		t.Errorf("user %s reached the job's relay at %s:9000 (err %v):\n%s", other.Username, bind, err, out)
	} else if !errors.As(err, &exit) {
		t.Errorf("srun as %s did not run: %v\n%s", other.Username, err, out)
	}
}
