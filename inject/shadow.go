package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Shadow is everything applied for one offloaded pod, each object with its TypeMeta set so it
// serializes as is for server-side apply.
type Shadow struct {
	Namespace     *corev1.Namespace // nil with interlink.eu/shadow-same-ns
	NodeConfigMap *corev1.ConfigMap
	Service       *corev1.Service // nil when no TCP port is forwarded
	// Ingress or HTTPRoutes publish the forwarded ports outside the cluster, with the policy's
	// front door (policy.Network.HasFrontDoor); both are empty without one.
	Ingress       *networkingv1.Ingress
	HTTPRoutes    []*gatewayv1.HTTPRoute
	NetworkPolicy *networkingv1.NetworkPolicy
	Deployment    *appsv1.Deployment
	// Scripts is the scripts ConfigMap the Deployment mounts (ScriptsConfigMap), shared by
	// every shadow of the namespace, as the credential copies are.
	Scripts *corev1.ConfigMap

	credentials []Credential
}

// Credential is a Secret or ConfigMap the shadow mounts, to be copied under the same name
// from the webhook's namespace into the shadow's (Namespace) before the Deployment is applied.
type Credential struct {
	Kind      string // "Secret" or "ConfigMap"
	Name      string
	Namespace string // the shadow's namespace, where the copy goes
	// TLS marks the front door's certificate (FrontDoor.TLSSecret), a kubernetes.io/tls
	// Secret; a key or keytab is kept in an Opaque or kubernetes.io/ssh-auth one.
	TLS bool
}

// buildShadow returns the shadow of an admitted pod (validate.Pod returned o and allowed the
// pod), or nil when the pod needs none: it is on no SSH-shadow node, asks for pod-vpn, or has
// neither a TCP port to forward (with EnableTunnel) nor a reverse forward. The warnings are the
// builder's own; validate.Pod's (UDP ports skipped) are not repeated.
func buildShadow(pod *corev1.Pod, o *validate.Offload) (*Shadow, []string) {
	if o == nil || !o.Node.Network.SSHShadow() || o.PodVPN {
		return nil, nil
	}
	ports, warnings := forwardedPorts(pod, o)
	if len(ports) == 0 && !o.WantsReverse() {
		return nil, warnings
	}
	b := newBuilder(pod, o, ports)
	s := &Shadow{
		NodeConfigMap: b.nodeConfigMap(),
		Service:       b.service(),
		Ingress:       b.ingress(),
		HTTPRoutes:    b.httpRoutes(),
		NetworkPolicy: b.networkPolicy(),
		Deployment:    b.deployment(),
		Scripts:       ScriptsConfigMap(b.namespaceName),
	}
	s.credentials = b.credentials(s.Ingress)
	if !o.SameNamespace {
		s.Namespace = b.namespace()
	}
	s.Deployment.Annotations[AnnotationRendered] = renderedHash(s)
	return s, warnings
}

// AnnotationRendered, on the shadow Deployment, is a hash of the shadow as the policy in force
// and this shadowgate rendered it: the Deployment's, Service's, NetworkPolicy's and front door's specs,
// without the labels and annotations the shadow pod carries from the offloaded pod. The
// reconciler renders each live pod's shadow again and rolls the shadows whose hash differs
// (webhook's Reconciler): a policy change or a shadowgate that renders differently, never a
// label put on the pod since its admission. A Deployment's own annotation changes no pod
// template, so recording it restarts nothing.
const AnnotationRendered = "interlink.eu/shadow-rendered"

