package validate

import (
	"context"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Path is where the webhook server serves the EnvoyConfig validator.
const Path = "/validate-example-com-v1-envoyconfig"

// Configuration is the name of the generated ValidatingWebhookConfiguration.
const Configuration = "kube-envoy-controller-validator"

// The validator sees only EnvoyConfigs, and none in kube-system or the
// operator's own namespace, so that an operator outage blocks nothing else
// (docs/operations/availability.md: "What a webhook outage blocks").
//
// +kubebuilder:webhookconfiguration:mutating=false,name=kube-envoy-controller-validator
// +kubebuilder:webhook:path=/validate-example-com-v1-envoyconfig,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=example.com,resources=envoyconfigs,verbs=create;update;delete,versions=v1,name=validate.envoyconfig.example.com,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=kube-envoy-controller-webhook,serviceNamespace=kube-envoy-controller,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-envoy-controller"]}]}}`

// EnvoyConfigValidator refuses, at kubectl apply or delete, a change to an
// EnvoyConfig that would leave its fleet worse: resources that do not decode
// strictly into Envoy's v3 protos or fail Envoy's validation rules, secret
// material written inline (private keys belong in Secrets, named in
// spec.tlsSecrets), content that the content policy refuses (files,
// environment variables, configuration from elsewhere, destinations beyond
// what the author may reach: see translate.Policy), and references (to route configurations, clusters and
// SDS secrets) that the change would leave leading nowhere, its own or
// those of another EnvoyConfig of the fleet. It judges the fleet as it would be after the change, for CREATE,
// UPDATE and DELETE, with the translation the controller uses, and then has
// a real Envoy load the changed EnvoyConfig (Envoy). The message
// names the EnvoyConfig, the resource and the field, or gives Envoy's
// words. The controller checks again, for objects that got in another way.
//
// Its timeoutSeconds (5) holds --envoy-validation-timeout (at most 5s,
// 3s by default): Envoy loads an EnvoyConfig in tens of milliseconds.
type EnvoyConfigValidator struct {
	// Client reads the fleet's other EnvoyConfigs (from the cache).
	Client client.Reader
	// APIReader reads uncached: the fleet's other EnvoyConfigs again before
	// a refusal, and a namespace when a delete would break references.
	APIReader client.Reader
	Decoder   admission.Decoder
	// Policy is the content policy, the one the controller applies.
	Policy translate.Policy
	// Envoy loads a changed EnvoyConfig's resources in a real Envoy once
	// the rules admit it: what Envoy refuses, or does not load in time, is
	// refused. Without an Envoy (nil, or one that is Unavailable) the
	// change is admitted on the rules alone, with a warning that says so.
	Envoy *envoyjudge.Judge
}

// NewWebhook returns the validator, applying the content policy p and
// having envoy load what p admits, as mgr's webhook server serves it:
// reading from mgr's cache and from the API server.
func NewWebhook(mgr ctrl.Manager, p translate.Policy, envoy *envoyjudge.Judge) *admission.Webhook {
	return &admission.Webhook{
		Handler: &EnvoyConfigValidator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Decoder: admission.NewDecoder(mgr.GetScheme()),
			Policy: p, Envoy: envoy},
		RecoverPanic: ptr.To(true),
	}
}

// The validator lets every EnvoyConfig of a namespace being deleted go, in
// whatever order the namespace controller deletes them.
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch

// Handle implements admission.Handler.
func (v *EnvoyConfigValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	cfg := &examplev1.EnvoyConfig{}
	var err error
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
		err = v.Decoder.Decode(req, cfg)
	case admissionv1.Delete:
		err = v.Decoder.DecodeRaw(req.OldObject, cfg)
	default:
		return admission.Allowed("")
	}
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update && !cfg.DeletionTimestamp.IsZero() {
		// Nothing of an EnvoyConfig being deleted is served any more, and its
		// finalizers must be able to go, even when it was stored, before this
		// check existed, with a private key inline.
		return admission.Allowed("the EnvoyConfig is being deleted")
	}
	deleting := req.Operation == admissionv1.Delete
	problems, err := v.judge(ctx, v.Client, cfg, deleting)
	if err == nil && len(problems) > 0 && v.APIReader != nil {
		// The cache may not hold yet an EnvoyConfig the API server stored a
		// moment ago, as when kubectl applies a directory of them, each
		// naming what another defines: a refusal is judged again on the
		// API server's own view, so that a change is never refused for what
		// the cache has not seen. Only refusals cost that read.
		problems, err = v.judge(ctx, v.APIReader, cfg, deleting)
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(problems) == 0 && !deleting {
		return v.load(ctx, cfg)
	}
	if len(problems) == 0 {
		return admission.Allowed("")
	}
	if deleting && v.namespaceTerminating(ctx, cfg.Namespace) {
		return admission.Allowed("the namespace is being deleted")
	}
	return admission.Denied(translate.Refusal(cfg.Name, deleting, problems))
}

