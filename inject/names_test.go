package inject

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestShadowNames(t *testing.T) {
	for sentence, tc := range map[string]struct {
		pod, ns   string
		same      bool
		shadow    string // exact when set
		namespace string // exact when set
	}{
		"short names are the virtual kubelet's own":          {pod: "notebook", ns: "user", shadow: "shadow-notebook-user", namespace: "user-shadow"},
		"shadow-same-ns keeps the pod's namespace":           {pod: "notebook", ns: "user", same: true, namespace: "user"},
		"a 63-character namespace is cut for -shadow":        {pod: "p", ns: strings.Repeat("n", 63)},
		"a pod name with dots is changed and hashed":         {pod: "jupyter.lab", ns: "user"},
		"a pod name of 253 characters is cut":                {pod: strings.Repeat("p", 253), ns: "user"},
		"a name that just fits leaves room for -node":        {pod: strings.Repeat("p", 58-len("shadow--user")), ns: "user", shadow: "shadow-" + strings.Repeat("p", 46) + "-user"},
		"a name one character too long is cut and hashed":    {pod: strings.Repeat("p", 59-len("shadow--user")), ns: "user"},
		"upper case cannot happen in a pod name but is safe": {pod: "Notebook", ns: "user"},
	} {
		t.Run(sentence, func(t *testing.T) {
			shadow := ShadowName(tc.pod, tc.ns)
			if tc.shadow != "" && shadow != tc.shadow {
				t.Errorf("shadow name %q, want %q", shadow, tc.shadow)
			}
			// The Service carries the shadow name, so it must be a DNS-1035 label.
			for _, msg := range validation.IsDNS1035Label(shadow) {
				t.Errorf("shadow name %q: %s", shadow, msg)
			}
			for _, msg := range validation.IsDNS1123Label(NodeConfigMapName(shadow)) {
				t.Errorf("node ConfigMap name %q: %s", NodeConfigMapName(shadow), msg)
			}
			ns := ShadowNamespace(tc.ns, tc.same)
			if tc.namespace != "" && ns != tc.namespace {
				t.Errorf("namespace %q, want %q", ns, tc.namespace)
			}
			for _, msg := range validation.IsDNS1123Label(ns) {
				t.Errorf("namespace %q: %s", ns, msg)
			}
			if changed := "shadow-"+tc.pod+"-"+tc.ns != shadow; changed && !hashed(shadow) {
				t.Errorf("shadow name %q was changed but does not end in a hash", shadow)
			}
		})
	}
}

func TestNamesThatDifferOnlyPastTheCutDoNotCollide(t *testing.T) {
	for sentence, pair := range map[string][2][2]string{
		"two long pod names":                                  {{long("p") + "-1", "user"}, {long("p") + "-2", "user"}},
		"two long namespaces":                                 {{"pod", long("n") + "1"}, {"pod", long("n") + "2"}},
		"a dot and a dash in the same place":                  {{"jupyter.lab", "user"}, {"jupyter-lab", "user"}},
		"the same joined name from another pod and namespace": {{long("p") + "-a", "b"}, {long("p"), "a-b"}},
	} {
		t.Run(sentence, func(t *testing.T) {
			a, b := pair[0], pair[1]
			if ShadowName(a[0], a[1]) == ShadowName(b[0], b[1]) {
				t.Errorf("pods %s/%s and %s/%s share the shadow %q", a[1], a[0], b[1], b[0], ShadowName(a[0], a[1]))
			}
		})
	}
	if ShadowNamespace(long("n")+"1", false) == ShadowNamespace(long("n")+"2", false) {
		t.Errorf("two long namespaces share the shadow namespace %q", ShadowNamespace(long("n")+"1", false))
	}
}

func FuzzShadowName(f *testing.F) {
	f.Add("notebook", "user")
	f.Add("jupyter.lab", strings.Repeat("n", 63))
	f.Add(strings.Repeat("p", 253), "u")
	f.Fuzz(func(t *testing.T, pod, ns string) {
		// Kubernetes admits no other names, so no shadow is ever named after one.
		if len(validation.IsDNS1123Subdomain(pod)) > 0 || len(validation.IsDNS1123Label(ns)) > 0 {
			return
		}
		name := ShadowName(pod, ns)
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Fatalf("ShadowName(%q, %q) = %q: %v", pod, ns, name, errs)
		}
		if errs := validation.IsDNS1123Label(NodeConfigMapName(name)); len(errs) > 0 {
			t.Fatalf("node ConfigMap of %q: %v", name, errs)
		}
		if errs := validation.IsDNS1123Label(ShadowNamespace(ns, false)); len(errs) > 0 {
			t.Fatalf("ShadowNamespace(%q) = %q: %v", ns, ShadowNamespace(ns, false), errs)
		}
	})
}

func long(prefix string) string { return prefix + strings.Repeat("x", 70) }

// hashed reports whether a name ends in -<hashLen hex digits>.
func hashed(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || len(name)-i-1 != hashLen {
		return false
	}
	return strings.Trim(name[i+1:], "0123456789abcdef") == ""
}
