package collector

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

func TestUnusedScriptsConfigMaps(t *testing.T) {
	now := time.Now()
	old := metav1.NewTime(now.Add(-time.Hour))
	scripts := func(ns, name string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + name), ResourceVersion: "3",
			CreationTimestamp: old, Labels: map[string]string{inject.LabelManagedBy: inject.ManagedBy, validate.LabelShadowRole: inject.ShadowRoleScripts}}}
	}
	const current, previous = inject.ScriptsConfigMapPrefix + "0123456789", inject.ScriptsConfigMapPrefix + "9876543210"
	uses := shadowMounts{"user-shadow": {"ConfigMap/" + current: true, "Secret/hpc-ssh-key": true}}
	for name, tc := range map[string]struct {
		item   func() metav1.PartialObjectMetadata
		unused map[collectKey]objectVersion // what the sweep has found unused already
		want   bool
	}{
		"one no shadow Deployment mounts, an upgrade's leftover, is unused": {
			item: func() metav1.PartialObjectMetadata { return scripts("user-shadow", previous) }, want: true,
		},
		"one a shadow Deployment of its namespace mounts is kept": {
			item: func() metav1.PartialObjectMetadata { return scripts("user-shadow", current) },
		},
		"one mounted only by shadows of another namespace is unused": {
			item: func() metav1.PartialObjectMetadata { return scripts("team-shadow", current) }, want: true,
		},
		"one made less than a period ago is kept, as its Deployment may be on its way": {
			item: func() metav1.PartialObjectMetadata {
				cm := scripts("user-shadow", previous)
				cm.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
				return cm
			},
		},
		"one being deleted is left alone": {
			item: func() metav1.PartialObjectMetadata {
				cm := scripts("user-shadow", previous)
				cm.DeletionTimestamp = &old
				return cm
			},
		},
		"one without the scripts role is never collected": {
			item: func() metav1.PartialObjectMetadata {
				cm := scripts("user-shadow", previous)
				delete(cm.Labels, validate.LabelShadowRole)
				return cm
			},
		},
		"one not named as scripts ConfigMaps are is never collected": {
			item: func() metav1.PartialObjectMetadata { return scripts("user-shadow", "settings") },
		},
		"one in a namespace that goes whole goes with it": {
			item:   func() metav1.PartialObjectMetadata { return scripts("gone-shadow", previous) },
			unused: map[collectKey]objectVersion{{kind: "Namespace", name: "gone-shadow"}: {uid: "n"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			item := tc.item()
			got := unusedScripts([]metav1.PartialObjectMetadata{item}, uses, tc.unused, now, time.Minute)
			key := collectKey{kind: "ConfigMap", namespace: item.Namespace, name: item.Name, scripts: true}
			v, found := got[key]
			if found != tc.want || len(got) > 1 {
				t.Fatalf("unused %v, want %s unused: %v", got, key, tc.want)
			}
			if found && (v.uid != item.UID || v.resourceVersion != item.ResourceVersion) {
				t.Errorf("found as %+v, want the UID and resourceVersion read", v)
			}
		})
	}
}

func TestMissingScriptsConfigMapsAreTheMountedCurrentOnesThatAreGone(t *testing.T) {
	current := inject.ScriptsConfigMap("").Name
	previous := inject.ScriptsConfigMapPrefix + "0000000000"
	item := func(ns, name string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	deleting := item("user-shadow", current)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, tc := range map[string]struct {
		uses  shadowMounts
		items []metav1.PartialObjectMetadata
		want  []string
	}{
		"a namespace whose shadows mount the current scripts, which are there, needs nothing": {
			uses: shadowMounts{"user-shadow": {"ConfigMap/" + current: true}}, items: []metav1.PartialObjectMetadata{item("user-shadow", current)},
		},
		"a namespace whose shadows mount the current scripts, which are gone, gets them again": {
			uses: shadowMounts{"user-shadow": {"ConfigMap/" + current: true}}, items: []metav1.PartialObjectMetadata{item("team-shadow", current)},
			want: []string{"user-shadow"},
		},
		"scripts being deleted count as gone": {
			uses: shadowMounts{"user-shadow": {"ConfigMap/" + current: true}}, items: []metav1.PartialObjectMetadata{deleting},
			want: []string{"user-shadow"},
		},
		"an earlier shadowgate's scripts, gone, cannot be made again": {
			uses: shadowMounts{"user-shadow": {"ConfigMap/" + previous: true}},
		},
		"a namespace whose shadows mount no scripts needs none": {
			uses: shadowMounts{"user-shadow": {"Secret/hpc-ssh-key": true}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := missingScripts(tc.uses, tc.items); !slices.Equal(got, tc.want) {
				t.Errorf("missing in %v, want %v", got, tc.want)
			}
		})
	}
}