// judge returns what is wrong with the change of cfg (its deletion when
// deleting), with the fleet's other EnvoyConfigs as reader lists them.
func (v *EnvoyConfigValidator) judge(ctx context.Context, reader client.Reader, cfg *examplev1.EnvoyConfig, deleting bool) ([]string, error) {
	var list examplev1.EnvoyConfigList
	if err := reader.List(ctx, &list, client.InNamespace(cfg.Namespace)); err != nil {
		return nil, err
	}
	var before []translate.Config
	for i := range list.Items {
		o := &list.Items[i]
		if o.Spec.EnvoyRef == cfg.Spec.EnvoyRef && o.DeletionTimestamp.IsZero() {
			before = append(before, translate.FromObject(o))
		}
	}
	var after *translate.Config
	if !deleting {
		c := translate.FromObject(cfg)
		after = &c
	}
	// The fleet's Envoy may narrow its destinations (spec.egress.allowed),
	// read past the cache when it can be: an allowlist narrowed a moment
	// ago applies to the next admission.
	envoyReader := reader
	if v.APIReader != nil {
		envoyReader = v.APIReader
	}
	var envoy *examplev1.Envoy
	e := &examplev1.Envoy{}
	switch err := envoyReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Spec.EnvoyRef}, e); {
	case err == nil:
		envoy = e
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	return translate.Admit(v.Policy.ForFleet(envoy), before, cfg.Namespace+"/"+cfg.Name, after), nil
}

// load has a real Envoy load cfg's resources, alone, once the rules admit
// them: a change is judged by what it is, whatever the fleet's other
// EnvoyConfigs hold, and Envoy's refusal is of this EnvoyConfig's content
// (Envoy's validate mode resolves no reference over ADS, so one that
// leads to another EnvoyConfig loads as it is; the rules check references).
// The clusters of the fleet's other EnvoyConfigs that it names are loaded
// beside it as stand-ins (envoyload.Resources.WithClusters), since Envoy
// checks that some references to a cluster lead to one.
// What Envoy refuses, or does not load in time, is refused with its words;
// without an Envoy the change is admitted with a warning that says so.
func (v *EnvoyConfigValidator) load(ctx context.Context, cfg *examplev1.EnvoyConfig) admission.Response {
	if v.Envoy == nil {
		return admission.Allowed("").WithWarnings(NotLoaded("no Envoy was configured to load it in"))
	}
	r, err := envoyload.FromSpec(cfg.Spec.Resources)
	if err != nil {
		return admission.Denied(translate.Refusal(cfg.Name, false, []string{err.Error()}))
	}
	var fleet examplev1.EnvoyConfigList
	if err := v.Client.List(ctx, &fleet, client.InNamespace(cfg.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	var clusters []string
	for i := range fleet.Items {
		if o := &fleet.Items[i]; o.Spec.EnvoyRef == cfg.Spec.EnvoyRef && o.Name != cfg.Name {
			clusters = append(clusters, envoyload.ClusterNames(o.Spec.Resources)...)
		}
	}
	verdict := v.Envoy.Judge(ctx, r.WithClusters(clusters))
	switch verdict.Outcome {
	case envoyjudge.Loaded:
		return admission.Allowed("")
	case envoyjudge.Refused, envoyjudge.TimedOut:
		return admission.Denied(translate.Refusal(cfg.Name, false, []string{verdict.Message}))
	}
	return admission.Allowed("").WithWarnings(NotLoaded(verdict.Message))
}

// NotLoaded is the warning of a change admitted on the rules alone, since
// no Envoy loaded it, for the reason why.
func NotLoaded(why string) string {
	return "admitted on the operator's rules alone, not loaded in a real Envoy: " + why
}

func (v *EnvoyConfigValidator) namespaceTerminating(ctx context.Context, name string) bool {
	ns := &corev1.Namespace{}
	if err := v.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return apierrors.IsNotFound(err)
	}
	return !ns.DeletionTimestamp.IsZero()
}
