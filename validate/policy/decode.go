package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// The policy ConfigMap: its default name, and the key holding the document.
const (
	ConfigMapName = "shadowgate-policy"
	DataKey       = "policy.yaml"
)

// Document returns the policy document data holds: data itself, or, for a ConfigMap manifest,
// its data[DataKey]. The CLI's --policy takes either form.
func Document(data []byte) ([]byte, field.ErrorList) {
	var head struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &head); err == nil && head.Kind == "ConfigMap" {
		doc, ok := head.Data[DataKey]
		if !ok {
			return nil, field.ErrorList{field.Required(field.NewPath("data").Key(DataKey),
				"the ConfigMap holds no policy document; put it under data."+DataKey)}
		}
		return []byte(doc), nil
	}
	return data, nil
}

// Decode reads a policy document strictly and applies the defaults: unknown keys and wrong
// types are errors with their path, so a misspelt key never falls back to a default. Keys of
// the wrong shape are reported and dropped, and the rest is still decoded, so that
// validate.Policy can report every other problem of the document at once; the policy is nil
// only when there is nothing to judge. docPath prefixes every error path; nil means the
// document is the root. The rules on the values are validate.Policy's.
func Decode(doc []byte, docPath *field.Path) (*Policy, field.ErrorList) {
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(documentPath(docPath), "", "not valid YAML: "+err.Error())}
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, field.ErrorList{field.Invalid(documentPath(docPath), "", "not valid YAML: "+err.Error())}
	}
	top, ok := generic.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(documentPath(docPath), describe(generic),
			"the policy must be a mapping with a virtualNodes key")}
	}
	nodesPath := child(docPath, "virtualNodes")
	nodes, ok := top["virtualNodes"].(map[string]any)
	ignored := dropVirtualKubeletKeys(nodes, nodesPath)
	shapeErrs, _ := checkShape(top, reflect.TypeFor[Policy](), docPath)
	if _, present := top["virtualNodes"]; !present {
		if len(shapeErrs) == 0 {
			shapeErrs = field.ErrorList{field.Required(nodesPath, "list the virtual nodes this policy applies to, by node name")}
		}
		return nil, shapeErrs
	}
	p := &Policy{VirtualNodes: make(map[string]VirtualNode, len(nodes)), Ignored: ignored}
	if !ok {
		return p, shapeErrs // virtualNodes: null, an empty policy
	}
	for name, settings := range nodes {
		vn := Defaults()
		if settings != nil {
			b, _ := json.Marshal(settings) // re-encoding a decoded, shape-checked value cannot fail
			if err := json.Unmarshal(b, &vn); err != nil {
				return nil, append(shapeErrs, field.Invalid(nodesPath.Key(name), "", err.Error()))
			}
		}
		normalizeChoices(&vn.Network)
		p.VirtualNodes[name] = vn
	}
	return p, shapeErrs
}

// virtualKubeletKeys are the keys of the virtual kubelet's Network block (interLink's
// pkg/virtualkubelet Network) that configure what shadowgate does not render: the wstunnel
// shadow and the full mesh. Each says why shadowgate ignores it.
var virtualKubeletKeys = map[string]string{
	"WSTunnelExecutable":     "it is the wstunnel shadow's client download",
	"WstunnelTemplatePath":   "it is the wstunnel shadow's template",
	"WstunnelCommand":        "it is the wstunnel shadow's client command",
	"MeshScriptTemplatePath": "it is the full mesh's script, which the SSH shadow replaces with the reverse tunnel",
	"ServiceCIDR":            "it configures the full mesh",
	"PodCIDRCluster":         "it configures the full mesh",
	"DNSServiceIP":           "it configures the full mesh",
	"WireguardGoURL":         "it configures the full mesh",
	"WgToolURL":              "it configures the full mesh",
	"Slirp4netnsURL":         "it configures the full mesh",
	"UnshareMode":            "it configures the full mesh",
}

