package podtemplate

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
)

// Paths where the webhook server serves the validators.
const (
	WatcherPath = "/validate-watch-my-domain-v1alpha1-watcher"
	PodSetPath  = "/validate-demo-k8s-io-v1alpha1-podset"
	EnvoyPath   = "/validate-example-com-v1-envoy"
)

// The validators are webhooks of the EnvoyConfig validator's configuration
// (package validate), whose caBundle the operator keeps, and likewise see
// nothing of kube-system or the operator's own namespace.
//
// +kubebuilder:webhook:path=/validate-watch-my-domain-v1alpha1-watcher,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=watch.my.domain,resources=watchers,verbs=create;update,versions=v1alpha1,name=validate.watcher.watch.my.domain,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=kube-envoy-controller-webhook,serviceNamespace=kube-envoy-controller,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-envoy-controller"]}]}}`
// +kubebuilder:webhook:path=/validate-demo-k8s-io-v1alpha1-podset,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=demo.k8s.io,resources=podsets,verbs=create;update,versions=v1alpha1,name=validate.podset.demo.k8s.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=kube-envoy-controller-webhook,serviceNamespace=kube-envoy-controller,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-envoy-controller"]}]}}`
// +kubebuilder:webhook:path=/validate-example-com-v1-envoy,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=example.com,resources=envoys,verbs=create;update,versions=v1,name=validate.envoy.example.com,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=kube-envoy-controller-webhook,serviceNamespace=kube-envoy-controller,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-envoy-controller"]}]}}`

// Validator refuses a create or an update of one kind whose pod content
// the API server would refuse later, in every pod made from it.
type Validator[T client.Object] struct {
	Decoder admission.Decoder
	// New returns an empty object of the kind.
	New func() T
	// Check returns what the API server would refuse, each naming its field.
	Check func(T) field.ErrorList
	// Spec returns what Check judges of an object: an update that leaves it
	// as it is is admitted.
	Spec func(T) any
}

// NewWatcherWebhook returns the Watcher validator as mgr's webhook server serves it.
func NewWatcherWebhook(mgr ctrl.Manager) *admission.Webhook {
	return &admission.Webhook{Handler: &Validator[*watchv1alpha1.Watcher]{
		Decoder: admission.NewDecoder(mgr.GetScheme()),
		New:     func() *watchv1alpha1.Watcher { return &watchv1alpha1.Watcher{} },
		Check:   Watcher,
		Spec:    func(w *watchv1alpha1.Watcher) any { return &w.Spec },
	}, RecoverPanic: ptr.To(true)}
}

// NewPodSetWebhook returns the PodSet validator as mgr's webhook server serves it.
func NewPodSetWebhook(mgr ctrl.Manager) *admission.Webhook {
	return &admission.Webhook{Handler: &Validator[*demov1alpha1.PodSet]{
		Decoder: admission.NewDecoder(mgr.GetScheme()),
		New:     func() *demov1alpha1.PodSet { return &demov1alpha1.PodSet{} },
		Check:   PodSet,
		Spec:    func(ps *demov1alpha1.PodSet) any { return ps.Spec.Template },
	}, RecoverPanic: ptr.To(true)}
}

// NewEnvoyWebhook returns the Envoy validator as mgr's webhook server serves it.
func NewEnvoyWebhook(mgr ctrl.Manager) *admission.Webhook {
	return &admission.Webhook{Handler: envoyValidator(admission.NewDecoder(mgr.GetScheme())), RecoverPanic: ptr.To(true)}
}

// envoyValidator is the Envoy validator: it judges an Envoy's resources,
// and admits an update that leaves them as they are.
func envoyValidator(d admission.Decoder) *Validator[*examplev1.Envoy] {
	return &Validator[*examplev1.Envoy]{
		Decoder: d,
		New:     func() *examplev1.Envoy { return &examplev1.Envoy{} },
		Check:   Envoy,
		Spec:    func(e *examplev1.Envoy) any { return &e.Spec.Resources },
	}
}

// Handle implements admission.Handler.
func (v *Validator[T]) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	obj := v.New()
	if err := v.Decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		if !obj.GetDeletionTimestamp().IsZero() {
			return admission.Allowed("the object is being deleted")
		}
		old := v.New()
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		// An object stored before these checks may still be labelled,
		// annotated or scaled.
		if equality.Semantic.DeepEqual(v.Spec(old), v.Spec(obj)) {
			return admission.Allowed("the pod content is unchanged")
		}
	}
	errs := v.Check(obj)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("every pod made from it would be refused: %s", errs.ToAggregate()))
}
