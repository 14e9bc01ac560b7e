package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/validate"
)

// The scripts ConfigMap holds every script the shadow's containers run, once per shadow
// namespace rather than in every Deployment: the scripts are most of a Deployment's size, and
// the same for every shadow. It is immutable and named after a hash of its content, so a
// shadowgate whose scripts changed writes a new one beside the old, and a Deployment's pod
// template (which mounts it by name) changes with the scripts it runs.
const (
	// ScriptsConfigMapPrefix starts the scripts ConfigMap's name; a hash of the content ends it.
	ScriptsConfigMapPrefix = "shadowgate-scripts-"
	// ShadowRoleScripts is the scripts ConfigMap's validate.LabelShadowRole.
	ShadowRoleScripts = "scripts"

	volumeScripts = "scripts"
	scriptsDir    = mountRoot + "/scripts"
)

// shadowScripts are the files of the scripts ConfigMap: what the containers and their readiness
// probes run, and what their scripts hand on (exec-relay.sh to socat, reverse-hop.sh and
// reverse-node.sh to the hops of the reverse tunnel).
var shadowScripts = []script{scriptWaitForNode, scriptForward, scriptExecRelay, scriptKerberos,
	scriptReverse, scriptReverseHop, scriptReverseNode, scriptProbe, scriptWaitReason}

// scriptsData is the scripts ConfigMap's data, scriptsName its name.
var scriptsData, scriptsName = func() (map[string]string, string) {
	data := make(map[string]string, len(shadowScripts))
	for _, s := range shadowScripts {
		data[s.name] = s.text
	}
	return data, ScriptsConfigMapName(data)
}()

// ScriptsConfigMapName is the name of a scripts ConfigMap holding data: ScriptsConfigMapPrefix
// and hashLen hex digits of the SHA-256 of its keys and values, in key order, each ended by a
// NUL (which neither holds), so no two contents share a name.
func ScriptsConfigMapName(data map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k + "\x00" + data[k] + "\x00"))
	}
	return ScriptsConfigMapPrefix + hex.EncodeToString(h.Sum(nil))[:hashLen]
}

// ScriptsConfigMap is the scripts ConfigMap of a shadow in namespace. It carries no pod UID
// and no shadow-for: every shadow of the namespace mounts it, so it belongs to none of them.
func ScriptsConfigMap(namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      scriptsName,
			Namespace: namespace,
			Labels:    map[string]string{LabelManagedBy: ManagedBy, validate.LabelShadowRole: ShadowRoleScripts},
		},
		Immutable: ptr.To(true),
		Data:      maps.Clone(scriptsData),
	}
}

// IsScriptsConfigMap says whether obj is marked as a scripts ConfigMap shadowgate writes: its
// labels and its name's prefix.
func IsScriptsConfigMap(obj metav1.Object) bool {
	l := obj.GetLabels()
	return l[LabelManagedBy] == ManagedBy && l[validate.LabelShadowRole] == ShadowRoleScripts &&
		strings.HasPrefix(obj.GetName(), ScriptsConfigMapPrefix)
}

// scriptPath is where a shadow container finds s: in the scripts volume, under its file name.
func scriptPath(s script) string { return path.Join(scriptsDir, s.name) }

// runScript is the command that runs s as the container (or probe) name: s's shell sources
// the file, so $0, by which the scripts name their container in logs and status files, is
// name, and the arguments after name are the script's.
func runScript(s script, name string, args ...string) []string {
	return append([]string{s.shell, "-c", ". " + scriptPath(s), name}, args...)
}

// scriptsVolume mounts the scripts ConfigMap. The files keep the default mode: each is run
// by its shell (runScript), never executed itself.
func scriptsVolume() corev1.Volume {
	return corev1.Volume{Name: volumeScripts, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: scriptsName},
	}}}
}

func scriptsMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: volumeScripts, MountPath: scriptsDir, ReadOnly: true}
}