// dropVirtualKubeletKeys removes from each node's Network block the keys of virtualKubeletKeys,
// which the strict decoder would refuse, and says where each was.
func dropVirtualKubeletKeys(nodes map[string]any, nodesPath *field.Path) []string {
	var ignored []string
	for _, name := range sortedKeys(nodes) {
		settings, _ := nodes[name].(map[string]any)
		network, _ := settings["Network"].(map[string]any)
		for _, key := range sortedKeys(network) {
			if why, ok := virtualKubeletKeys[key]; ok {
				delete(network, key)
				ignored = append(ignored, fmt.Sprintf("%s is ignored: shadowgate reads the virtual kubelet's Network block but not this key, as %s",
					nodesPath.Key(name).Child("Network", key), why))
			}
		}
	}
	return ignored
}

// normalizeChoices trims and lower-cases the options that take one of a fixed set of words, as
// the virtual kubelet reads them, so a block written for it means the same here.
func normalizeChoices(n *Network) {
	for _, v := range []*string{&n.ShadowMode, &n.SSH.Auth, &n.SSH.ForwardMode, &n.SSH.NodeDiscovery, &n.SSH.Reverse.NodeExec, &n.SSH.Reverse.Sshd} {
		*v = strings.ToLower(strings.TrimSpace(*v))
	}
	for _, kind := range []string{FrontDoorIngress, FrontDoorHTTPRoute} {
		if strings.EqualFold(strings.TrimSpace(n.FrontDoor.Kind), kind) {
			n.FrontDoor.Kind = kind
		}
	}
}

func documentPath(docPath *field.Path) *field.Path {
	if docPath == nil {
		return field.NewPath(DataKey)
	}
	return docPath
}

func child(parent *field.Path, name string) *field.Path {
	if parent == nil {
		return field.NewPath(name)
	}
	return parent.Child(name)
}

// checkShape walks a decoded document against the Go type it will be decoded into and
// reports every key the type does not know and every value of the wrong kind, removing them
// from the document. keep is false when v itself has the wrong kind and must be removed.
func checkShape(v any, t reflect.Type, p *field.Path) (errs field.ErrorList, keep bool) {
	if v == nil {
		return nil, true // an empty value leaves the default in place
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(v, t.Elem(), p)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{field.Invalid(p, describe(v), "must be a mapping")}, false
		}
		known := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name := strings.Split(f.Tag.Get("json"), ",")[0]; name != "-" {
				known[name] = f.Type
			}
		}
		for _, k := range sortedKeys(m) {
			ft, ok := known[k]
			if !ok {
				errs = append(errs, unknownKey(child(p, k), k, known))
				delete(m, k)
				continue
			}
			errs = append(errs, checkChild(m, k, ft, child(p, k))...)
		}
		return errs, true
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{field.Invalid(p, describe(v), "must be a mapping")}, false
		}
		for _, k := range sortedKeys(m) {
			errs = append(errs, checkChild(m, k, t.Elem(), p.Key(k))...)
		}
		return errs, true
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return field.ErrorList{field.Invalid(p, describe(v), "must be a list")}, false
		}
		for i, e := range l {
			elemErrs, keep := checkShape(e, t.Elem(), p.Index(i))
			errs = append(errs, elemErrs...)
			if !keep {
				l[i] = nil // decodes as the element's zero value, which validation then reports
			}
		}
		return errs, true
	case reflect.String:
		if _, ok := v.(string); !ok {
			return field.ErrorList{field.Invalid(p, describe(v), "must be a string; quote it")}, false
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return field.ErrorList{field.Invalid(p, describe(v), "must be true or false")}, false
		}
	case reflect.Int:
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			return field.ErrorList{field.Invalid(p, describe(v), "must be a whole number")}, false
		}
	}
	return nil, true
}

// checkChild checks m[k] and removes it when it has the wrong kind.
func checkChild(m map[string]any, k string, t reflect.Type, p *field.Path) field.ErrorList {
	errs, keep := checkShape(m[k], t, p)
	if !keep {
		delete(m, k)
	}
	return errs
}

func unknownKey(p *field.Path, key string, known map[string]reflect.Type) *field.Error {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	detail := "unknown key, so it would be ignored and its option left at the default"
	if guess := closest(key, names); guess != "" {
		detail += fmt.Sprintf("; did you mean %s?", guess)
	}
	return field.Invalid(p, key, detail+" Known keys here: "+strings.Join(names, ", "))
}

// closest returns the known key nearest to a misspelt one, if any is near enough to be a typo.
func closest(key string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describe renders a decoded value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return fmt.Sprint(x)
	}
}
