package podrun

import (
	"fmt"
	"net/netip"
	"os/user"
	"sort"
	"strconv"
	"strings"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/downward"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// EnvSources is what a container's env is resolved from.
type EnvSources struct {
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	// Services give the Service-link variables.
	Services corev1listers.ServiceLister
}

// envList keeps the kubelet's precedence (later wins) and the first-seen order.
type envList struct {
	names  []string
	values map[string]string
}

func (e *envList) set(k, v string) {
	if _, ok := e.values[k]; !ok {
		e.names = append(e.names, k)
	}
	e.values[k] = v
}

func (e *envList) lookup(k string) (string, bool) { v, ok := e.values[k]; return v, ok }

func (e *envList) strings() []string {
	out := make([]string, 0, len(e.names))
	for _, k := range e.names {
		out = append(out, k+"="+e.values[k])
	}
	return out
}

// resolveEnv is the kubelet's makeEnvironmentVariables: envFrom, then env in order with $(VAR)
// expansion over what is defined so far and the Service links, then the Service links not
// overridden; then what the container runtime adds (PATH, HOSTNAME, HOME) when unset. An error
// names the reference that failed; the kubelet reports it as CreateContainerConfigError.
func resolveEnv(pod *corev1.Pod, c *corev1.Container, src EnvSources, podIP string, home string) ([]string, error) {
	env := &envList{values: map[string]string{}}
	svcEnv, err := serviceLinks(pod, src.Services)
	if err != nil {
		return nil, err
	}
	for _, from := range c.EnvFrom {
		if err := addEnvFrom(env, pod.Namespace, from, src); err != nil {
			return nil, err
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.lookup(name); ok {
			return v, true
		}
		return svcEnv.lookup(name)
	}
	for _, ev := range c.Env {
		if ev.ValueFrom == nil {
			env.set(ev.Name, expand(ev.Value, lookup))
			continue
		}
		v, ok, err := valueFrom(pod, ev, src, podIP)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", ev.Name, err)
		}
		if ok {
			env.set(ev.Name, v)
		}
	}
	for _, k := range svcEnv.names {
		if _, ok := env.lookup(k); !ok {
			env.set(k, svcEnv.values[k])
		}
	}
	for k, v := range map[string]string{"PATH": defaultPath, "HOSTNAME": podHostname(pod), "HOME": home} {
		if _, ok := env.lookup(k); !ok {
			env.set(k, v)
		}
	}
	return env.strings(), nil
}

func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

// homeOf is the home the container runtime gives a user: its passwd entry's, else /.
func homeOf(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil && u.HomeDir != "" {
		return u.HomeDir
	}
	return "/"
}

func addEnvFrom(env *envList, ns string, from corev1.EnvFromSource, src EnvSources) error {
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		cm, err := src.ConfigMaps.ConfigMaps(ns).Get(from.ConfigMapRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				return nil
			}
			return fmt.Errorf("envFrom configmap %s/%s: %w", ns, from.ConfigMapRef.Name, err)
		}
		data = cm.Data
	case from.SecretRef != nil:
		s, err := src.Secrets.Secrets(ns).Get(from.SecretRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				return nil
			}
			return fmt.Errorf("envFrom secret %s/%s: %w", ns, from.SecretRef.Name, err)
		}
		data = map[string]string{}
		for k, b := range s.Data {
			data[k] = string(b)
		}
	default:
		return nil
	}
	for _, k := range sortedKeys(data) {
		name := from.Prefix + k
		// The kubelet skips (and reports) keys that are not valid variable names.
		if len(validation.IsEnvVarName(name)) > 0 {
			continue
		}
		env.set(name, data[k])
	}
	return nil
}

func valueFrom(pod *corev1.Pod, ev corev1.EnvVar, src EnvSources, podIP string) (string, bool, error) {
	vf := ev.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := downward.Field(pod, vf.FieldRef.FieldPath, podIP)
		return v, err == nil, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := src.ConfigMaps.ConfigMaps(pod.Namespace).Get(ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("configmap %s/%s has no key %q", pod.Namespace, ref.Name, ref.Key)
		}
		return v, ok, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := src.Secrets.Secrets(pod.Namespace).Get(ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("secret %s/%s has no key %q", pod.Namespace, ref.Name, ref.Key)
		}
		return string(v), ok, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom (fieldRef, configMapKeyRef and secretKeyRef are)")
}

// serviceLinks are the docker-link style variables the kubelet gives for the Services of the
// pod's namespace (when enableServiceLinks, the default) and for default/kubernetes always.
func serviceLinks(pod *corev1.Pod, services corev1listers.ServiceLister) (*envList, error) {
	env := &envList{values: map[string]string{}}
	if services == nil {
		return env, nil
	}
	all, err := services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	for _, s := range all {
		master := s.Namespace == "default" && s.Name == "kubernetes"
		if !master && !(links && s.Namespace == pod.Namespace) {
			continue
		}
		addr, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || len(s.Spec.Ports) == 0 {
			continue // headless: no Service-link variables, as the kubelet gives none
		}
		name := envName(s.Name)
		ip := addr.String()
		env.set(name+"_SERVICE_HOST", ip)
		env.set(name+"_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port)))
		for i, p := range s.Spec.Ports {
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			port := strconv.Itoa(int(p.Port))
			url := proto + "://" + ip + ":" + port
			if p.Name != "" {
				env.set(name+"_SERVICE_PORT_"+envName(p.Name), port)
			}
			if i == 0 {
				env.set(name+"_PORT", url)
			}
			prefix := name + "_PORT_" + port + "_" + strings.ToUpper(proto)
			env.set(prefix, url)
			env.set(prefix+"_PROTO", proto)
			env.set(prefix+"_PORT", port)
			env.set(prefix+"_ADDR", ip)
		}
	}
	return env, nil
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// expand is the kubelet's $(VAR) expansion: a defined name is replaced, an undefined one is
// left as written, and $$ escapes a dollar.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			ref := s[i : i+3+end]
			if v, ok := lookup(s[i+2 : i+2+end]); ok {
				b.WriteString(v)
			} else {
				b.WriteString(ref)
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
