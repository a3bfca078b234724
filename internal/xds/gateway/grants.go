package gateway

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// reference is one object naming another, for the ReferenceGrants to judge.
type reference struct {
	fromGroup, fromKind, fromNamespace string
	toGroup, toKind, toNamespace       string
	toName                             string
}

// permitted reports whether grants allow ref: a reference within a
// namespace always is; across namespaces, only when a ReferenceGrant of
// the referenced namespace names the referrer's kind and namespace in its
// from, and the referenced kind (and name, if it gives one) in its to.
func permitted(grants []gwv1beta1.ReferenceGrant, ref reference) bool {
	if ref.fromNamespace == ref.toNamespace {
		return true
	}
	for _, g := range grants {
		if g.Namespace == ref.toNamespace && grantsFrom(g, ref) && grantsTo(g, ref) {
			return true
		}
	}
	return false
}

func grantsFrom(g gwv1beta1.ReferenceGrant, ref reference) bool {
	for _, f := range g.Spec.From {
		if coreGroup(f.Group) == coreGroup(gwv1.Group(ref.fromGroup)) && string(f.Kind) == ref.fromKind && string(f.Namespace) == ref.fromNamespace {
			return true
		}
	}
	return false
}

func grantsTo(g gwv1beta1.ReferenceGrant, ref reference) bool {
	for _, t := range g.Spec.To {
		if coreGroup(t.Group) == coreGroup(gwv1.Group(ref.toGroup)) && string(t.Kind) == ref.toKind &&
			(t.Name == nil || *t.Name == "" || string(*t.Name) == ref.toName) {
			return true
		}
	}
	return false
}

// coreGroup reads the core API group, which may be written "" or "core",
// as "".
func coreGroup(g gwv1.Group) string {
	if g == "core" {
		return ""
	}
	return string(g)
}
