package validate_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// credentialPolicy has an SSH node replicating a key, one replicating a keytab, one
// replicating nothing and a wstunnel node.
const credentialPolicy = `virtualNodes:
  key-vk:
    Network: {EnableTunnel: true, ShadowMode: ssh, SSH: {LoginHost: login, User: alice, KeySecret: site-key}}
  krb-vk:
    Network: {EnableTunnel: true, ShadowMode: ssh, SSH: {LoginHost: login, User: alice, Auth: kerberos, KeytabSecret: site-keytab, Principal: alice@EXAMPLE.ORG}}
  own-vk:
    Network: {EnableTunnel: true, ShadowMode: ssh, SSH: {LoginHost: login, User: alice, KeySecret: own-key, ReplicateCredentials: false}}
  wst-vk:
    Network: {EnableTunnel: true}
`

func replicationRefused(docPath *field.Path, node string) *field.Error {
	return field.Invalid(docPath.Child("virtualNodes").Key(node).Child("Network", "SSH", "ReplicateCredentials"), true,
		"shadowgate runs with --credential-replication=false, so it may not write Secrets and cannot copy this node's credentials "+
			"into shadow namespaces: set ReplicateCredentials: false and provide the credentials in each shadow namespace yourself, "+
			"or install shadowgate with credential replication (chart value credentialReplication: true, or kustomize without the no-credential-replication component)")
}

func TestCredentialRulesOnAPolicy(t *testing.T) {
	pol := mustPolicy(t, credentialPolicy)
	data := field.NewPath("data").Key(policy.DataKey)
	for name, c := range map[string]struct {
		rules   validate.CredentialRules
		docPath *field.Path
		want    field.ErrorList
	}{
		"by default every node may replicate": {validate.CredentialRules{}, data, nil},
		"without replication each SSH node that asks for it is refused, under the ConfigMap's key": {validate.CredentialRules{WithoutReplication: true}, data,
			field.ErrorList{replicationRefused(data, "key-vk"), replicationRefused(data, "krb-vk")}},
		"a bare document's paths start at the document, as policy check prints them": {validate.CredentialRules{WithoutReplication: true}, nil,
			field.ErrorList{replicationRefused(nil, "key-vk"), replicationRefused(nil, "krb-vk")}},
		"refusing copies into pod namespaces refuses no policy": {validate.CredentialRules{WithoutCopiesInPodNamespaces: true}, data, nil},
	} {
		if d := cmp.Diff(c.want, validate.Policy(pol, c.rules, c.docPath)); d != "" {
			t.Errorf("%s: errors (-want +got):\n%s", name, d)
		}
	}
}

// sameNSRefused is the refusal of a pod or template in namespace user on node with secret, at
// meta's annotations.
func sameNSRefused(meta *field.Path, node, secret string) *field.Error {
	return field.Forbidden(meta.Child("annotations").Key(validate.AnnotationShadowSameNS),
		"the shadow would live in namespace user and the site's credentials (Secret "+secret+" of virtual node "+node+") would be copied there, "+
			"where everyone who can create pods or read Secrets could read them: remove the annotation, and the shadow lives in user-shadow; "+
			"this shadowgate runs with --credentials-in-pod-namespaces=false")
}

