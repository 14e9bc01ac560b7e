package inject

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/interlink-hq/shadowgate/validate"
)

func TestScriptsConfigMapName(t *testing.T) {
	changed := maps.Clone(scriptsData)
	changed[scriptForward.name] += "# one more line\n"
	fewer := maps.Clone(scriptsData)
	delete(fewer, scriptProbe.name)
	for name, tc := range map[string]struct {
		a, b map[string]string
		same bool
	}{
		"the same content has the same name":                             {scriptsData, maps.Clone(scriptsData), true},
		"a changed script changes the name":                              {scriptsData, changed, false},
		"a script fewer changes the name":                                {scriptsData, fewer, false},
		"text moved from a key's name into its value changes the name":   {map[string]string{"a": "bc"}, map[string]string{"ab": "c"}, false},
		"text moved from one key's value into the next changes the name": {map[string]string{"a": "xy", "b": "z"}, map[string]string{"a": "x", "b": "yz"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if a, b := ScriptsConfigMapName(tc.a), ScriptsConfigMapName(tc.b); (a == b) != tc.same {
				t.Errorf("names %s and %s, want the same: %v", a, b, tc.same)
			}
		})
	}
	t.Run("the name is the prefix and ten hex digits, a DNS-1123 label", func(t *testing.T) {
		if !regexp.MustCompile(`^shadowgate-scripts-[0-9a-f]{10}$`).MatchString(scriptsName) {
			t.Errorf("name %q", scriptsName)
		}
		if errs := validation.IsDNS1123Label(scriptsName); len(errs) > 0 {
			t.Errorf("name %q: %v", scriptsName, errs)
		}
	})
}

func TestScriptsConfigMap(t *testing.T) {
	cm := ScriptsConfigMap("user-shadow")
	for name, check := range map[string]func() bool{
		"it is immutable":                           func() bool { return cm.Immutable != nil && *cm.Immutable },
		"it is in the shadow's namespace":           func() bool { return cm.Namespace == "user-shadow" },
		"it is named after its content":             func() bool { return cm.Name == ScriptsConfigMapName(cm.Data) },
		"it is marked shadowgate's scripts":         func() bool { return IsScriptsConfigMap(cm) },
		"it belongs to no pod":                      func() bool { return cm.Labels[LabelPodUID] == "" && cm.Annotations[AnnotationShadowFor] == "" },
		"it is no node ConfigMap":                   func() bool { return cm.Labels[validate.LabelShadowRole] != validate.ShadowRoleNode },
		"its content is that of the embedded files": func() bool { return maps.Equal(cm.Data, scriptsData) },
		"a change to one changes no later one": func() bool {
			changed := ScriptsConfigMap("user-shadow")
			changed.Data[scriptForward.name] = "changed"
			return ScriptsConfigMap("user-shadow").Data[scriptForward.name] == scriptForward.text
		},
	} {
		t.Run(name, func(t *testing.T) {
			if !check() {
				t.Errorf("%s: %+v", name, cm.ObjectMeta)
			}
		})
	}
	for name, obj := range map[string]*corev1.ConfigMap{
		"a ConfigMap without the role label is not a scripts ConfigMap": {},
		"a ConfigMap of another name is not a scripts ConfigMap":        ScriptsConfigMap("user-shadow"),
	} {
		t.Run(name, func(t *testing.T) {
			obj = obj.DeepCopy()
			if obj.Name == "" {
				obj.Name, obj.Labels = scriptsName, map[string]string{LabelManagedBy: ManagedBy}
			} else {
				obj.Name = "settings"
			}
			if IsScriptsConfigMap(obj) {
				t.Errorf("%s/%v taken for a scripts ConfigMap", obj.Name, obj.Labels)
			}
		})
	}
}

// TestEveryShadowMountsTheScriptsAndCarriesNone holds every golden case's Deployment to what
// the scripts ConfigMap is for: every container mounts it and runs, and has its probe run, a
// file it holds; no script text is left in the Deployment.
func TestEveryShadowMountsTheScriptsAndCarriesNone(t *testing.T) {
	for _, c := range shadowCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s, _ := c.shadowOf(t)
			if s.Scripts == nil || s.Scripts.Name != scriptsName || s.Scripts.Namespace != s.Deployment.Namespace {
				t.Fatalf("scripts ConfigMap %+v, want %s in %s", s.Scripts, scriptsName, s.Deployment.Namespace)
			}
			spec := s.Deployment.Spec.Template.Spec
			var volume *corev1.ConfigMapVolumeSource
			for _, v := range spec.Volumes {
				if v.Name == volumeScripts {
					volume = v.ConfigMap
				}
			}
			if volume == nil || volume.Name != s.Scripts.Name {
				t.Errorf("the scripts volume is %+v, want ConfigMap %s", volume, s.Scripts.Name)
			}
			for _, ctr := range append(spec.InitContainers, spec.Containers...) {
				mounted := false
				for _, m := range ctr.VolumeMounts {
					mounted = mounted || (m.Name == volumeScripts && m.MountPath == scriptsDir && m.ReadOnly)
				}
				if !mounted {
					t.Errorf("%s does not mount the scripts volume read-only at %s", ctr.Name, scriptsDir)
				}
				commandScript(t, s.Scripts, ctr.Command)
				if p := ctr.ReadinessProbe; p != nil {
					commandScript(t, s.Scripts, p.Exec.Command)
				}
			}
			data, err := json.Marshal(s.Deployment)
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range shadowScripts {
				if first, _, _ := strings.Cut(sc.text, "\n"); strings.Contains(string(data), first+`\n`) {
					t.Errorf("the Deployment carries the text of %s", sc.name)
				}
			}
		})
	}
}

// `shadowgate render | kubectl apply -f -` keeps the whole object in its last-applied
// annotation, which, with the other annotations, the API server bounds to 256 KiB: the scripts
// ConfigMap stays well under it, with room for the scripts to grow.
func TestTheScriptsConfigMapCanBeAppliedByKubectl(t *testing.T) {
	const annotationsLimit, room = 256 << 10, 48 << 10
	b, err := json.Marshal(ScriptsConfigMap("user-shadow"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > annotationsLimit-room {
		t.Errorf("the scripts ConfigMap is %d bytes as JSON: kubectl apply's last-applied annotation holds at most %d, and this leaves less than %d bytes of room", len(b), annotationsLimit, room)
	}
}
