package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

// Flags that do not go together are refused before anything is read, naming the flag.
func TestStatusRefusesFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"-A with a pod's name is refused.":           {args: []string{"-A", "notebook"}, want: "-A lists every namespace's pods, so it takes no pod name"},
		"-A with -n is refused.":                     {args: []string{"-A", "-n", "user"}, want: `-A and -n "user"`},
		"An unknown output is refused.":              {args: []string{"-o", "table"}, want: `--output must be text, wide, json or yaml, not "table"`},
		"An unknown state to wait for is refused.":   {args: []string{"--wait-for", "Up"}, want: `--wait-for "Up" is no tunnel state: give one of [Starting WaitingForNode Ready Failed Ended]`},
		"--timeout without --wait-for is refused.":   {args: []string{"--timeout", "1m"}, want: "--timeout bounds --wait-for"},
		"A timeout that is not positive is refused.": {args: []string{"--wait-for", "Ready", "--timeout", "0s"}, want: "--timeout must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "", append([]string{"status", "--kubeconfig", "/nonexistent"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, exitUsage, tc.want)
			}
		})
	}
	o := statusOptions{output: "text", waitFor: "ready", timeout: time.Minute}
	if err := o.validate("notebook", false); err != nil || o.waitFor != "Ready" {
		t.Errorf("--wait-for ready: %v, state %q; want it taken as Ready", err, o.waitFor)
	}
}

// forbidClusterWide refuses every list and watch across namespaces, as RBAC refuses a user who
// may read only some namespaces.
var forbidClusterWide = interceptor.Funcs{
	List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if (&client.ListOptions{}).ApplyOptions(opts).Namespace == "" {
			return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "tunnels"}, "", errors.New("cannot list at the cluster scope"))
		}
		return c.List(ctx, list, opts...)
	},
}

// status with -A, -o wide and -o yaml, against a fake API server.
func TestStatusOutputs(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	failed := tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonNodeConnectionRefused, Message: "nothing listens on 8888 " + hostile,
		ComputeNode: "10.0.0.3", ForwardMode: "portforward", Service: "user-shadow/notebook-1", Since: now}
	ready := tunnelstate.Status{State: tunnelstate.Ready, Reason: tunnelstate.ReasonReady, Service: "other-shadow/trainer-2", Since: now,
		URLs: []string{"https://trainer-other-8888-0123456789.apps.example.org/", "https://trainer-other-6006-0123456789.apps.example.org/" + hostile}}
	notebook, trainer := statusPod("notebook"), statusPod("trainer")
	trainer.Namespace = "other"
	objs := []client.Object{notebook, trainer, tunnelOf(notebook, failed, nil), tunnelOf(trainer, ready, nil)}
	for name, tc := range map[string]struct {
		opts      statusOptions
		ns        string
		forbidden bool
		code      int
		want      []string // lines of the output, each with these fields in order
		check     func(t *testing.T, out string)
		err       string
	}{
		"-A lists the pods of every namespace, with a NAMESPACE column.": {
			opts: statusOptions{output: "text"}, code: exitDenied,
			want: []string{"NAMESPACE POD NODE", "other trainer hpc-vk - - Ready", "user notebook hpc-vk 10.0.0.3 portforward Failed NodeConnectionRefused: nothing listens"},
		},
		"The URL column shows the front door's URLs, escaped, and -o json holds them.": {
			opts: statusOptions{output: "text"}, ns: "other",
			want: []string{"POD NODE COMPUTE-NODE MODE STATE REASON AGE SHADOW URL",
				"trainer hpc-vk - - Ready Ready 0s Current https://trainer-other-8888-0123456789.apps.example.org/,https://trainer-other-6006-0123456789.apps.example.org/" + hostileEscaped},
			check: func(t *testing.T, out string) {
				var js bytes.Buffer
				_ = (&statusOptions{output: "json"}).show(t.Context(), &js, statusClient(objs...), "other", "")
				if !strings.Contains(js.String(), `"urls": [`) || !strings.Contains(js.String(), "https://trainer-other-8888-0123456789.apps.example.org/") {
					t.Errorf("-o json holds no urls:\n%s", js.String())
				}
			},
		},
		"Without -A, one namespace is listed, without a NAMESPACE column.": {
			opts: statusOptions{output: "text"}, ns: "other",
			want:  []string{"POD NODE COMPUTE-NODE", "trainer hpc-vk - - Ready"},
			check: func(t *testing.T, out string) { mustNot(t, out, "NAMESPACE", "notebook") },
		},
		"-A where the API server forbids it says so, exits 2 and suggests -n.": {
			opts: statusOptions{output: "text"}, forbidden: true, code: exitUsage,
			err: "-A reads the Tunnels and pods of every namespace, and the API server forbids you that",
		},
		"-o wide adds the Service and the whole message, escaped.": {
			opts: statusOptions{output: "wide"}, ns: "user", code: exitDenied,
			want: []string{"POD NODE COMPUTE-NODE MODE STATE REASON AGE SHADOW URL SERVICE MESSAGE",
				"notebook hpc-vk 10.0.0.3 portforward Failed NodeConnectionRefused 0s Current - user-shadow/notebook-1 nothing listens on 8888 " + hostileEscaped},
		},
		"-o yaml is the document -o json prints.": {
			opts: statusOptions{output: "yaml"}, code: exitDenied,
			check: func(t *testing.T, out string) {
				var fromYAML, fromJSON any
				if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
					t.Fatal(err)
				}
				var js bytes.Buffer
				_ = (&statusOptions{output: "json"}).show(t.Context(), &js, statusClient(objs...), "", "")
				if err := json.Unmarshal(js.Bytes(), &fromJSON); err != nil {
					t.Fatal(err)
				}
				a, _ := json.Marshal(fromYAML)
				b, _ := json.Marshal(fromJSON)
				if !bytes.Equal(a, b) || !strings.Contains(string(a), `"namespace":"other"`) {
					t.Errorf("the YAML is\n%s\nthe JSON\n%s", a, b)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := statusServer(objs...)
			if tc.forbidden {
				b = b.WithInterceptorFuncs(forbidClusterWide)
			}
			var out bytes.Buffer
			tc.opts.now = func() time.Time { return now }
			err := tc.opts.show(t.Context(), &out, b.Build(), tc.ns, "")
			if code := codeOf(err); code != tc.code || (tc.err != "" && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("exit %d (%v), want %d %q", code, err, tc.code, tc.err)
			}
			if tc.forbidden && !strings.Contains(err.Error(), "name a namespace you may read with -n") {
				t.Errorf("the refusal does not suggest -n: %v", err)
			}
			onlyPrintable(t, "the output", out.String())
			for _, w := range tc.want {
				if !hasLine(out.String(), w) {
					t.Errorf("the output has no line %q:\n%s", w, out.String())
				}
			}
			if tc.check != nil {
				tc.check(t, out.String())
			}
		})
	}
}

