package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/interlink-hq/shadowgate/inject"
)

// ShadowAudit is how the shadow objects in a namespace's shadow namespace stand against the
// pods of that namespace, matched by pod UID.
type ShadowAudit struct {
	Pods       int      // pods stored
	Objects    int      // shadow objects found
	Incomplete []string // stored pods lacking one of their shadow objects
	Orphans    []string // shadow objects whose pod is not stored
}

func (a ShadowAudit) String() string {
	return fmt.Sprintf("%d pods, %d shadow objects; %d pods with an incomplete shadow %v; %d orphan objects %v",
		a.Pods, a.Objects, len(a.Incomplete), firstFew(a.Incomplete), len(a.Orphans), firstFew(a.Orphans))
}

// wholeShadow is what each pod with a port has in its shadow namespace.
var wholeShadow = []string{"ConfigMap", "Deployment", "Service"}

// Audit lists the pods of namespace and every object labelled as shadowgate's in its shadow
// namespace, and reports stored pods without their whole shadow (a Deployment, a Service and
// a node ConfigMap) and shadow objects without a pod.
func Audit(ctx context.Context, cs kubernetes.Interface, namespace string) (ShadowAudit, error) {
	var a ShadowAudit
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return a, err
	}
	shadowNS := inject.ShadowNamespace(namespace, false)
	managed := metav1.ListOptions{LabelSelector: inject.LabelManagedBy + "=" + inject.ManagedBy}
	have := map[string][]string{} // pod UID -> kinds of its shadow objects
	record := func(kind string, o metav1.Object) {
		uid := o.GetLabels()[inject.LabelPodUID]
		if uid == "" {
			return // a credential copy or the scripts ConfigMap, shared by the namespace's shadows
		}
		have[uid] = append(have[uid], kind)
		a.Objects++
	}
	deployments, err := cs.AppsV1().Deployments(shadowNS).List(ctx, managed)
	if err != nil {
		return a, err
	}
	for i := range deployments.Items {
		record("Deployment", &deployments.Items[i])
	}
	services, err := cs.CoreV1().Services(shadowNS).List(ctx, managed)
	if err != nil {
		return a, err
	}
	for i := range services.Items {
		record("Service", &services.Items[i])
	}
	configMaps, err := cs.CoreV1().ConfigMaps(shadowNS).List(ctx, managed)
	if err != nil {
		return a, err
	}
	for i := range configMaps.Items {
		record("ConfigMap", &configMaps.Items[i])
	}
	live := map[string]bool{}
	for _, p := range pods.Items {
		live[string(p.UID)] = true
		kinds := slices.Clone(have[string(p.UID)])
		slices.Sort(kinds)
		if !slices.Equal(kinds, wholeShadow) { // two of a kind and none of another is not whole
			a.Incomplete = append(a.Incomplete, fmt.Sprintf("%s (has %v)", p.Name, kinds))
		}
	}
	for uid, kinds := range have {
		if !live[uid] {
			a.Orphans = append(a.Orphans, fmt.Sprintf("%v of pod UID %s", kinds, uid))
		}
	}
	sort.Strings(a.Orphans)
	a.Pods = len(pods.Items)
	return a, nil
}

func firstFew(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + ", ..."
	}
	return strings.Join(s, ", ")
}
