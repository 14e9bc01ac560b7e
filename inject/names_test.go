package inject

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestTheVirtualKubeletsNames holds ShadowName and ShadowNamespace to the names interLink's
// virtual kubelet gives the same pods (computeShadowResourceNames and
// computeShadowResourceNamesForSameNamespace in its pkg/virtualkubelet/shadow.go). Every vk*
// value below was worked out by hand from the VK's rules, not from shadowgate's code:
//
//   - pod name and namespace sanitized: lower case, every character but a-z and 0-9 made '-',
//     hyphens trimmed at both ends and runs of them collapsed, cut to 63;
//   - default: <pod>-<ns> in <ns>-shadow; same-ns: shadow-<pod>-<ns> in <ns>;
//   - past 63 characters: (default) the pod part cut to 31 with an 8-hex hash and the
//     namespace part to 31; (same-ns) both to 28, the pod part hashed;
//   - when the Ingress label <name>-<namespace> passes 63: (default) name cut to 31 with the
//     hash of the unsanitized <pod>-<ns>, and the shadow namespace cut to 31, hash-less;
//     (same-ns) the name cut to 63-len(ns)-1 with the hash of shadow-<pod>-<ns>, unless that
//     leaves 9 characters or fewer, when the VK refuses the pod;
//
// the 8-hex hash being the first 4 bytes of the SHA-256 (printf '%s' FULL | sha256sum).
// Where the VK's name needs none of this, shadowgate's is the same, and so is the node
// ConfigMap the VK writes the compute node to; elsewhere shadowgate's is its own, ends in a
// hash, and the row says why it differs (docs/virtual-kubelet-names.md).
func TestTheVirtualKubeletsNames(t *testing.T) {
	for sentence, tc := range map[string]struct {
		pod, ns string
		same    bool
		// the VK's names; vkRefuses: it renders no shadow for this pod
		vkName, vkNamespace string
		vkRefuses           bool
		// shadowgate's namespace when it is not the VK's ("" : the VK's, or hashed)
		namespace string
		// shadowgate uses the VK's names
		vks bool
	}{
		"a short pod is named <pod>-<ns> in <ns>-shadow": {
			pod: "notebook", ns: "user", vkName: "notebook-user", vkNamespace: "user-shadow", vks: true,
		},
		"shadow-same-ns names it shadow-<pod>-<ns> in <ns>": {
			pod: "notebook", ns: "user", same: true, vkName: "shadow-notebook-user", vkNamespace: "user", vks: true,
		},
		"a pod of 46 characters in user is at the VK's limit, 63 characters for <name>-<ns>-shadow": {
			pod: "jupyter-notebook-for-the-analysis-of-run-3-dat", ns: "user",
			vkName: "jupyter-notebook-for-the-analysis-of-run-3-dat-user", vkNamespace: "user-shadow", vks: true,
		},
		"one character more and the VK cuts the name to 31 with a hash": {
			pod: "jupyter-notebook-for-the-analysis-of-run-3-data", ns: "user",
			vkName: "jupyter-notebook-for-t-fef5f8c1", vkNamespace: "user-shadow", namespace: "user-shadow",
		},
		"same-ns at the VK's limit: shadow-<pod>-<ns>-<ns> of 63 characters": {
			pod: "jupyter-notebook-for-the-analysis-of-run-3-dat", ns: "user", same: true,
			vkName: "shadow-jupyter-notebook-for-the-analysis-of-run-3-dat-user", vkNamespace: "user", vks: true,
		},
		"same-ns one character more: the VK cuts the name to 63-len(ns)-1 with a hash": {
			pod: "jupyter-notebook-for-the-analysis-of-run-3-data", ns: "user", same: true,
			vkName: "shadow-jupyter-notebook-for-the-analysis-of-run-3-7cf0e2a4", vkNamespace: "user", namespace: "user",
		},
		"a short pod in a namespace of 25 characters has <ns>-shadow": {
			pod: "web", ns: "summer-school-2026-group1",
			vkName: "web-summer-school-2026-group1", vkNamespace: "summer-school-2026-group1-shadow", vks: true,
		},
		"a longer pod of the same namespace goes to another shadow namespace in the VK, not in shadowgate": {
			pod: "notes", ns: "summer-school-2026-group1",
			vkName: "notes-summer-school-2026-group1", vkNamespace: "summer-school-2026-group1-shado",
			namespace: "summer-school-2026-group1-shadow",
		},
		"in a namespace of 31 characters the VK puts the shadow into the pod's own namespace": {
			pod: "web", ns: "physics-summer-school-2026-grp1",
			vkName: "web-physics-summer-sch-031708d5", vkNamespace: "physics-summer-school-2026-grp1",
			namespace: "physics-summer-school-2026-grp1-shadow",
		},
		"a pod name with a dot gets the VK's name of the pod with a hyphen there": {
			pod: "jupyter.lab", ns: "user", vkName: "jupyter-lab-user", vkNamespace: "user-shadow", namespace: "user-shadow",
		},
		"the pod with the hyphen keeps that name": {
			pod: "jupyter-lab", ns: "user", vkName: "jupyter-lab-user", vkNamespace: "user-shadow", vks: true,
		},
		"the VK collapses a double hyphen, so a--b and a-b share its name": {
			pod: "a--b", ns: "user", vkName: "a-b-user", vkNamespace: "user-shadow", namespace: "user-shadow",
		},
		"a pod name starting with a digit makes the VK a Service name the API server refuses": {
			pod: "0-web", ns: "user", vkName: "0-web-user", vkNamespace: "user-shadow", namespace: "user-shadow",
		},
		"a namespace with a double hyphen is collapsed by the VK onto another's": {
			pod: "web", ns: "team--a", vkName: "web-team-a", vkNamespace: "team-a-shadow",
		},
		"same-ns in a namespace of 53 characters or more: the VK refuses the pod": {
			pod: "web", ns: "department-of-physics-and-astronomy-summer-school-2026", same: true,
			vkRefuses: true, namespace: "department-of-physics-and-astronomy-summer-school-2026",
		},
		"same-ns where the VK's name fits but <name>-node would be 64 characters": {
			pod: "jupyter-notebook-for-the-analysis-of-run-3-data-x", ns: "ab", same: true,
			vkName: "shadow-jupyter-notebook-for-the-analysis-of-run-3-data-x-ab", vkNamespace: "ab", namespace: "ab",
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			name, ns := ShadowName(tc.pod, tc.ns, tc.same), ShadowNamespace(tc.ns, tc.same)
			if tc.vks {
				if name != tc.vkName || ns != tc.vkNamespace {
					t.Errorf("shadow %s/%s, the VK's is %s/%s", ns, name, tc.vkNamespace, tc.vkName)
				}
				if NodeConfigMapName(name) != tc.vkName+"-node" {
					t.Errorf("node ConfigMap %q, the VK writes %q", NodeConfigMapName(name), tc.vkName+"-node")
				}
				if hashed(name) {
					t.Errorf("the VK's name %q reads as shadowgate's own", name)
				}
			} else {
				if name == tc.vkName {
					t.Errorf("shadow name %q is the VK's, which this row says cannot be used", name)
				}
				if !hashed(name) || !strings.HasPrefix(name, shadowPrefix) {
					t.Errorf("shadow name %q is not shadow-...-<hash>", name)
				}
			}
			if tc.namespace != "" && ns != tc.namespace {
				t.Errorf("namespace %q, want %q", ns, tc.namespace)
			}
			if tc.namespace == "" && !tc.vks && !hashed(ns) {
				t.Errorf("namespace %q: the VK's cannot be used, so it should end in a hash", ns)
			}
			valid(t, name, ns)
		})
	}
}