// hasLine says whether a line of out has the fields of want, in order and nothing between.
func hasLine(out, want string) bool {
	w := strings.Join(strings.Fields(want), " ")
	for line := range strings.Lines(out) {
		if strings.Contains(strings.Join(strings.Fields(line), " "), w) {
			return true
		}
	}
	return false
}

func mustNot(t *testing.T, out string, not ...string) {
	t.Helper()
	for _, n := range not {
		if strings.Contains(out, n) {
			t.Errorf("the output holds %q:\n%s", n, out)
		}
	}
}

// codeOf is the exit code run gives err.
func codeOf(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.code
	}
	return exitUsage
}

// eventually fails the test when check is not true within a generous bound.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !check(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
	}
}

// watching is a fake API server that counts the watches status makes; before each it runs
// meanwhile(n), n from 1, and the first returns one that has already ended when endFirst.
func watching(t *testing.T, endFirst bool, meanwhile func(c client.WithWatch, n int), objs ...client.Object) (client.WithWatch, *sync.WaitGroup) {
	var started sync.WaitGroup
	started.Add(1)
	n := 0
	c := statusServer(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			n++
			if meanwhile != nil {
				meanwhile(c, n)
			}
			if n == 1 {
				defer started.Done()
				if endFirst {
					return watch.NewEmptyWatch(), nil
				}
			}
			return c.Watch(ctx, list, opts...)
		},
	}).Build()
	return c, &started
}

// setState writes st into pod's Tunnel, as the tunnel reporter does.
func setState(t *testing.T, c client.Client, pod *corev1.Pod, st tunnelstate.Status) {
	t.Helper()
	tun := &v1alpha1.Tunnel{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), tun); err != nil {
		t.Fatal(err)
	}
	st.Into(&tun.Status)
	if err := c.Status().Update(context.Background(), tun); err != nil {
		t.Fatal(err)
	}
}

