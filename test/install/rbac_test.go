//go:build install

package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// scope says where a grant applies.
type scope int

const (
	everywhere   scope = iota // every namespace (a ClusterRole)
	ownNamespace              // the operator's namespace only (a Role)
)

// grant is one line of the allowlist: verbs on resources of one API group,
// limited to names when names is set.
type grant struct {
	scope     scope
	group     string
	resources string // comma-separated
	names     string // comma-separated; "" means any name
	verbs     string // comma-separated
	why       string
}

// allowlist is every permission the operator's ServiceAccount holds beyond
// what every authenticated account has: the test fails on a permission
// that is missing here and on one listed here that is not granted. A
// change to the operator's RBAC comes with a change here, with its reason.
var allowlist = []grant{
	// RBAC cannot grant by label or owner: the cache lists and watches only
	// the Secrets labelled kube-envoy-controller.io/xds-secret, and reads no
	// other. get adds nothing to what list allows; it tells a fleet's
	// certificate Secret from a stranger's of the same name. Which Secrets
	// it may create and update, the ValidatingAdmissionPolicy
	// kube-envoy-controller-secrets says (below).
	{everywhere, "", "secrets", "", "create,get,list,update,watch", "fleets' xDS client certificates, in the fleets' namespaces; the TLS Secrets that EnvoyConfigs name in spec.tlsSecrets; the xDS CA"},
	{everywhere, "", "configmaps,services", "", "create,delete,get,list,patch,update,watch", "Envoy fleets' bootstrap and Service; Watchers' ConfigMap; fleets' xDS revision history; the replicas' reports of their proxies; the published xDS CA certificates; the cluster's client CA (kube-system/extension-apiserver-authentication), read by the xDS debug endpoint"},
	{everywhere, "apps", "deployments", "", "create,delete,get,list,patch,update,watch", "Envoy fleets and Foos"},
	{everywhere, "policy", "poddisruptionbudgets", "", "create,delete,get,list,update,watch", "Envoy fleets' disruption budgets, deleted when a fleet no longer has one"},
	{everywhere, "autoscaling", "horizontalpodautoscalers", "", "create,delete,get,list,update,watch", "Envoy fleets' autoscalers (spec.autoscaling), deleted when the spec drops it"},
	{everywhere, "networking.k8s.io", "networkpolicies", "", "create,delete,get,list,update,watch", "Envoy fleets' egress NetworkPolicies, deleted when a fleet opts out or takes another xDS server"},
	{everywhere, "", "pods", "", "create,delete,get,list,watch", "PodSets; a replica's own pod, which owns its proxy report"},
	{everywhere, "", "namespaces", "", "get,list,watch", "the EnvoyConfig validator lets every EnvoyConfig of a namespace being deleted go; the injector checks a namespace's opt-in label itself, from a cache of namespaces' metadata"},
	{everywhere, "batch", "jobs", "", "create,delete,get,list,watch", "FooBars"},
	{everywhere, "discovery.k8s.io", "endpointslices", "", "get,list,watch", "EDS from Services' endpoints"},
	{everywhere, "", "secrets", "", "list,watch", "SDS from the Secrets that EnvoyConfigs name in spec.tlsSecrets, cached only when labelled kube-envoy-controller.io/xds-secret"},
	{everywhere, "events.k8s.io", "events", "", "create,patch", "events of every controller"},
	{everywhere, "demo.k8s.io", "podsets", "", "get,list,watch", "the PodSet controller"},
	{everywhere, "demo.k8s.io", "podsets/status", "", "get,patch,update", "the PodSet controller"},
	{everywhere, "demo.k8s.io", "podsets/finalizers", "", "update", "owner references that block deletion"},
	{everywhere, "example.com", "envoyconfigs", "", "get,list,watch", "the EnvoyConfig controller, the webhooks"},
	{everywhere, "example.com", "envoys", "", "create,delete,get,list,patch,update,watch", "the Envoy and EnvoyConfig controllers, the webhooks; the Gateway controller makes each Gateway's fleet, an Envoy the Gateway controls"},
	{everywhere, "gateway.networking.k8s.io", "gatewayclasses,gateways,grpcroutes,httproutes,referencegrants", "", "get,list,watch", "the Gateway API: the Gateway controller, and the fleets that serve Gateways"},
	{everywhere, "gateway.networking.k8s.io", "gatewayclasses/status,gateways/status,grpcroutes/status,httproutes/status", "", "get,patch,update", "their status"},
	{everywhere, "gateway.networking.k8s.io", "gateways/finalizers", "", "update", "owner references that block deletion (a Gateway's fleet)"},
	{everywhere, "example.com", "envoys/status,envoyconfigs/status", "", "get,patch,update", "their status"},
	{everywhere, "example.com", "envoys/finalizers", "", "update", "owner references that block deletion"},
	{everywhere, "k8s.io", "foobars", "", "get,list,watch", "the FooBar controller"},
	{everywhere, "k8s.io", "foobars/status", "", "get,patch,update", "its status"},
	{everywhere, "k8s.io", "foobars/finalizers", "", "update", "owner references that block deletion"},
	{everywhere, "samplecontroller.k8s.io", "foos", "", "get,list,watch", "the Foo controller"},
	{everywhere, "samplecontroller.k8s.io", "foos/status", "", "get,patch,update", "its status"},
	{everywhere, "samplecontroller.k8s.io", "foos/finalizers", "", "update", "owner references that block deletion"},
	{everywhere, "watch.my.domain", "watchers", "", "get,list,watch", "the Watcher controller and the injector"},
	{everywhere, "watch.my.domain", "watchers/status", "", "get,patch,update", "its status"},
	{everywhere, "watch.my.domain", "watchers/finalizers", "", "update", "owner references that block deletion"},
	{everywhere, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "kube-envoy-controller-injector", "get,list,update,watch", "the injector's caBundle"},
	{everywhere, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "kube-envoy-controller-validator", "get,list,update,watch", "the validator's caBundle"},
	{everywhere, "authentication.k8s.io", "tokenreviews", "", "create", "authenticating metrics scrapers and clients of the xDS debug endpoint (kubectl envoy)"},
	{everywhere, "authorization.k8s.io", "subjectaccessreviews", "", "create", "authorizing metrics scrapers and clients of the xDS debug endpoint, per fleet namespace"},
	{ownNamespace, "", "secrets", "kube-envoy-controller-webhook-cert", "get,list,update,watch", "the webhook's certificate"},
	{ownNamespace, "", "secrets", "", "create", "the webhook's certificate Secret, if it is missing"},
	{ownNamespace, "", "secrets", "kube-envoy-controller-xds-ca", "get,update", "the xDS CA"},
	{ownNamespace, "coordination.k8s.io", "leases", "kube-envoy-controller.kube-envoy-controller.io", "get,update", "leader election"},
	{ownNamespace, "coordination.k8s.io", "leases", "", "create", "leader election"},
	{ownNamespace, "", "events", "", "create,patch", "leader election's events"},
	{ownNamespace, "events.k8s.io", "events", "", "create,patch", "leader election's events"},
}