// valid holds a shadow's names to what the API server takes: the Service name a DNS-1035
// label, the node ConfigMap's and the namespace DNS-1123 labels.
func valid(t *testing.T, name, ns string) {
	t.Helper()
	for _, msg := range validation.IsDNS1035Label(name) {
		t.Errorf("shadow name %q: %s", name, msg)
	}
	for _, msg := range validation.IsDNS1123Label(NodeConfigMapName(name)) {
		t.Errorf("node ConfigMap name %q: %s", NodeConfigMapName(name), msg)
	}
	for _, msg := range validation.IsDNS1123Label(ns) {
		t.Errorf("namespace %q: %s", ns, msg)
	}
}

func TestLongAndOddNamesAreLabelsEndingInAHash(t *testing.T) {
	for sentence, tc := range map[string]struct {
		pod, ns string
		same    bool
	}{
		"a namespace of 57 characters has no room for -shadow": {pod: "p", ns: strings.Repeat("n", 57)},
		"a namespace of 63 characters":                         {pod: "p", ns: strings.Repeat("n", 63)},
		"a pod name of 253 characters":                         {pod: strings.Repeat("p", 253), ns: "user"},
		"a pod name of 253 characters, same-ns":                {pod: strings.Repeat("p", 253), ns: "user", same: true},
		"a pod name of dotted labels":                          {pod: "a.b.c.d", ns: "user"},
		"upper case cannot happen in a pod name but is safe":   {pod: "Notebook", ns: "user"},
		"both at their longest, same-ns":                       {pod: strings.Repeat("p.", 126) + "p", ns: strings.Repeat("n", 63), same: true},
	} {
		t.Run(sentence, func(t *testing.T) {
			name, ns := ShadowName(tc.pod, tc.ns, tc.same), ShadowNamespace(tc.ns, tc.same)
			valid(t, name, ns)
			if !hashed(name) {
				t.Errorf("shadow name %q was cut or changed but does not end in a hash", name)
			}
			if !tc.same && len(tc.ns)+len(nsSuffix) > maxLabel && !hashed(ns) {
				t.Errorf("namespace %q was cut but does not end in a hash", ns)
			}
		})
	}
}

