package gateway

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// cluster is the EDS cluster of a Service's port.
type cluster struct {
	name    string
	service types.NamespacedName
	// port is the endpoint port, as spec.serviceEndpoints names it.
	port intstr.IntOrString
	// http2 is set when the backend speaks HTTP/2 in clear text: a
	// GRPCRoute's, or a port whose appProtocol says h2c.
	http2 bool
}

// share is one backendRef of a rule: its cluster, or why it has none, and
// its weight.
type share struct {
	cluster string
	weight  uint32
	// filters are its own filters (HTTPRoute backendRefs).
	filters []gwv1.HTTPRouteFilter
	invalid *problem
}

// resolve resolves a route's backendRef to the EDS cluster of a Service's
// port, which it records in t.clusters; or says why it cannot: a kind
// other than Service (InvalidKind), a Service of another namespace that no
// ReferenceGrant lets the route name (RefNotPermitted), a Service or port
// that does not exist (BackendNotFound).
func (t *translation) resolve(r routeObject, ref gwv1.BackendObjectReference, http2 bool) (string, *problem) {
	group, kind := "", "Service"
	if ref.Group != nil {
		group = coreGroup(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != "Service" {
		return "", problemf(string(gwv1.RouteReasonInvalidKind), "backendRef %s: kind %s is not supported: only Services are", ref.Name, groupKind(group, kind))
	}
	name := types.NamespacedName{Namespace: r.meta.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil && *ref.Namespace != "" {
		name.Namespace = string(*ref.Namespace)
	}
	if !permitted(t.in.Grants, reference{gwv1.GroupName, string(r.kind), r.meta.Namespace, "", "Service", name.Namespace, name.Name}) {
		return "", problemf(string(gwv1.RouteReasonRefNotPermitted), "no ReferenceGrant in namespace %s allows %ss of namespace %s to name Service %s", name.Namespace, r.kind, r.meta.Namespace, name.Name)
	}
	svc, ok := t.in.Services[name]
	if !ok {
		return "", problemf(string(gwv1.RouteReasonBackendNotFound), "Service %s does not exist", name)
	}
	if ref.Port == nil {
		return "", problemf(string(gwv1.RouteReasonBackendNotFound), "backendRef to Service %s has no port", name)
	}
	sp, ok := servicePort(svc, int32(*ref.Port))
	if !ok {
		return "", problemf(string(gwv1.RouteReasonBackendNotFound), "Service %s has no port %d", name, *ref.Port)
	}
	c := t.cluster(name, sp)
	c.http2 = c.http2 || http2
	return c.name, nil
}

func servicePort(svc corev1.Service, port int32) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Port == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

// cluster returns the cluster of the Service's port sp, recorded in
// t.clusters.
func (t *translation) cluster(svc types.NamespacedName, sp corev1.ServicePort) *cluster {
	name := clusterName(t.gw, svc, sp.Port)
	if c, ok := t.clusters[name]; ok {
		return c
	}
	c := &cluster{name: name, service: svc, port: endpointPort(sp),
		http2: sp.AppProtocol != nil && *sp.AppProtocol == "kubernetes.io/h2c"}
	t.clusters[name] = c
	return c
}

// endpointPort names a Service port as its EndpointSlices do: by its name,
// which they copy (a Service's only port may have none: then by the empty
// name); or, when the port has no name and its targetPort a number, by
// that number.
func endpointPort(sp corev1.ServicePort) intstr.IntOrString {
	if sp.Name == "" && sp.TargetPort.Type == intstr.Int {
		if sp.TargetPort.IntVal != 0 {
			return sp.TargetPort
		}
		return intstr.FromInt32(sp.Port)
	}
	return intstr.FromString(sp.Name)
}

// shares resolves a rule's backendRefs, and returns the first problem of
// them, for the route's ResolvedRefs.
func (t *translation) shares(r routeObject, refs []gwv1.BackendRef, filters [][]gwv1.HTTPRouteFilter, http2 bool) ([]share, *problem) {
	var out []share
	var first *problem
	for i, ref := range refs {
		s := share{weight: 1}
		if ref.Weight != nil {
			s.weight = uint32(max(*ref.Weight, 0))
		}
		if i < len(filters) {
			s.filters = filters[i]
		}
		s.cluster, s.invalid = t.resolve(r, ref.BackendObjectReference, http2)
		if s.invalid != nil && first == nil {
			first = s.invalid
		}
		out = append(out, s)
	}
	return out, first
}

// invalidClusterName is the cluster a share of requests that would go to
// backends that do not resolve is sent to: a static cluster without
// endpoints, so Envoy answers 503 for that share. (A rule whose backends
// all fail to resolve answers 500 itself, as the Gateway API asks; Envoy
// has no way to answer a share of a weighted route directly.)
func (t *translation) invalidClusterName() string {
	return fmt.Sprintf("%s/unresolved-backend", prefix(t.gw))
}