// renderedHash is the value of AnnotationRendered for s.
func renderedHash(s *Shadow) string {
	deployment := s.Deployment.Spec // a shallow copy: only its template's metadata is replaced
	deployment.Template.ObjectMeta = metav1.ObjectMeta{}
	specs := []any{&deployment, s.NetworkPolicy.Spec}
	if s.Service != nil {
		specs = append(specs, s.Service.Spec)
	}
	if s.Ingress != nil {
		specs = append(specs, s.Ingress.Annotations[AnnotationClusterIssuer], s.Ingress.Spec)
	}
	for _, r := range s.HTTPRoutes {
		specs = append(specs, r.Spec)
	}
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(specs); err != nil {
		panic(err) // API types always marshal
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Objects returns the shadow's objects in apply order: Namespace, node ConfigMap, Service,
// Ingress or HTTPRoutes, NetworkPolicy, Deployment, leaving out the ones it does not have. The NetworkPolicy goes
// before the Deployment, so the shadow pod never runs unfenced. Credentials and the scripts
// ConfigMap go between the node ConfigMap and the Deployment; they are not among these: copying
// credentials needs the source objects, and both are shared by the namespace's shadows rather
// than this shadow's own.
func (s *Shadow) Objects() []client.Object {
	var objs []client.Object
	if s.Namespace != nil {
		objs = append(objs, s.Namespace)
	}
	objs = append(objs, s.NodeConfigMap)
	if s.Service != nil {
		objs = append(objs, s.Service)
	}
	if s.Ingress != nil {
		objs = append(objs, s.Ingress)
	}
	for _, r := range s.HTTPRoutes {
		objs = append(objs, r)
	}
	return append(objs, s.NetworkPolicy, s.Deployment)
}

// Credentials returns what to copy into the shadow's namespace: the key or keytab Secret, and
// the Krb5ConfigMap and KnownHostsConfigMap the shadow mounts. Empty when the policy sets
// ReplicateCredentials: false, where the site provisions them itself.
func (s *Shadow) Credentials() []Credential { return s.credentials }

// credentials are the node's (Credentials) but the front door's wildcard certificate when the
// shadow has no Ingress to name it (no port published: interlink.eu/front-door-ports: none).
func (b *builder) credentials(ing *networkingv1.Ingress) []Credential {
	return slices.DeleteFunc(Credentials(&b.o.Node.Network, b.namespaceName), func(c Credential) bool { return c.TLS && ing == nil })
}

// Credentials are the Secret and ConfigMaps a shadow of a virtual node with network mounts
// as copies in namespace, and the front door's wildcard certificate its Ingress names (when it
// has one): none unless the policy replicates them.
func Credentials(network *policy.Network, namespace string) []Credential {
	sshPolicy := &network.SSH
	if !sshPolicy.ReplicateCredentials {
		return nil
	}
	var creds []Credential
	add := func(kind, name string) {
		if name != "" {
			creds = append(creds, Credential{Kind: kind, Name: name, Namespace: namespace})
		}
	}
	add("Secret", sshPolicy.CredentialSecret())
	if sshPolicy.Auth == policy.AuthKerberos {
		add("ConfigMap", sshPolicy.Krb5ConfigMap)
	}
	add("ConfigMap", sshPolicy.KnownHostsConfigMap)
	if network.HasFrontDoor() && network.FrontDoor.Kind == policy.FrontDoorIngress && network.IngressTLS {
		if name := network.FrontDoor.TLSSecret; name != "" {
			creds = append(creds, Credential{Kind: "Secret", Name: name, Namespace: namespace, TLS: true})
		}
	}
	return creds
}

// meta is the metadata every shadow object carries.
func (b *builder) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   b.namespaceName,
		Labels:      b.labels(),
		Annotations: map[string]string{AnnotationShadowFor: b.pod.Namespace + "/" + b.pod.Name},
	}
}

func (b *builder) labels() map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelPodUID:    string(b.pod.UID),
	}
}

// namespace is the shared <ns>-shadow namespace. It carries no pod UID and no shadow-for:
// every shadow of the pod's namespace lives there, so it belongs to none of them. It enforces
// the restricted Pod Security Standard, which every shadow pod meets, and carries the marker
// that says which pod namespace it was made for.
func (b *builder) namespace() *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{
			Name: b.namespaceName,
			Labels: map[string]string{
				LabelManagedBy:                       ManagedBy,
				LabelShadowNamespaceFor:              b.pod.Namespace,
				"pod-security.kubernetes.io/enforce": "restricted",
			},
		},
	}
}

// nodeConfigMap is created with an empty compute-node: the job is not placed yet, and a
// recreated shadow must not inherit the node of a job that has gone.
func (b *builder) nodeConfigMap() *corev1.ConfigMap {
	m := b.meta(NodeConfigMapName(b.name))
	m.Labels[validate.LabelShadowRole] = validate.ShadowRoleNode
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: m,
		Data:       map[string]string{validate.ComputeNodeKey: ""},
	}
}