func TestNamesThatDifferOnlyPastTheCutDoNotCollide(t *testing.T) {
	for sentence, pair := range map[string][2][2]string{
		"two long pod names":                                  {{long("p") + "-1", "user"}, {long("p") + "-2", "user"}},
		"two long namespaces":                                 {{"pod", long("n") + "1"}, {"pod", long("n") + "2"}},
		"a dot and a hyphen in the same place":                {{"jupyter.lab", "user"}, {"jupyter-lab", "user"}},
		"a double hyphen and a single one":                    {{"a--b", "user"}, {"a-b", "user"}},
		"the same joined name from another pod and namespace": {{long("p") + "-a", "b"}, {long("p"), "a-b"}},
	} {
		t.Run(sentence, func(t *testing.T) {
			a, b := pair[0], pair[1]
			for _, same := range []bool{false, true} {
				if ShadowNamespace(a[1], same) == ShadowNamespace(b[1], same) && ShadowName(a[0], a[1], same) == ShadowName(b[0], b[1], same) {
					t.Errorf("pods %s/%s and %s/%s share the shadow %q (same-ns %v)", a[1], a[0], b[1], b[0], ShadowName(a[0], a[1], same), same)
				}
			}
		})
	}
	for sentence, pair := range map[string][2]string{
		"two long namespaces":                   {long("n") + "1", long("n") + "2"},
		"a double hyphen and a single one":      {"team--a", "team-a"},
		"a namespace and another one's -shadow": {"team-shadow", "team"},
	} {
		if ShadowNamespace(pair[0], false) == ShadowNamespace(pair[1], false) {
			t.Errorf("%s: %s and %s share the shadow namespace %q", sentence, pair[0], pair[1], ShadowNamespace(pair[0], false))
		}
	}
}

// Every pod of a namespace has its shadow in the one shadow namespace, however long its name:
// the VK's truncation splits them (TestTheVirtualKubeletsNames).
func TestOneShadowNamespacePerPodNamespace(t *testing.T) {
	for _, ns := range []string{"user", "summer-school-2026-group1", "physics-summer-school-2026-grp1", strings.Repeat("n", 63)} {
		want := ShadowNamespace(ns, false)
		for _, pod := range []string{"p", "notes", strings.Repeat("p", 60), strings.Repeat("p", 253)} {
			s, _ := render(t, fmt.Sprintf(sshNode, "true", "ssh"), offloadedPod(pod, ns, corev1.ContainerPort{ContainerPort: 8888}))
			for _, obj := range s.Objects() {
				if got := obj.GetNamespace(); got != want && obj.GetName() != want {
					t.Errorf("pod %s/%s: %s in %q, the namespace's other pods' shadows in %q", ns, pod, obj.GetName(), got, want)
				}
			}
		}
	}
}

func FuzzShadowName(f *testing.F) {
	f.Add("notebook", "user", false)
	f.Add("jupyter.lab", strings.Repeat("n", 63), true)
	f.Add(strings.Repeat("p", 253), "u", false)
	f.Add("0-web", "team--a", false)
	f.Fuzz(func(t *testing.T, pod, ns string, same bool) {
		// Kubernetes admits no other names, so no shadow is ever named after one.
		if len(validation.IsDNS1123Subdomain(pod)) > 0 || len(validation.IsDNS1123Label(ns)) > 0 {
			return
		}
		name, shadowNS := ShadowName(pod, ns, same), ShadowNamespace(ns, same)
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Fatalf("ShadowName(%q, %q, %v) = %q: %v", pod, ns, same, name, errs)
		}
		if errs := validation.IsDNS1123Label(NodeConfigMapName(name)); len(errs) > 0 {
			t.Fatalf("node ConfigMap of %q: %v", name, errs)
		}
		if errs := validation.IsDNS1123Label(shadowNS); len(errs) > 0 {
			t.Fatalf("ShadowNamespace(%q, %v) = %q: %v", ns, same, shadowNS, errs)
		}
		// A name is the VK's, <pod>-<ns> or shadow-<pod>-<ns>, or ends in a hash.
		vk := pod + "-" + ns
		if same {
			vk = shadowPrefix + vk
		}
		if name != vk && !hashed(name) {
			t.Fatalf("ShadowName(%q, %q, %v) = %q: neither the VK's name nor hashed", pod, ns, same, name)
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
