package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
)

// Path is where the webhook server serves the injector.
const Path = "/mutate-v1-pod"

// The in-cluster webhook configuration (config/webhook) is generated from
// these markers. Only pods of namespaces labelled
// kube-envoy-controller.io/injection=enabled are sent, never those of
// kube-system or of the operator's own namespace.
//
// The injector is called once per pod (reinvocationPolicy Never). With
// IfNeeded the API server called it a second time for every pod it
// injected: after a webhook changes a pod, the API server runs its built-in
// admission again, whose ServiceAccount plugin mounts the token into the
// sidecar, and that change alone reinvokes IfNeeded webhooks. The built-in
// plugins run again whatever the policy, so the sidecars get their token
// all the same. What Never gives up: a webhook called after this one that
// adds the annotation naming a Watcher, or a label a Watcher selects, does
// not get that Watcher injected; such webhooks must run first.
//
// +kubebuilder:webhookconfiguration:mutating=true,name=kube-envoy-controller-injector
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups="",resources=pods,verbs=create,versions=v1,name=inject.watch.my.domain,admissionReviewVersions=v1,reinvocationPolicy=Never,timeoutSeconds=5,serviceName=kube-envoy-controller-webhook,serviceNamespace=kube-envoy-controller,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kube-envoy-controller.io/injection","operator":"In","values":["enabled"]},{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-envoy-controller"]}]}}`

// The injector checks the namespace's opt-in itself, from the manager's
// cache of namespaces' metadata: a webhook configuration installed or
// edited without the namespaceSelector must not inject everywhere.
//
// +kubebuilder:rbac:groups=watch.my.domain,resources=watchers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch

// Injector answers the API server's admission requests for new pods.
type Injector struct {
	// Client reads Watchers and Envoys from the manager's cache.
	Client client.Reader
	// APIReader reads from the API server directly: a Watcher or Envoy that a
	// pod names and the cache does not hold yet may have just been created.
	APIReader client.Reader
	Decoder   admission.Decoder
	// Excluded are the namespaces whose pods are never changed, whatever the
	// webhook configuration sends: kube-system and the operator's own.
	Excluded []string
	// Fleet is the operator's fleet defaults, for Envoy sidecars.
	Fleet fleet.Defaults
}

var _ admission.Handler = &Injector{}

// NewWebhook returns the injector as mgr's webhook server serves it: reading
// from mgr's cache and from the API server, and never changing the pods of
// kube-system or of operatorNamespace. The cache of namespaces' metadata it
// reads starts, and is waited for, with the manager's other informers.
func NewWebhook(mgr ctrl.Manager, operatorNamespace string, d fleet.Defaults) (*admission.Webhook, error) {
	hook := &admission.Webhook{
		Handler: &Injector{
			Client:    mgr.GetClient(),
			APIReader: mgr.GetAPIReader(),
			Decoder:   admission.NewDecoder(mgr.GetScheme()),
			Excluded:  []string{"kube-system", operatorNamespace},
			Fleet:     d,
		},
		RecoverPanic: ptr.To(true),
	}
	if _, err := mgr.GetCache().GetInformer(context.Background(), NamespaceMetadata()); err != nil {
		return nil, fmt.Errorf("watching namespaces: %w", err)
	}
	return hook, nil
}

// Handle injects the sidecars a new pod gets, or denies it when it names a
// Watcher or Envoy that does not exist or when a sidecar clashes with what
// the pod has. A pod gets the Watchers and the Envoy it names, and the
// Watchers whose selector matches it that its namespace lets inject by
// selector.
func (i *Injector) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("not a pod creation")
	}
	if slices.Contains(i.Excluded, req.Namespace) {
		return admission.Allowed("namespace " + req.Namespace + " is never injected")
	}
	switch in, err := i.optedIn(ctx, req.Namespace); {
	case err != nil:
		logf.FromContext(ctx).Error(err, "reading the namespace of a pod", "namespace", req.Namespace)
		return admission.Errored(http.StatusInternalServerError, err)
	case !in:
		return admission.Allowed(fmt.Sprintf("namespace %s is not labelled %s=%s", req.Namespace, NamespaceLabel, NamespaceEnabled))
	}
	pod := &corev1.Pod{}
	if err := i.Decoder.DecodeRaw(req.Object, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	sidecars, err := i.sidecars(ctx, req.Namespace, pod)
	if err != nil {
		var denied *deny
		if errors.As(err, &denied) {
			return admission.Denied(denied.msg)
		}
		logf.FromContext(ctx).Error(err, "reading the sidecars of a pod", "namespace", req.Namespace)
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if sidecars.Empty() && !Records(pod) {
		return admission.Allowed("no sidecar requested")
	}
	injected, err := Inject(pod, sidecars)
	if err != nil {
		return admission.Denied(err.Error())
	}
	raw, err := json.Marshal(injected)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// NamespaceMetadata is how the injector reads namespaces: their metadata
// only, which the manager caches.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

// optedIn reports whether namespace ns is labelled for injection. The
// webhook configuration's namespaceSelector sends only such namespaces'
// pods, but a configuration installed or edited without it sends every
// pod. The cache answers; when it says no, the API server is asked, for a
// namespace labelled a moment ago.
func (i *Injector) optedIn(ctx context.Context, ns string) (bool, error) {
	m := NamespaceMetadata()
	err := i.Client.Get(ctx, types.NamespacedName{Name: ns}, m)
	if err == nil && m.GetLabels()[NamespaceLabel] == NamespaceEnabled {
		return true, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	m = NamespaceMetadata()
	if err := i.APIReader.Get(ctx, types.NamespacedName{Name: ns}, m); err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	return m.GetLabels()[NamespaceLabel] == NamespaceEnabled, nil
}

// deny is a reason to refuse the pod, as opposed to a failure to decide.
type deny struct{ msg string }

func (d *deny) Error() string { return d.msg }

// sidecars finds the Watchers and the Envoy that pod asks for in ns.
func (i *Injector) sidecars(ctx context.Context, ns string, pod *corev1.Pod) (Sidecars, error) {
	s := Sidecars{Fleet: i.Fleet}
	envoyName := strings.TrimSpace(pod.Annotations[EnvoySidecarAnnotation])
	var list watchv1alpha1.WatcherList
	if err := i.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return s, fmt.Errorf("listing Watchers: %w", err)
	}
	selected, matched, missing := Select(pod, list.Items)
	if len(matched) > 0 {
		// Watchers that select the pod without being named by it inject
		// only if the namespace lets them.
		n := &corev1.Namespace{}
		if err := i.APIReader.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
			return s, fmt.Errorf("reading namespace %s: %w", ns, err)
		}
		selected = append(selected, Permitted(matched, n.Annotations)...)
	}
	var notFound []string
	for _, name := range missing {
		// The cache may not have seen a Watcher created a moment ago.
		w := &watchv1alpha1.Watcher{}
		err := i.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, w)
		switch {
		case apierrors.IsNotFound(err):
			notFound = append(notFound, name)
		case err != nil:
			return s, fmt.Errorf("reading Watcher %s: %w", name, err)
		default:
			selected = append(selected, w)
		}
	}
	if len(notFound) > 0 {
		return s, &deny{fmt.Sprintf("annotation %s names Watcher %s, which does not exist in namespace %q",
			InjectAnnotation, quoteAll(notFound), ns)}
	}
	for _, w := range selected {
		if clashing(w) {
			return s, &deny{fmt.Sprintf("Watcher %q cannot be injected: its ConfigMap %q is not managed by it (see the Watcher's Degraded condition)",
				w.Name, w.ConfigMapName())}
		}
	}
	s.Watchers = selected

	if envoyName != "" {
		e := &examplev1.Envoy{}
		key := types.NamespacedName{Namespace: ns, Name: envoyName}
		err := i.Client.Get(ctx, key, e)
		if apierrors.IsNotFound(err) {
			err = i.APIReader.Get(ctx, key, e)
		}
		switch {
		case apierrors.IsNotFound(err):
			return s, &deny{fmt.Sprintf("annotation %s names Envoy %q, which does not exist in namespace %q",
				EnvoySidecarAnnotation, envoyName, ns)}
		case err != nil:
			return s, fmt.Errorf("reading Envoy %s: %w", envoyName, err)
		}
		s.Envoy = e
	}
	return s, nil
}

// clashing reports whether w's status says that its ConfigMap's name is
// taken by an object it does not control: its sidecar would take its
// environment from someone else's data.
func clashing(w *watchv1alpha1.Watcher) bool {
	return conditions.IsTrue(w.Status.Conditions, watchv1alpha1.WatcherConditionDegraded) &&
		conditions.Reason(w.Status.Conditions, watchv1alpha1.WatcherConditionDegraded) == watchv1alpha1.WatcherReasonErrResourceExists
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