// Pods and every workload's template are judged by the same rule, through validate.Object as
// the webhook's endpoints and shadowgate check judge them.
func TestCredentialRulesOnPodsAndTemplates(t *testing.T) {
	pol := mustPolicy(t, credentialPolicy)
	refuse := validate.CredentialRules{WithoutCopiesInPodNamespaces: true}
	sameNS := map[string]string{validate.AnnotationShadowSameNS: "true"}
	template := func(node string, a map[string]string) corev1.PodTemplateSpec {
		p := podOn(node, a)
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: p.Annotations}, Spec: p.Spec}
	}
	inUser := metav1.ObjectMeta{Name: "w", Namespace: "user"}
	podMeta := field.NewPath("metadata")
	for name, c := range map[string]struct {
		rules validate.CredentialRules
		obj   runtime.Object
		want  field.ErrorList
	}{
		"a shadow-same-ns pod on a node that replicates its key is refused": {refuse, podOn("key-vk", sameNS),
			field.ErrorList{sameNSRefused(podMeta, "key-vk", "site-key")}},
		"under Kerberos the keytab is named": {refuse, podOn("krb-vk", sameNS),
			field.ErrorList{sameNSRefused(podMeta, "krb-vk", "site-keytab")}},
		"by default the same pod is admitted, as the guide's notebook":  {validate.CredentialRules{}, podOn("key-vk", sameNS), nil},
		"a node that replicates nothing copies nothing":                 {refuse, podOn("own-vk", sameNS), nil},
		"a wstunnel node has no SSH shadow and no credentials":          {refuse, podOn("wst-vk", sameNS), nil},
		"a pod whose shadow lives in <ns>-shadow has nothing beside it": {refuse, podOn("key-vk", nil), nil},
		"a pod-vpn pod gets no shadow":                                  {refuse, podOn("key-vk", map[string]string{validate.AnnotationShadowSameNS: "true", validate.AnnotationPodVPN: "true"}), nil},
		"a Deployment's template is refused under its own path": {refuse,
			&appsv1.Deployment{ObjectMeta: inUser, Spec: appsv1.DeploymentSpec{Template: template("key-vk", sameNS)}},
			field.ErrorList{sameNSRefused(field.NewPath("spec", "template", "metadata"), "key-vk", "site-key")}},
		"a CronJob's template is refused under the job template's path": {refuse,
			&batchv1.CronJob{ObjectMeta: inUser, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template("key-vk", sameNS)}}}},
			field.ErrorList{sameNSRefused(field.NewPath("spec", "jobTemplate", "spec", "template", "metadata"), "key-vk", "site-key")}},
		"by default the Deployment is admitted": {validate.CredentialRules{},
			&appsv1.Deployment{ObjectMeta: inUser, Spec: appsv1.DeploymentSpec{Template: template("key-vk", sameNS)}}, nil},
	} {
		d, judged := validate.Object(c.obj, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{Name: policy.ConfigMapName}, Credentials: c.rules})
		if !judged {
			t.Fatalf("%s: not judged", name)
		}
		if diff := cmp.Diff(c.want, d.Errors); diff != "" {
			t.Errorf("%s: errors (-want +got):\n%s", name, diff)
		}
	}
}

// The policy ConfigMap is judged under the rules too, its document parsed once.
func TestCredentialRulesOnThePolicyConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policy.ConfigMapName}, Data: map[string]string{policy.DataKey: credentialPolicy}}
	data := field.NewPath("data").Key(policy.DataKey)
	d, _ := validate.Object(cm, validate.Config{Policy: mustPolicy(t, credentialPolicy), PolicyRef: validate.PolicyRef{Name: policy.ConfigMapName}, Credentials: validate.CredentialRules{WithoutReplication: true}})
	if diff := cmp.Diff(field.ErrorList{replicationRefused(data, "key-vk"), replicationRefused(data, "krb-vk")}, d.Errors); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// A front door's wildcard certificate is never copied into a pod's own namespace, whatever
// --credentials-in-pod-namespaces says: its key serves every host under the domain.
func TestAWildcardCertificateIsNeverCopiedBesideThePod(t *testing.T) {
	pol := mustPolicy(t, `virtualNodes:
  door-vk:
    Network: {EnableTunnel: true, ShadowMode: ssh, WildcardDNS: apps.example.org, FrontDoor: {TLSSecret: apps-wildcard, IngressClassName: nginx, ControllerNamespace: ingress-nginx},
      SSH: {LoginHost: login, User: alice, KeySecret: site-key}}
`)
	refused := field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(validate.AnnotationShadowSameNS),
		"the shadow would live in namespace user and the front door's wildcard certificate (Secret apps-wildcard of virtual node door-vk) would be copied there, "+
			"where its key, which serves every host under the domain, other tenants' pods' among them, could be read: remove the annotation, and the shadow lives in user-shadow")}
	for name, c := range map[string]struct {
		rules validate.CredentialRules
		ann   map[string]string
		want  field.ErrorList
	}{
		"By default a shadow-same-ns pod is refused.":                  {validate.CredentialRules{}, map[string]string{validate.AnnotationShadowSameNS: "true"}, refused},
		"Without copies in pod namespaces it is refused all the same.": {validate.CredentialRules{WithoutCopiesInPodNamespaces: true}, map[string]string{validate.AnnotationShadowSameNS: "true"}, refused},
		"A pod whose shadow lives in <ns>-shadow is admitted.":         {validate.CredentialRules{}, nil, nil},
		"A shadow-same-ns pod publishing no port has no Ingress and no certificate copied: it is admitted.": {validate.CredentialRules{},
			map[string]string{validate.AnnotationShadowSameNS: "true", validate.AnnotationFrontDoorPorts: validate.FrontDoorNone}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := validate.Object(podOn("door-vk", c.ann), validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{Name: policy.ConfigMapName}, Credentials: c.rules})
			if diff := cmp.Diff(c.want, d.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