// permissions expands grants into "verb group/resource[/name]" strings, for the namespace ns.
func permissions(grants []grant, ns string) map[string]bool {
	out := map[string]bool{}
	for _, g := range grants {
		if g.scope == ownNamespace && ns != operatorNamespace {
			continue
		}
		expand(out, []string{g.group}, strings.Split(g.resources, ","), split(g.names), strings.Split(g.verbs, ","))
	}
	return out
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func expand(out map[string]bool, groups, resources, names, verbs []string) {
	for _, g := range groups {
		for _, r := range resources {
			for _, v := range verbs {
				if len(names) == 0 {
					out[fmt.Sprintf("%s %s/%s", v, g, r)] = true
				}
				for _, n := range names {
					out[fmt.Sprintf("%s %s/%s/%s", v, g, r, n)] = true
				}
			}
		}
	}
}

// rulesOf asks the API server, as cfg's user, for that user's rules in ns
// (SelfSubjectRulesReview) and expands them like permissions. Non-resource
// rules come as "verb url".
func rulesOf(t *testing.T, cfg *rest.Config, ns string) map[string]bool {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	rr, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(context.Background(),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status.Incomplete {
		t.Fatalf("the rules review in %s is incomplete: %s", ns, rr.Status.EvaluationError)
	}
	out := map[string]bool{}
	for _, r := range rr.Status.ResourceRules {
		expand(out, r.APIGroups, r.Resources, r.ResourceNames, r.Verbs)
	}
	for _, r := range rr.Status.NonResourceRules {
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out[v+" "+u] = true
			}
		}
	}
	return out
}

