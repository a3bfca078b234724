package gateway

import (
	"crypto/tls"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// problem is a condition's reason and message when it is not as it should
// be; nil when it is.
type problem struct {
	reason  string
	message string
}

func problemf(reason string, format string, args ...any) *problem {
	return &problem{reason: reason, message: fmt.Sprintf(format, args...)}
}

// listener is one listener of the Gateway, as translation judged it.
type listener struct {
	spec gwv1.Listener
	// kinds are the route kinds it admits: those it allows that are
	// supported.
	kinds []gwv1.RouteGroupKind
	// accepted, resolved and conflicted are what is wrong with it.
	accepted, resolved, conflicted *problem
	// certs are the SDS secrets of its certificates (HTTPS).
	certs []certificate
	// attached counts the routes attached to it.
	attached int32
}

// certificate is a listener certificate's SDS secret and Secret.
type certificate struct {
	sds    string
	secret types.NamespacedName
}

// valid reports whether the listener is served: accepted, without a
// conflict, its certificates resolved, some route kind allowed. A listener
// whose only fault is a route kind it cannot serve is served for the
// kinds it can.
func (l *listener) valid() bool {
	return l.accepted == nil && l.conflicted == nil && len(l.kinds) > 0 &&
		(l.resolved == nil || l.resolved.reason == string(gwv1.ListenerReasonInvalidRouteKinds))
}

// supportedKinds are the route kinds a listener of each protocol serves.
var supportedKinds = map[gwv1.ProtocolType][]gwv1.Kind{
	gwv1.HTTPProtocolType:  {"HTTPRoute", "GRPCRoute"},
	gwv1.HTTPSProtocolType: {"HTTPRoute", "GRPCRoute"},
}

// listeners judges the Gateway's listeners, each alone and then side by
// side.
func (t *translation) listeners() []*listener {
	out := make([]*listener, 0, len(t.in.Gateway.Spec.Listeners))
	for _, spec := range t.in.Gateway.Spec.Listeners {
		out = append(out, t.listener(spec))
	}
	markConflicts(out)
	return out
}

func (t *translation) listener(spec gwv1.Listener) *listener {
	l := &listener{spec: spec}
	kinds, ok := supportedKinds[spec.Protocol]
	if !ok {
		l.accepted = problemf(string(gwv1.ListenerReasonUnsupportedProtocol), "protocol %q is not supported: HTTP and HTTPS are", spec.Protocol)
		return l
	}
	l.kinds, l.resolved = allowedKinds(spec, kinds)
	if spec.Protocol == gwv1.HTTPSProtocolType {
		if p := t.certificates(l); p != nil {
			l.resolved = p
		}
	}
	return l
}

// allowedKinds returns the route kinds of supported that spec allows, and
// a problem when it allows one that is not supported.
func allowedKinds(spec gwv1.Listener, supported []gwv1.Kind) ([]gwv1.RouteGroupKind, *problem) {
	group := gwv1.Group(gwv1.GroupName)
	if spec.AllowedRoutes == nil || len(spec.AllowedRoutes.Kinds) == 0 {
		out := make([]gwv1.RouteGroupKind, 0, len(supported))
		for _, k := range supported {
			out = append(out, gwv1.RouteGroupKind{Group: &group, Kind: k})
		}
		return out, nil
	}
	var out []gwv1.RouteGroupKind
	var bad *problem
	for _, k := range spec.AllowedRoutes.Kinds {
		g := gwv1.Group(gwv1.GroupName)
		if k.Group != nil {
			g = *k.Group
		}
		if g == group && containsKind(supported, k.Kind) {
			out = append(out, gwv1.RouteGroupKind{Group: &group, Kind: k.Kind})
			continue
		}
		bad = problemf(string(gwv1.ListenerReasonInvalidRouteKinds), "route kind %s/%s is not supported on a %s listener", g, k.Kind, spec.Protocol)
	}
	return out, bad
}

func containsKind(kinds []gwv1.Kind, k gwv1.Kind) bool {
	for _, s := range kinds {
		if s == k {
			return true
		}
	}
	return false
}

// certificates resolves an HTTPS listener's certificateRefs into l.certs,
// and returns what is wrong with them.
func (t *translation) certificates(l *listener) *problem {
	tlsConfig := l.spec.TLS
	if tlsConfig == nil || len(tlsConfig.CertificateRefs) == 0 {
		return problemf(string(gwv1.ListenerReasonInvalidCertificateRef), "an HTTPS listener needs a certificateRef")
	}
	if tlsConfig.Mode != nil && *tlsConfig.Mode != gwv1.TLSModeTerminate {
		l.accepted = problemf(string(gwv1.ListenerReasonUnsupportedValue), "an HTTPS listener terminates TLS: mode %q is not supported", *tlsConfig.Mode)
		return nil
	}
	for i, ref := range tlsConfig.CertificateRefs {
		c, p := t.certificate(ref)
		if p != nil {
			p.message = fmt.Sprintf("certificateRefs[%d]: %s", i, p.message)
			return p
		}
		l.certs = append(l.certs, c)
	}
	return nil
}

// certificate resolves one certificateRef.
func (t *translation) certificate(ref gwv1.SecretObjectReference) (certificate, *problem) {
	invalid := string(gwv1.ListenerReasonInvalidCertificateRef)
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = coreGroup(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != "Secret" {
		return certificate{}, problemf(invalid, "%s %s is not a Secret", groupKind(group, kind), ref.Name)
	}
	name := types.NamespacedName{Namespace: t.gw.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil && *ref.Namespace != "" {
		name.Namespace = string(*ref.Namespace)
	}
	if !permitted(t.in.Grants, reference{gwv1.GroupName, "Gateway", t.gw.Namespace, "", "Secret", name.Namespace, name.Name}) {
		return certificate{}, problemf(string(gwv1.ListenerReasonRefNotPermitted), "no ReferenceGrant in namespace %s allows Gateways of namespace %s to use Secret %s", name.Namespace, t.gw.Namespace, name.Name)
	}
	s, ok := t.in.Secrets[name]
	if !ok {
		return certificate{}, problemf(invalid, "Secret %s does not exist", name)
	}
	if err := keyPair(s); err != nil {
		return certificate{}, problemf(invalid, "Secret %s %v", name, err)
	}
	return certificate{sds: secretName(t.gw, name), secret: name}, nil
}

// keyPair checks that s holds a certificate and its private key, as a
// Secret of type kubernetes.io/tls does.
func keyPair(s corev1.Secret) error {
	if s.Type != corev1.SecretTypeTLS {
		return fmt.Errorf("is of type %q, not %s", s.Type, corev1.SecretTypeTLS)
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return fmt.Errorf("holds no valid certificate and key in %s and %s", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return nil
}

// markConflicts marks the listeners that cannot share their port with
// those before them: of another protocol than the first accepted listener
// on the port (ProtocolConflict), or of the same hostname as an earlier
// one (HostnameConflict). The first of each keeps its port.
func markConflicts(ls []*listener) {
	protocol := map[gwv1.PortNumber]gwv1.ProtocolType{}
	hosts := map[gwv1.PortNumber]map[string]bool{}
	for _, l := range ls {
		if l.accepted != nil {
			continue
		}
		port := l.spec.Port
		if p, ok := protocol[port]; ok && p != l.spec.Protocol {
			l.conflicted = problemf(string(gwv1.ListenerReasonProtocolConflict), "port %d serves %s for an earlier listener", port, p)
			continue
		}
		protocol[port] = l.spec.Protocol
		host := ""
		if l.spec.Hostname != nil {
			host = string(*l.spec.Hostname)
		}
		if hosts[port] == nil {
			hosts[port] = map[string]bool{}
		}
		if hosts[port][host] {
			l.conflicted = problemf(string(gwv1.ListenerReasonHostnameConflict), "an earlier listener on port %d has hostname %q", port, host)
			continue
		}
		hosts[port][host] = true
	}
}

// groupKind writes a kind with its group, the core group as "core".
func groupKind(group, kind string) string {
	if group == "" {
		group = "core"
	}
	return group + "/" + kind
}
