package collector

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

func TestOnlyWhatTwoSweepsFoundUnusedIsCollected(t *testing.T) {
	ns := collectKey{kind: "Namespace", name: "a-shadow"}
	cp := collectKey{kind: "Secret", namespace: "b-shadow", name: "hpc-ssh-key"}
	for name, c := range map[string]struct {
		last, now map[collectKey]objectVersion
		want      []collectKey
	}{
		"Unused once is not collected yet.": {
			now: map[collectKey]objectVersion{ns: {uid: "1"}},
		},
		"Unused twice, as the same object, is collected.": {
			last: map[collectKey]objectVersion{ns: {uid: "1"}, cp: {uid: "2", resourceVersion: "5"}},
			now:  map[collectKey]objectVersion{ns: {uid: "1"}, cp: {uid: "2", resourceVersion: "5"}},
			want: []collectKey{ns, cp},
		},
		"An object created again under the same name in between starts over.": {
			last: map[collectKey]objectVersion{ns: {uid: "1"}},
			now:  map[collectKey]objectVersion{ns: {uid: "9"}},
		},
		"A copy written in between starts over.": {
			last: map[collectKey]objectVersion{cp: {uid: "2", resourceVersion: "5"}},
			now:  map[collectKey]objectVersion{cp: {uid: "2", resourceVersion: "6"}},
		},
		"Used again in between, it is not collected.": {
			last: map[collectKey]objectVersion{ns: {uid: "1"}},
			now:  map[collectKey]objectVersion{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := twiceUnused(c.last, c.now)
			sortKeys := func(a, b collectKey) int { return cmpKeys(a, b) }
			slices.SortFunc(got, sortKeys)
			slices.SortFunc(c.want, sortKeys)
			if !slices.Equal(got, c.want) {
				t.Errorf("collected %v, want %v", got, c.want)
			}
		})
	}
}

func cmpKeys(a, b collectKey) int {
	switch {
	case a.String() < b.String():
		return -1
	case a.String() > b.String():
		return 1
	}
	return 0
}

func TestOnlyCopiesShadowgateCreatedAreCollectable(t *testing.T) {
	for name, c := range map[string]struct {
		labels, annotations map[string]string
		want                bool
	}{
		"A copy shadowgate created is collectable.": {
			labels:      map[string]string{inject.LabelCreatedByShadowgate: "true"},
			annotations: map[string]string{validate.AnnotationReplicatedFrom: "shadowgate-system/hpc-ssh-key"},
			want:        true,
		},
		"An adopted copy, marked but not created by shadowgate, is not.": {
			annotations: map[string]string{validate.AnnotationReplicatedFrom: "shadowgate-system/hpc-ssh-key"},
		},
		"A Secret labelled but not marked as a copy is not.": {
			labels: map[string]string{inject.LabelCreatedByShadowgate: "true"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Labels: c.labels, Annotations: c.annotations}
			if got := createdCopy(obj); got != c.want {
				t.Errorf("createdCopy = %v, want %v", got, c.want)
			}
		})
	}
}

func TestMountedCredentialsNamesEveryVolumeSource(t *testing.T) {
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hpc-ssh-key"}}},
		{Name: "hosts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hpc-known-hosts"}}}},
		{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cern-keytab"}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "krb5-config"}}},
		}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}
	want := []string{"Secret/hpc-ssh-key", "ConfigMap/hpc-known-hosts", "Secret/cern-keytab", "ConfigMap/krb5-config"}
	if got := shadows.MountedCredentials(spec); !slices.Equal(got, want) {
		t.Errorf("mountedCredentials = %v, want %v", got, want)
	}
}

func TestHeldNamespacesAreForgottenByAgeThenOldestFirst(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	held := map[string]time.Time{
		"stale":  now.Add(-2 * copiesMemory),
		"oldest": now.Add(-3 * time.Minute),
		"older":  now.Add(-2 * time.Minute),
		"newest": now,
	}
	forgetOldest(held, now.Add(-copiesMemory), 2)
	if _, ok := held["stale"]; ok || len(held) != 2 || held["older"].IsZero() || held["newest"].IsZero() {
		t.Errorf("kept %v, want older and newest", held)
	}
}