// tokenConfig returns cfg's server with a token for a ServiceAccount, from the TokenRequest API.
func tokenConfig(t *testing.T, ns, sa string) (*rest.Config, string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(adminCfg)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(adminCfg)
	cfg.BearerToken = tr.Status.Token
	return cfg, tr.Status.Token
}

// TestServiceAccountPermissions compares what the installed ServiceAccount
// may do, as the API server reports it, with the allowlist, in the
// operator's namespace, another namespace and kube-system.
func TestServiceAccountPermissions(t *testing.T) {
	ctx := context.Background()
	// What every ServiceAccount may do (discovery, self reviews): a new one
	// with no binding of its own shows it.
	kubectl.Run(t, "create", "namespace", "rbac-baseline")
	t.Cleanup(func() { kubectl.Run(t, "delete", "namespace", "rbac-baseline", "--wait=false") })
	kubectl.Run(t, "-n", "rbac-baseline", "create", "serviceaccount", "nobody")
	nobody, _ := tokenConfig(t, "rbac-baseline", "nobody")

	for _, ns := range []string{operatorNamespace, "default", "kube-system"} {
		t.Run(ns, func(t *testing.T) {
			baseline := rulesOf(t, nobody, ns)
			got := rulesOf(t, saCfg, ns)
			want := permissions(allowlist, ns)
			var extra, missing []string
			for p := range got {
				if !baseline[p] && !want[p] {
					extra = append(extra, p)
				}
			}
			for p := range want {
				if !got[p] {
					missing = append(missing, p)
				}
			}
			slices.Sort(extra)
			slices.Sort(missing)
			if len(extra) > 0 {
				t.Errorf("granted but not in the allowlist:\n  %s", strings.Join(extra, "\n  "))
			}
			if len(missing) > 0 {
				t.Errorf("in the allowlist but not granted:\n  %s", strings.Join(missing, "\n  "))
			}
		})
	}

	sa := kubernetes.NewForConfigOrDie(saCfg)
	// Another webhook configuration: neither read nor changed.
	other := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses-webhook"}}
	if err := admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, other) })
	_, err := sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, other.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"taken":"over"}}}`), metav1.PatchOptions{})
	wantForbidden(t, "patching another ValidatingWebhookConfiguration", err)
	_, err = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, other.Name, metav1.GetOptions{})
	wantForbidden(t, "reading another MutatingWebhookConfiguration", err)
	_, err = sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	wantForbidden(t, "listing every ValidatingWebhookConfiguration", err)
	// Its own, listed by name as the certificate rotator does, and updated.
	list, err := sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx,
		metav1.ListOptions{FieldSelector: "metadata.name=kube-envoy-controller-validator"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("listing its own ValidatingWebhookConfiguration by name: %v", err)
	} else if _, err := sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, &list.Items[0], metav1.UpdateOptions{}); err != nil {
		t.Errorf("updating its own ValidatingWebhookConfiguration: %v", err)
	}

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	// Secrets: listed and watched everywhere (the cache asks only for the
	// labelled ones); fleets' certificates are written where the fleets are,
	// but never in kube-system; none is patched or deleted (the garbage
	// collector removes a fleet's with it). The ValidatingAdmissionPolicy
	// kube-envoy-controller-secrets lets it write no other Secret: none but
	// its two of its own namespace, and no Secret of another namespace but a
	// fleet's certificate, nor one that someone else wrote.
	secret := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: ns}}
	}
	crt, key := xdstest.ServingCertificate(t, "edge")
	fleetCertificate := func(ns string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "edge-xds-client", Namespace: ns,
				Labels: map[string]string{"kube-envoy-controller.io/xds-secret": "client-certificate"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Envoy", Name: "edge",
					UID: "2b1c2e56-8c8e-4c59-9a8e-1d2b3c4d5e6f", Controller: ptr.To(true)}}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
		}
	}
	if _, err := sa.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "kube-envoy-controller.io/xds-secret"}); err != nil {
		t.Errorf("listing the labelled Secrets of default, as the cache does: %v", err)
	}
	_, err = sa.CoreV1().Secrets("default").Patch(ctx, "anything", types.MergePatchType, []byte(`{"metadata":{"labels":{"taken":"over"}}}`), metav1.PatchOptions{})
	wantForbidden(t, "patching a Secret in default", err)
	_, err = sa.CoreV1().Secrets("kube-system").Create(ctx, fleetCertificate("kube-system"), dryRun)
	wantForbidden(t, "creating a fleet's certificate in kube-system", err)
	if _, err := sa.CoreV1().Secrets("default").Create(ctx, fleetCertificate("default"), dryRun); err != nil {
		t.Errorf("creating a fleet's certificate in default (dry run): %v", err)
	}
	_, err = sa.CoreV1().Secrets("default").Create(ctx, secret("default"), dryRun)
	wantForbidden(t, "creating another Secret in default", err)
	notOwned := fleetCertificate("default")
	notOwned.OwnerReferences = nil
	_, err = sa.CoreV1().Secrets("default").Create(ctx, notOwned, dryRun)
	wantForbidden(t, "creating a fleet's certificate that no Envoy controls", err)
	_, err = sa.CoreV1().Secrets(operatorNamespace).Create(ctx, secret(operatorNamespace), dryRun)
	wantForbidden(t, "creating a Secret in its namespace other than its own two", err)
	// A Secret someone else wrote is not taken over, even made to look like
	// a fleet's certificate.
	theirs := fleetCertificate("default")
	theirs.Labels, theirs.OwnerReferences = nil, nil
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, theirs) })
	taken, err := sa.CoreV1().Secrets("default").Get(ctx, theirs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disguised := fleetCertificate("default")
	taken.Labels, taken.OwnerReferences = disguised.Labels, disguised.OwnerReferences
	_, err = sa.CoreV1().Secrets("default").Update(ctx, taken, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	wantForbidden(t, "updating a Secret it did not write", err)
	err = sa.CoreV1().Secrets(operatorNamespace).Delete(ctx, "kube-envoy-controller-webhook-cert", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	wantForbidden(t, "deleting a Secret", err)

	// Pods: created where a PodSet asks for them, but never in kube-system,
	// where the ValidatingAdmissionPolicy refuses them (RBAC cannot).
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
	}
	_, err = sa.CoreV1().Pods("kube-system").Create(ctx, pod("kube-system"), dryRun)
	wantForbidden(t, "creating a pod in kube-system", err)
	if _, err := sa.CoreV1().Pods("default").Create(ctx, pod("default"), dryRun); err != nil {
		t.Errorf("creating a pod in default (dry run): %v", err)
	}
	_, err = sa.CoreV1().ConfigMaps("kube-system").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: "kube-system"}}, dryRun)
	wantForbidden(t, "creating a ConfigMap in kube-system", err)
}

func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want Forbidden, got %v", what, err)
	}
}
