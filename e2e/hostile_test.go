package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// hostileEndpoint is an admission endpoint and an object of the kind it judges that it refuses
// (denied at /validate-*, passed on unpatched at /mutate-pods, which leaves refusals to
// /validate-pods), built around the annotations it is given.
type hostileEndpoint struct {
	path   string
	kind   metav1.GroupVersionKind
	object func(annotations map[string]string) []byte
	// refuses: the object is denied here, rather than passed on for /validate-pods to deny.
	refuses bool
}

// The hostile objects all carry this refusal, so every endpoint must still judge them right.
var refusedPodAnnotations = map[string]string{fwd: "minio:9000", bind: "127.0.0.1"}

var hostileEndpoints = []hostileEndpoint{
	{path: "/mutate-pods", kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, object: hostilePod},
	{path: "/validate-pods", kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, object: hostilePod, refuses: true},
	{path: "/validate-workloads", kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, refuses: true,
		object: func(annotations map[string]string) []byte {
			var pod corev1.Pod
			mustUnmarshal(hostilePod(annotations), &pod)
			return mustMarshal(appsv1.Deployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: "hostile"},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hostile"}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "hostile"}, Annotations: pod.Annotations}, Spec: pod.Spec},
				},
			})
		}},
	{path: "/validate-configmaps", kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, refuses: true,
		object: func(annotations map[string]string) []byte {
			return mustMarshal(corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "hostile-node", Namespace: "hostile", Annotations: annotations},
				Data:       map[string]string{"compute-node": "node07 -oProxyCommand=id"},
			})
		}},
}

// hostilePod is the offloaded pod the pod endpoints refuse, with more annotations.
func hostilePod(more map[string]string) []byte {
	annotations := maps.Clone(refusedPodAnnotations)
	maps.Copy(annotations, more)
	return []byte(offloaded{name: "hostile", namespace: "hostile", node: "hpc-vk", annotations: annotations, ports: []int32{8888}}.json())
}

// outcome is what an endpoint must answer to a hostile request.
type outcome int

const (
	badRequest outcome = iota // a 4xx error naming what is wrong
	judged                    // the object judged as without the hostile part: denied, or passed on
)

// hostileRequest is one hostile request against an endpoint and the answer it must get.
type hostileRequest struct {
	contentType string
	body        []byte
	want        outcome
	code        int32  // the 4xx of a badRequest
	reason      string // what its message says, so no case passes as another's
}