// A copy of the front door's wildcard certificate is used while a shadow Ingress of its
// namespace names it, though no shadow pod mounts it: the collector leaves it, and takes it
// once no Ingress there names it. An Ingress shadowgate does not manage uses nothing.
func TestATLSCopyIsUsedWhileAShadowIngressNamesIt(t *testing.T) {
	copyKey := collectKey{kind: "Secret", namespace: "user-shadow", name: "apps-wildcard-tls"}
	ingress := func(managed bool) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "notebook-user", Namespace: "user-shadow"},
			Spec: networkingv1.IngressSpec{TLS: []networkingv1.IngressTLS{{Hosts: []string{"h.apps.example.org"}, SecretName: "apps-wildcard-tls"}}}}
		if managed {
			ing.Labels = map[string]string{inject.LabelManagedBy: inject.ManagedBy}
		}
		return ing
	}
	for name, c := range map[string]struct {
		objs       []client.Object
		wantUnused bool
	}{
		"Named by a shadow Ingress, the copy is used.":        {objs: []client.Object{ingress(true)}},
		"Named by no Ingress, the copy is unused.":            {wantUnused: true},
		"Named by an Ingress not shadowgate's, it is unused.": {objs: []client.Object{ingress(false)}, wantUnused: true},
	} {
		t.Run(name, func(t *testing.T) {
			col := &Collector{reader: shadowtest.Client(c.objs...).Build()}
			unused, err := col.copyUnused(t.Context(), copyKey)
			if err != nil {
				t.Fatal(err)
			}
			if unused != c.wantUnused {
				t.Errorf("copyUnused = %v, want %v", unused, c.wantUnused)
			}
		})
	}
	used := shadows.UsedCredentials(ingress(true))
	if !slices.Equal(used, []string{"Secret/apps-wildcard-tls"}) {
		t.Errorf("UsedCredentials of the Ingress = %v, want its TLS Secret", used)
	}
}

// A copy shadowgate made is found and collected once no shadow uses it, also after the policy
// stopped naming it (the front door turned off, its TLSSecret renamed): under the names shadows
// were seen using, and those of the sources in the credentials namespace. What decides is the
// copy's marks, read in a shadow namespace only a shadowgate writes copies into.
func TestACopyThePolicyNoLongerNamesIsCollected(t *testing.T) {
	const ns, name = "user-shadow", "apps-wildcard-tls"
	key := collectKey{kind: "Secret", namespace: ns, name: name}
	copyOf := func(created bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations:       map[string]string{validate.AnnotationReplicatedFrom: "shadowgate-system/" + name},
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))}, Type: corev1.SecretTypeTLS}
		if created {
			s.Labels = map[string]string{inject.LabelCreatedByShadowgate: "true"}
		}
		return s
	}
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shadowgate-system"}, Type: corev1.SecretTypeTLS}
	// The front door is off: the policy names neither WildcardDNS nor TLSSecret.
	node := policy.Defaults()
	node.Network.EnableTunnel, node.Network.ShadowMode = true, policy.ShadowModeSSH
	node.Network.SSH.ReplicateCredentials = true
	pol := &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": node}}
	for sentence, c := range map[string]struct {
		copy       *corev1.Secret
		sources    []client.Object
		seenInUse  bool
		wantUnused bool
	}{
		"A copy whose source is kept in the credentials namespace is unused.": {
			copy: copyOf(true), sources: []client.Object{source}, wantUnused: true,
		},
		"A copy a shadow was seen using is unused once none uses it.": {
			copy: copyOf(true), seenInUse: true, wantUnused: true,
		},
		"A Secret of that name shadowgate did not create (adopted) stays.": {
			copy: copyOf(false), sources: []client.Object{source}, seenInUse: true,
		},
		"Without the source, and never seen in use, the name is not looked for.": {
			copy: copyOf(true),
		},
		"A Secret of a type shadowgate does not copy, in the credentials namespace, names no copy.": {
			copy: copyOf(true), sources: []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shadowgate-system"}, Type: "helm.sh/release.v1"}},
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			col := New(nil, shadowtest.Client(c.copy).Build(), shadows.Identity{}, nil, shadowtest.FixedPolicy{Policy: pol},
				"shadowgate-system", shadowtest.Client(c.sources...).Build(), time.Minute, nil)
			if c.seenInUse {
				col.rememberUses(shadowMounts{ns: {"Secret/" + name: true}}, time.Now().Add(-time.Minute))
			}
			unused, err := col.unusedCopies(t.Context(), map[string]bool{ns: true}, shadowMounts{}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, found := unused[key]; found != c.wantUnused {
				t.Errorf("unused = %v, want %s unused: %v", unused, key, c.wantUnused)
			}
		})
	}
}
