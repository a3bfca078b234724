package gateway

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// What an Input needs read besides the Gateway API objects: the Services
// its routes name as backends and the Secrets its listeners name as
// certificates. The operator and kubectl envoy both build an Input from
// what they read, and ask these which Services and Secrets to read, so
// both read the same.

// BackendServices are the Services the routes of in name as backends (and
// as RequestMirror filters' backends), in the order they are named, each
// once. A reference of another group or kind than a core Service is left
// out; one of another namespace is kept, whether a ReferenceGrant allows
// it or not: translation judges that (Translate).
func BackendServices(in Input) []types.NamespacedName {
	var out []types.NamespacedName
	add := func(ns string, ref gwv1.BackendObjectReference) {
		if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service" {
			return
		}
		key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
		if ref.Namespace != nil {
			key.Namespace = string(*ref.Namespace)
		}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	for _, rt := range in.HTTPRoutes {
		for _, rule := range rt.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(rt.Namespace, b.BackendObjectReference)
			}
			for _, f := range rule.Filters {
				if f.RequestMirror != nil {
					add(rt.Namespace, f.RequestMirror.BackendRef)
				}
			}
		}
	}
	for _, rt := range in.GRPCRoutes {
		for _, rule := range rt.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(rt.Namespace, b.BackendObjectReference)
			}
		}
	}
	return out
}

// CertificateSecrets are the Secrets the listeners of gw name as
// certificates, in the order they are named, each once. A reference of
// another group or kind than a core Secret is left out; one of another
// namespace is kept, for translation to judge by the ReferenceGrants.
func CertificateSecrets(gw gwv1.Gateway) []types.NamespacedName {
	var out []types.NamespacedName
	for _, l := range gw.Spec.Listeners {
		if l.TLS == nil {
			continue
		}
		for _, ref := range l.TLS.CertificateRefs {
			if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Secret" {
				continue
			}
			key := types.NamespacedName{Namespace: gw.Namespace, Name: string(ref.Name)}
			if ref.Namespace != nil {
				key.Namespace = string(*ref.Namespace)
			}
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// RefKey reads a Config's reference to a Service or a Secret (a
// serviceEndpoints' service, a tlsSecrets' secretRef): "name", in the
// Gateway's namespace ns, or "namespace/name".
func RefKey(ref, ns string) types.NamespacedName {
	if n, name, ok := strings.Cut(ref, "/"); ok {
		return types.NamespacedName{Namespace: n, Name: name}
	}
	return types.NamespacedName{Namespace: ns, Name: ref}
}

// ServedSecrets are the Secrets of in that cfg, in's translation, serves,
// by the name its tlsSecrets give them: copies, marked as a Secret that a
// listener may serve (by the Gateway API's rules: its own namespace, or a
// ReferenceGrant) is marked for translation of the Config, with the
// control plane's label. The Secrets of in are not changed. A Secret that
// in does not hold is left out.
func ServedSecrets(in Input, cfg translate.Config) map[string]corev1.Secret {
	out := map[string]corev1.Secret{}
	for _, ts := range cfg.Spec.TLSSecrets {
		s, ok := in.Secrets[RefKey(ts.SecretRef, in.Gateway.Namespace)]
		if !ok {
			continue
		}
		s = *s.DeepCopy()
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[names.XDSSecretLabel] = names.XDSSecretTLS
		out[ts.SecretRef] = s
	}
	return out
}

// PublishedOf is the Config of the Gateway gw among served, the Configs of
// the fleet's served revision, as Input.Published takes it; nil when the
// revision holds none of it. The operator and kubectl envoy both take the
// served revision's from the fleet's recorded history.
func PublishedOf(served []translate.Config, gw types.NamespacedName) *translate.Config {
	name := ConfigName(gw.Namespace, gw.Name)
	for i := range served {
		if served[i].Name == name {
			c := served[i]
			return &c
		}
	}
	return nil
}

// ParentIs reports whether ref, a parentRef of a route of namespace ns,
// names the Gateway gw: the group and kind, when given, are the Gateway
// API's Gateway, and the namespace, when given and not empty, is gw's,
// else ns is. Translation attaches a route by it; the operator and
// kubectl envoy find a route's parent status for gw by it.
func ParentIs(ref gwv1.ParentReference, ns string, gw types.NamespacedName) bool {
	if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	return ns == gw.Namespace && string(ref.Name) == gw.Name
}