// hostileRequests sends, to each endpoint, what the API server never sends.
var hostileRequests = map[string]func(e hostileEndpoint) hostileRequest{
	"an empty body is a 400": func(hostileEndpoint) hostileRequest {
		return hostileRequest{"application/json", nil, badRequest, http.StatusBadRequest, "request body is empty"}
	},
	"a review sent as text/plain is a 400": func(e hostileEndpoint) hostileRequest {
		return hostileRequest{"text/plain", review(e, e.object(nil)), badRequest, http.StatusBadRequest, "contentType=text/plain, expected application/json"}
	},
	"a review cut off in the middle is a 400": func(e hostileEndpoint) hostileRequest {
		b := review(e, e.object(nil))
		return hostileRequest{"application/json", b[:len(b)/2], badRequest, http.StatusBadRequest, "unexpected end of JSON input"}
	},
	"a review for another kind (a Service at the pod and ConfigMap endpoints, an unknown kind at /validate-workloads) is a 400": func(e hostileEndpoint) hostileRequest {
		kind := metav1.GroupVersionKind{Version: "v1", Kind: "Service"}
		if e.path == "/validate-workloads" {
			kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Frobnicator"}
		}
		e.kind = kind
		return hostileRequest{"application/json", review(e, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`)), badRequest, http.StatusBadRequest,
			"this endpoint judges "}
	},
	"a review whose object is of another kind than the request's is a 400": func(e hostileEndpoint) hostileRequest {
		other := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`
		if e.path == "/validate-workloads" {
			other = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`
		}
		return hostileRequest{"application/json", review(e, []byte(other)), badRequest, http.StatusBadRequest, "but its object says it is"}
	},
	"a review of admission.k8s.io/v2 is a 400": func(e hostileEndpoint) hostileRequest {
		b := bytes.Replace(review(e, e.object(nil)), []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v2"`), 1)
		return hostileRequest{"application/json", b, badRequest, http.StatusBadRequest, "an AdmissionReview of apiVersion \"admission.k8s.io/v2\" cannot be read"}
	},
	"a review of another kind than AdmissionReview is a 400": func(e hostileEndpoint) hostileRequest {
		b := bytes.Replace(review(e, e.object(nil)), []byte(`"kind":"AdmissionReview"`), []byte(`"kind":"Banana"`), 1)
		return hostileRequest{"application/json", b, badRequest, http.StatusBadRequest, `a "Banana" of apiVersion "admission.k8s.io/v1" is not an AdmissionReview`}
	},
	"an object with a bogus apiVersion is a 400": func(e hostileEndpoint) hostileRequest {
		obj := e.object(nil)
		var m map[string]any
		mustUnmarshal(obj, &m)
		m["apiVersion"] = "bogus.example.org/v0"
		return hostileRequest{"application/json", review(e, mustMarshal(m)), badRequest, http.StatusBadRequest, "but its object says it is \""}
	},
	"an object with a duplicate key is a 400": func(e hostileEndpoint) hostileRequest {
		obj := e.object(nil)
		dup := bytes.Replace(obj, []byte(`"metadata":{`), []byte(`"metadata":{"name":"first","name":"second",`), 1)
		return hostileRequest{"application/json", review(e, dup), badRequest, http.StatusBadRequest, "duplicate field \"metadata.name\""}
	},
	"a 7 MiB object is a 413": func(e hostileEndpoint) hostileRequest {
		big := e.object(map[string]string{"example.org/padding": strings.Repeat("x", 7<<20)})
		return hostileRequest{"application/json", review(e, big), badRequest, http.StatusRequestEntityTooLarge, "request entity is too large"}
	},
	"100,000 nested arrays in an unknown field are a 400": func(e hostileEndpoint) hostileRequest {
		obj := e.object(nil)
		nested := append(append([]byte(`{"x-unknown":`), deeplyNested(100_000)...), ',')
		return hostileRequest{"application/json", review(e, append(nested, obj[1:]...)), badRequest, http.StatusBadRequest, "exceeded max depth"}
	},
	"100,000 nested arrays beside the annotations are a 400": func(e hostileEndpoint) hostileRequest {
		obj := e.object(map[string]string{"example.org/a": "b"})
		nested := bytes.Replace(obj, []byte(`"annotations":{`), append(append([]byte(`"x-neighbour":`), deeplyNested(100_000)...), []byte(`,"annotations":{`)...), 1)
		return hostileRequest{"application/json", review(e, nested), badRequest, http.StatusBadRequest, "exceeded max depth"}
	},
	"900 annotations are judged like one": func(e hostileEndpoint) hostileRequest {
		many := make(map[string]string, 900)
		for i := range 900 {
			many["example.org/a"+strconv.Itoa(i)] = strconv.Itoa(i)
		}
		return hostileRequest{"application/json", review(e, e.object(many)), judged, 0, ""}
	},
	// What /mutate-pods can receive before the API server checks annotation sizes: refused by
	// the pod endpoints for the size alone (one cause), before any annotation is parsed.
	"a 3 MiB annotation is judged by its size alone": func(e hostileEndpoint) hostileRequest {
		big := e.object(map[string]string{fwd: strings.Repeat("minio:9000 ", 3<<20/11)})
		return hostileRequest{"application/json", review(e, big), judged, 0, ""}
	},
}

func review(e hostileEndpoint, object []byte) []byte {
	return harness.CreateReview("hostile", e.kind, "hostile", "hostile", object)
}

func deeplyNested(depth int) []byte {
	return append(bytes.Repeat([]byte("["), depth), bytes.Repeat([]byte("]"), depth)...)
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only typed objects and decoded maps are marshalled here
	}
	return b
}

func mustUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err) // only what mustMarshal made is unmarshalled here
	}
}

// check says what is wrong with an endpoint's answer to r, or "".
func (r hostileRequest) check(e hostileEndpoint, got *admissionv1.AdmissionResponse) string {
	switch {
	case got.Result != nil && got.Result.Code >= 500:
		return fmt.Sprintf("a %d: %s", got.Result.Code, got.Result.Message)
	case r.want == badRequest && (got.Allowed || got.Result == nil || got.Result.Code != r.code || !strings.Contains(got.Result.Message, r.reason)):
		return fmt.Sprintf("want a %d saying %q, got %+v", r.code, r.reason, got)
	case r.want == judged && e.refuses && (got.Allowed || got.Result == nil || got.Result.Message == "" || got.Result.Details == nil || len(got.Result.Details.Causes) != 1):
		return fmt.Sprintf("want the one refusal without the hostile part, got %+v", got)
	case r.want == judged && !e.refuses && (!got.Allowed || got.Patch != nil):
		return fmt.Sprintf("want the pod passed on unpatched for /validate-pods to refuse, got %+v", got)
	}
	return ""
}

// ordinaryAdmissions sends the mutation of an ordinary offloaded pod to serve, one after
// another, until stop is closed, and reports how many were answered as they should be (allowed
// with a patch), the slowest answer, and the first problem. /mutate-pods writes nothing, so the
// loop leaves no shadow behind.
func ordinaryAdmissions(stop <-chan struct{}) (answered int, slowest time.Duration, problem string) {
	p := offloaded{name: "ordinary", namespace: "hostile-meanwhile", node: "hpc-vk", ports: []int32{8888},
		annotations: map[string]string{fwd: "minio:9000"}}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return answered, slowest, problem
		default:
		}
		start := time.Now()
		got, err := cluster.sg.Review("/mutate-pods", 10*time.Second, "application/json",
			harness.PodCreateReview(fmt.Sprintf("ordinary-%d", i), p.namespace, p.name, []byte(p.json())))
		slowest = max(slowest, time.Since(start))
		switch {
		case err != nil:
			problem = cmp.Or(problem, err.Error())
		case !got.Allowed || got.Patch == nil:
			problem = cmp.Or(problem, fmt.Sprintf("an ordinary pod was not mutated: %+v", got.Result))
		default:
			answered++
		}
	}
}

