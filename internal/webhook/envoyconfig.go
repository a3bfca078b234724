package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
)

// ValidatePath is where the webhook server serves the EnvoyConfig validator.
const ValidatePath = "/validate-example-com-v1-envoyconfig"

// ValidatingConfiguration is the name of the generated ValidatingWebhookConfiguration.
const ValidatingConfiguration = "kube-envoy-controller-validator"

// The validator sees only EnvoyConfigs, and none in kube-system or the
// operator's own namespace, so that an operator outage blocks nothing else
// (README: "What a webhook outage blocks").
//
// +kubebuilder:webhookconfiguration:mutating=false,name=kube-envoy-controller-validator
// +kubebuilder:webhook:path=/validate-example-com-v1-envoyconfig,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=example.com,resources=envoyconfigs,verbs=create;update,versions=v1,name=validate.envoyconfig.example.com,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=kube-envoy-controller-webhook,serviceNamespace=kube-envoy-controller,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-envoy-controller"]}]}}`

// EnvoyConfigValidator refuses, at kubectl apply, an EnvoyConfig whose
// resources do not decode strictly into Envoy's v3 protos, fail Envoy's
// validation rules, or reference route configurations or clusters that exist
// nowhere in its fleet. The message names the resource and the field. The
// EnvoyConfig controller checks again, for objects that got in another way.
type EnvoyConfigValidator struct {
	// Client reads the fleet's other EnvoyConfigs (from the cache).
	Client  client.Reader
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *EnvoyConfigValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	cfg := &examplev1.EnvoyConfig{}
	if err := v.Decoder.Decode(req, cfg); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var list examplev1.EnvoyConfigList
	if err := v.Client.List(ctx, &list, client.InNamespace(cfg.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	var others []xds.Config
	for _, o := range list.Items {
		if o.Spec.EnvoyRef != cfg.Spec.EnvoyRef || o.Name == cfg.Name || !o.DeletionTimestamp.IsZero() {
			continue
		}
		name := o.Namespace + "/" + o.Name
		resources, errs := xds.Parse(name, o.Spec.Resources)
		if len(errs) == 0 {
			others = append(others, xds.Config{Name: name, Created: o.CreationTimestamp.Time, Resources: resources})
		}
	}
	errs := xds.Check(cfg.Namespace+"/"+cfg.Name, cfg.Spec.Resources, others)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return admission.Denied(fmt.Sprintf("EnvoyConfig %s is invalid: %s", cfg.Name, strings.Join(msgs, "; ")))
}
