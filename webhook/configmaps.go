package webhook

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/validate"
)

var configMapVersionKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")

// ConfigMapValidator serves /validate-configmaps: the policy ConfigMap must hold a valid
// policy, and a node ConfigMap's compute-node must be a hostname or IP literal, since the
// shadow passes it to ssh.
type ConfigMapValidator struct {
	configs policystore.Configs
}

var _ admission.Handler = (*ConfigMapValidator)(nil)

// NewConfigMapValidator is /validate-configmaps' handler, deciding by the policy policies
// holds and by fixed, whose PolicyRef names the policy ConfigMap.
func NewConfigMapValidator(policies policystore.Policies, fixed validate.Config) *ConfigMapValidator {
	return &ConfigMapValidator{configs: policystore.Configs{Policies: policies, Fixed: fixed}}
}

// Handle implements admission.Handler.
func (v *ConfigMapValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	cm, err := objectOf[corev1.ConfigMap](req, configMapVersionKind)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	// A valid policy this serve cannot carry out would be refused at its next reload, so it is
	// refused here too. No namespace's labels are read: neither the policy ConfigMap's rules
	// nor a node ConfigMap's compute node depend on them.
	cfg, _ := v.configs.Now(ctx, "")
	d, inTime := decideBy(ctx, len(req.Object.Raw), func() validate.Decision { d, _ := validate.Object(cm, cfg); return d })
	if !inTime {
		return tooLate(ctx)
	}
	return respond(configMapVersionKind.GroupKind(), objectName(cm), d)
}