// Hostile HTTP sent straight to every admission endpoint of the suite's serve gets a 4xx with a
// reason, or the answer the object deserves without its hostile part; nothing panics, serve's
// goroutines come back to where they were, and it still admits a pod with its shadow. An
// ordinary pod's admissions sent all the while, the 3 MiB annotation's among them, are each
// answered within the mutating webhook's timeout (timeoutSeconds: 5): a hostile pod costs the
// others no admission.
func TestHostileHTTPIsRefusedCleanly(t *testing.T) {
	metric := func(name string) float64 {
		t.Helper()
		return metricValues(t, []string{name})[name]
	}
	const goroutines, rss, panics = "go_goroutines", "process_resident_memory_bytes", "controller_runtime_webhook_panics_total"
	goroutinesBefore, rssBefore := metric(goroutines), metric(rss)
	stop := make(chan struct{})
	var (
		ordinaryAnswered int
		ordinarySlowest  time.Duration
		ordinaryProblem  string
	)
	meanwhile := make(chan struct{})
	go func() {
		defer close(meanwhile)
		ordinaryAnswered, ordinarySlowest, ordinaryProblem = ordinaryAdmissions(stop)
	}()
	rounds := harness.Scaled(1, 5)
	requests, rejected := 0, 0
	for range rounds {
		for sentence, request := range hostileRequests {
			for _, e := range hostileEndpoints {
				r := request(e)
				got, err := cluster.sg.Review(e.path, 10*time.Second, r.contentType, r.body)
				requests++
				if err != nil {
					t.Fatalf("%s at %s: %v", sentence, e.path, err)
				}
				if !got.Allowed {
					rejected++
				}
				if problem := r.check(e, got); problem != "" {
					t.Errorf("%s at %s: %s", sentence, e.path, problem)
				}
			}
		}
	}

	close(stop)
	<-meanwhile
	// The webhook's timeout: an answer later than that is, at the API server, a failed call.
	const ordinaryBound = 5 * time.Second
	switch {
	case ordinaryProblem != "":
		t.Errorf("an ordinary admission sent during the barrage failed: %s", ordinaryProblem)
	case ordinaryAnswered == 0:
		t.Error("no ordinary admission was answered during the barrage")
	case ordinarySlowest >= ordinaryBound:
		t.Errorf("the slowest ordinary admission during the barrage took %v, past the webhook's timeout of %v", ordinarySlowest, ordinaryBound)
	}

	if err := cluster.sg.Exited(); err != nil {
		t.Fatal(err)
	}
	if n := metric(panics); n != 0 {
		t.Errorf("%s is %v, want 0", panics, n)
	}
	// The tolerance is what serve does meanwhile of its own accord (a lease renewal, a
	// reconcile, an Event on its way): a few goroutines. A leaked request keeps one or two (its
	// connection, its handler), so a leak of three of a round's requests already exceeds it; a
	// leak in one kind of request repeats at each of the four endpoints and in every round.
	const tolerance = 5
	var goroutinesAfter float64
	harness.Eventually(t, 30*time.Second, "serve's goroutines back to where they were before the barrage", func() (bool, string) {
		goroutinesAfter = metric(goroutines)
		return goroutinesAfter <= goroutinesBefore+tolerance, fmt.Sprintf("%v goroutines, %v before", goroutinesAfter, goroutinesBefore)
	})
	rssAfter := metric(rss)
	peak, err := cluster.sg.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	// The chart's memory limit (resources.limits.memory): a barrage that took serve past it
	// would have it OOM-killed, and every offloaded pod's create refused meanwhile.
	const rssBound = 256 << 20
	if peak >= rssBound {
		t.Errorf("serve's peak RSS was %d MiB, want under the chart's memory limit of %d MiB", peak>>20, rssBound>>20)
	}

	createNamespaces(t, "hostile")
	p := offloaded{name: "after-the-barrage", namespace: "hostile", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace())

	log, err := os.ReadFile(cluster.sg.Log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(log)), "panic") {
		t.Errorf("serve's log mentions a panic: %s", cluster.sg.Log)
	}
	if t.Failed() {
		return
	}
	harness.Scenario("hostile-http", "requests", requests, "rejected", rejected, "panics", 0,
		"goroutines_before", goroutinesBefore, "goroutines_after", goroutinesAfter, "goroutine_tolerance", tolerance,
		"rss_before_mib", int64(rssBefore)>>20, "rss_after_mib", int64(rssAfter)>>20, "peak_rss_mib", peak>>20,
		"ordinary_answered", ordinaryAnswered, "ordinary_slowest_ms", ordinarySlowest.Milliseconds())
}
