package certs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const overlayDir = "../manifests/overlays/cert-manager"

// The checked-in overlay is what the code generates, file for file: a change to
// certmanager.go without `go generate ./certs`, or a hand edit of the overlay, fails here.
func TestCertManagerOverlayIsGenerated(t *testing.T) {
	want, err := CertManagerOverlay()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(overlayDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	var names []string
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %v, the generator writes %v; run `go generate ./certs` and remove the rest", overlayDir, got, names)
	}
	for name, content := range want {
		onDisk, err := os.ReadFile(filepath.Join(overlayDir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if diff := cmp.Diff(strings.Split(string(content), "\n"), strings.Split(string(onDisk), "\n")); diff != "" {
			t.Errorf("%s/%s drifted from certs/certmanager.go; run `go generate ./certs` (-generated +checked in):\n%s", overlayDir, name, diff)
		}
	}
}

// The serving Certificate is only useful if its DNS name is the one the API server dials and
// its Secret the one the Deployment mounts: hold the names to manifests/base.
func TestCertManagerNamesMatchBase(t *testing.T) {
	svc := baseObject(t, "service.yaml", "Service")
	if svc.GetName() != ServiceName || svc.GetNamespace() != Namespace {
		t.Errorf("base Service is %s/%s, certs expects %s/%s", svc.GetNamespace(), svc.GetName(), Namespace, ServiceName)
	}
	deploy := baseObject(t, "deployment.yaml", "Deployment")
	volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
	var secrets []string
	for _, v := range volumes {
		if name, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
			secrets = append(secrets, name)
		}
	}
	if !slices.Equal(secrets, []string{ServingSecretName}) || len(volumes) != 1 {
		t.Errorf("base Deployment mounts Secrets %v (volumes[0] is patched optional), the serving Certificate writes %q", secrets, ServingSecretName)
	}
	// The overlay appends --cert-manager-certificate to containers[0]'s args.
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatal("base Deployment has no containers")
	}
	if args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args"); len(args) == 0 || args[0] != "serve" {
		t.Errorf("base Deployment's first container runs %v, the overlay gives its flag to serve", args)
	}
	if deploy.GetName() != workloadName {
		t.Errorf("base Deployment is %q, the overlay patches %q", deploy.GetName(), workloadName)
	}
	if sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName"); sa != workloadName {
		t.Errorf("base Deployment runs as ServiceAccount %q, the overlay lets %q read Certificates", sa, workloadName)
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		cfg := baseObject(t, "webhooks.yaml", kind)
		if cfg.GetName() != webhookConfigName {
			t.Errorf("base %s is %q, the overlay patches %q", kind, cfg.GetName(), webhookConfigName)
		}
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			name, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "name")
			ns, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace")
			if name != ServiceName || ns != Namespace {
				t.Errorf("%s webhook %v calls Service %s/%s, the certificate is for %s", kind, h.(map[string]any)["name"], ns, name, servingDNSName)
			}
		}
	}
}

// The chain hangs together by name: self-signed Issuer -> CA Certificate -> its Secret -> CA
// Issuer -> serving Certificate, which inject-ca-from names.
func TestCertManagerObjectsChain(t *testing.T) {
	issuers := map[string]*cmapi.Issuer{}
	certs := map[string]*cmapi.Certificate{}
	for _, o := range CertManagerObjects() {
		switch o := o.(type) {
		case *cmapi.Issuer:
			issuers[o.Name] = o
		case *cmapi.Certificate:
			certs[o.Name] = o
		}
	}
	serving := certs[ServingCertificateName]
	if serving == nil || InjectCAFrom != serving.Namespace+"/"+serving.Name {
		t.Fatalf("inject-ca-from %q names no Certificate of CertManagerObjects", InjectCAFrom)
	}
	caIssuer := issuers[serving.Spec.IssuerRef.Name]
	if caIssuer == nil || caIssuer.Spec.CA == nil {
		t.Fatalf("the serving Certificate's issuer %q is not a CA Issuer", serving.Spec.IssuerRef.Name)
	}
	var ca *cmapi.Certificate
	for _, c := range certs {
		if c.Spec.SecretName == caIssuer.Spec.CA.SecretName {
			ca = c
		}
	}
	if ca == nil || !ca.Spec.IsCA {
		t.Fatalf("no CA Certificate writes the CA Issuer's Secret %q", caIssuer.Spec.CA.SecretName)
	}
	if root := issuers[ca.Spec.IssuerRef.Name]; root == nil || root.Spec.SelfSigned == nil {
		t.Errorf("the CA Certificate's issuer %q is not a self-signed Issuer", ca.Spec.IssuerRef.Name)
	}
	if !slices.Equal(serving.Spec.DNSNames, []string{"shadowgate.shadowgate-system.svc"}) {
		t.Errorf("serving DNS names %v, want the name the API server dials", serving.Spec.DNSNames)
	}
}

func baseObject(t *testing.T, file, kind string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../manifests/base", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			t.Fatalf("manifests/base/%s has no %s", file, kind)
		}
		if err != nil {
			t.Fatalf("manifests/base/%s: %v", file, err)
		}
		if u.GetKind() == kind {
			return &u
		}
	}
}
