package applier

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/interlink-hq/shadowgate/inject"
)

// scriptsApplier is an Applier whose API server answers each apply with answer, counting them
// by dry run or not.
func scriptsApplier(t *testing.T, answer error) (*Applier, map[bool]int) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	applies := map[bool]int{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, _ runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			o := &client.ApplyOptions{}
			o.ApplyOptions(opts)
			applies[len(o.DryRun) > 0]++
			return answer
		},
	}).Build()
	return &Applier{client: c, reader: c, scheme: scheme}, applies
}

func TestScriptsConfigMapIsAppliedOncePerNamespaceAndMemory(t *testing.T) {
	// scriptsApply is one applyScripts of a shadow namespace's scripts ConfigMap, after the
	// clock moved on by after.
	type scriptsApply struct {
		namespace string
		dryRun    bool
		after     time.Duration
	}
	for name, tc := range map[string]struct {
		steps       []scriptsApply
		applies     int
		dryRunApply int
	}{
		"two shadows of one namespace apply it once": {
			steps:   []scriptsApply{{namespace: "user-shadow"}, {namespace: "user-shadow"}},
			applies: 1,
		},
		"shadows of two namespaces apply one each": {
			steps:   []scriptsApply{{namespace: "user-shadow"}, {namespace: "team-shadow"}},
			applies: 2,
		},
		"it is applied again once the memory has passed": {
			steps:   []scriptsApply{{namespace: "user-shadow"}, {namespace: "user-shadow", after: namespaceMemory}},
			applies: 2,
		},
		"a dry run applies with dry-run and is not remembered": {
			steps:   []scriptsApply{{namespace: "user-shadow", dryRun: true}, {namespace: "user-shadow"}},
			applies: 1, dryRunApply: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, applies := scriptsApplier(t, nil)
			now := time.Now()
			a.scripts.now = func() time.Time { return now }
			for _, step := range tc.steps {
				now = now.Add(step.after)
				if err := a.applyScripts(context.Background(), inject.ScriptsConfigMap(step.namespace), step.dryRun); err != nil {
					t.Fatal(err)
				}
			}
			if applies[false] != tc.applies || applies[true] != tc.dryRunApply {
				t.Errorf("%d applies and %d dry-run applies, want %d and %d", applies[false], applies[true], tc.applies, tc.dryRunApply)
			}
		})
	}
}

// An immutable ConfigMap of the scripts' name with other content is the one apply the API
// server refuses: the denial says what is wrong and how to mend it, and nothing is remembered.
func TestAForeignImmutableScriptsConfigMapIsRefusedWithTheRemedy(t *testing.T) {
	cm := inject.ScriptsConfigMap("user-shadow")
	refused := apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), cm.Name,
		field.ErrorList{field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set")})
	a, applies := scriptsApplier(t, refused)
	for range 2 {
		err := a.applyScripts(context.Background(), cm, false)
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "kubectl delete configmap -n user-shadow "+cm.Name) {
			t.Errorf("error %v, want a conflict naming the remedy", err)
		}
	}
	if applies[false] != 2 {
		t.Errorf("%d applies, want 2: a refused apply is not remembered", applies[false])
	}
}