// -w prints the table, then a row for each change to a Tunnel in scope, until its context ends.
func TestStatusWatch(t *testing.T) {
	now := time.Now()
	starting := tunnelstate.Status{State: tunnelstate.Starting, Since: now}
	failed := tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonLoginRefused, Message: "denied " + hostile, Since: now}
	ready := tunnelstate.Status{State: tunnelstate.Ready, Reason: tunnelstate.ReasonReady, Since: now}
	for name, tc := range map[string]struct {
		output   string
		endFirst bool // the API server ends the first watch at once
		change   func(t *testing.T, c client.WithWatch, pod *corev1.Pod)
		want     string // a line after the table's
		code     int
	}{
		"A tunnel that fails after the start prints a row, escaped, and the watch exits 1.": {
			change: func(t *testing.T, c client.WithWatch, pod *corev1.Pod) { setState(t, c, pod, failed) },
			want:   "notebook hpc-vk - - Failed LoginRefused: denied " + hostileEscaped, code: exitDenied,
		},
		"A pod deleted after the start prints a row that says so.": {
			change: func(t *testing.T, c client.WithWatch, pod *corev1.Pod) {
				for _, o := range []client.Object{pod, &v1alpha1.Tunnel{}} {
					o.SetNamespace(pod.Namespace)
					o.SetName(pod.Name)
					if err := c.Delete(context.Background(), o); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: "notebook - - - - pod deleted",
		},
		"With -o json, a change prints a document of the pod alone.": {
			output: "json",
			change: func(t *testing.T, c client.WithWatch, pod *corev1.Pod) { setState(t, c, pod, ready) },
			want:   `"state": "Ready"`,
		},
		"A watch the API server ends is made again, and a change made meanwhile is printed.": {
			endFirst: true,
			want:     "notebook hpc-vk - - Ready Ready",
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod := statusPod("notebook")
			var meanwhile func(client.WithWatch, int)
			if tc.endFirst {
				meanwhile = func(c client.WithWatch, n int) {
					if n == 2 {
						setState(t, c, pod, ready)
					}
				}
			}
			c, started := watching(t, tc.endFirst, meanwhile, pod, tunnelOf(pod, starting, nil))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out syncbuf.Buffer
			done := make(chan error, 1)
			o := statusOptions{output: cmpOr(tc.output, "text"), watch: true}
			go func() { done <- o.show(ctx, &out, c, "user", "") }()
			started.Wait()
			header := "STATE"
			if tc.output == "json" {
				header = `"state": "Starting"`
			}
			eventually(t, "the table is printed", func() bool { return strings.Contains(out.String(), header) })
			if tc.change != nil {
				tc.change(t, c, pod)
			}
			eventually(t, "the change is printed", func() bool {
				after := out.String()[strings.Index(out.String(), header)+len(header):]
				return hasLine(after, tc.want)
			})
			cancel()
			err := <-done
			if code := codeOf(err); code != tc.code {
				t.Errorf("exit %d (%v), want %d", code, err, tc.code)
			}
			onlyPrintable(t, "the output", out.String())
			if tc.output != "json" && strings.Count(out.String(), "STATE") != 1 {
				t.Errorf("the header is printed more than once:\n%s", out.String())
			}
		})
	}
}

func cmpOr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// --wait-for blocks until the tunnel is in the state (exit 0), or names the pods that are not
// at the timeout (exit 1).
func TestStatusWaitFor(t *testing.T) {
	now := time.Now()
	starting := tunnelstate.Status{State: tunnelstate.Starting, Since: now}
	ready := tunnelstate.Status{State: tunnelstate.Ready, Reason: tunnelstate.ReasonReady, Since: now}
	for name, tc := range map[string]struct {
		initial  *tunnelstate.Status // nil: no Tunnel yet
		becomes  *tunnelstate.Status // written once status watches
		pod      string
		timeout  time.Duration
		code     int
		err      string
		wantLine string
	}{
		"A tunnel that becomes Ready ends the wait with exit 0 and the table.": {
			initial: &starting, becomes: &ready, timeout: 10 * time.Minute, wantLine: "notebook hpc-vk - - Ready Ready",
		},
		"A tunnel already Ready ends the wait at once.": {
			initial: &ready, timeout: 10 * time.Minute, wantLine: "notebook hpc-vk - - Ready",
		},
		"The pod named, whose Tunnel appears later, is waited for.": {
			pod: "notebook", becomes: &ready, timeout: 10 * time.Minute, wantLine: "notebook hpc-vk - - Ready",
		},
		"A tunnel not Ready at the timeout exits 1, naming the pod and its state.": {
			initial: &starting, timeout: 2 * time.Second, code: exitDenied,
			err: "timed out after 2s waiting for tunnels Ready: user/notebook is Starting (-)", wantLine: "notebook hpc-vk - - Starting",
		},
		"A namespace without Tunnels has nothing to wait for: exit 2.": {
			timeout: 10 * time.Minute, code: exitUsage, err: "there are no pods with a Tunnel in namespace user, so none to wait for",
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod := statusPod("notebook")
			objs := []client.Object{pod}
			if tc.initial != nil {
				objs = append(objs, tunnelOf(pod, *tc.initial, nil))
			}
			var meanwhile func(client.WithWatch, int)
			if tc.becomes != nil {
				meanwhile = func(c client.WithWatch, n int) {
					if n != 1 {
						return
					}
					go func() {
						if tc.initial == nil {
							if err := c.Create(context.Background(), tunnelOf(pod, tunnelstate.Status{}, nil)); err != nil {
								t.Error(err)
							}
						}
						tun := &v1alpha1.Tunnel{}
						_ = c.Get(context.Background(), client.ObjectKeyFromObject(pod), tun)
						tc.becomes.Into(&tun.Status)
						if err := c.Status().Update(context.Background(), tun); err != nil {
							t.Error(err)
						}
					}()
				}
			}
			c, _ := watching(t, false, meanwhile, objs...)
			var out syncbuf.Buffer
			o := statusOptions{output: "text", waitFor: "Ready", timeout: tc.timeout}
			err := o.show(t.Context(), &out, c, "user", tc.pod)
			if code := codeOf(err); code != tc.code || (tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err))) {
				t.Fatalf("exit %d (%v), want %d %q", code, err, tc.code, tc.err)
			}
			if tc.wantLine != "" && !hasLine(out.String(), tc.wantLine) {
				t.Errorf("the output has no line %q:\n%s", tc.wantLine, out.String())
			}
		})
	}
}
