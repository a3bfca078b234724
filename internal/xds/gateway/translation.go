package gateway

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// translation is one Gateway's translation under way.
type translation struct {
	in Input
	gw types.NamespacedName
	// ports holds, by Gateway listener port, the virtual hosts' routes.
	ports map[gwv1.PortNumber]map[string][]placed
	// clusters holds the EDS clusters that backends resolved to, by name.
	clusters map[string]*cluster
	// earlier holds the published rules of the routes refused alone, and
	// earlierCluster the published Config's clusters (earlier.go).
	earlier        map[RouteKey]*earlierRoute
	earlierCluster map[string]earlierCluster
}

// Translate translates one Gateway: see the package's doc.
func Translate(in Input) Output {
	t := &translation{
		in:       in,
		gw:       types.NamespacedName{Namespace: in.Gateway.Namespace, Name: in.Gateway.Name},
		ports:    map[gwv1.PortNumber]map[string][]placed{},
		clusters: map[string]*cluster{},
	}
	if len(in.Refused) > 0 && in.Published != nil {
		want := map[RouteKey]bool{}
		for k := range in.Refused {
			want[k] = true
		}
		t.earlier, t.earlierCluster = earlierRoutes(in.Published, t.gw, want), earlierClusters(in.Published)
	}
	ls := t.listeners()
	for _, l := range ls {
		if l.valid() {
			t.ports[l.spec.Port] = map[string][]placed{}
		}
	}
	out := Output{
		HTTPRoutes: t.httpRoutes(ls),
		GRPCRoutes: t.grpcRoutes(ls),
	}
	out.Gateway = t.gatewayStatus(ls)
	out.ListenerValid = map[gwv1.SectionName]bool{}
	for _, l := range ls {
		out.ListenerValid[l.spec.Name] = l.valid()
	}
	cfg, err := t.config(ls)
	if err != nil {
		// A resource that cannot be written is this package's fault, not the
		// Gateway's: serve none of it, and say so.
		cfg.Spec.Resources = examplev1.EnvoyResources{}
		cfg.Spec.ServiceEndpoints, cfg.Spec.TLSSecrets = nil, nil
		out.Gateway.Conditions = []metav1.Condition{t.condition(string(gwv1.GatewayConditionAccepted), "", "",
			problemf(string(gwv1.GatewayReasonInvalid), "the Gateway's Envoy resources cannot be written: %v", err), t.in.Gateway.Generation)}
	}
	out.Config = cfg
	return out
}

// routeObject is what attaching a route reads of it, whatever its kind.
type routeObject struct {
	kind      gwv1.Kind
	meta      metav1.ObjectMeta
	parents   []gwv1.ParentReference
	hostnames []gwv1.Hostname
}

func (r routeObject) name() types.NamespacedName {
	return types.NamespacedName{Namespace: r.meta.Namespace, Name: r.meta.Name}
}

// attachment is a listener a route attached to, and the virtual hosts it
// serves the route under there.
type attachment struct {
	listener *listener
	hosts    []string
}

// names reports whether ref names this Gateway, for a route of namespace
// ns (ParentIs).
func (t *translation) names(ref gwv1.ParentReference, ns string) bool {
	return ParentIs(ref, ns, t.gw)
}

// attach attaches r through each of its parentRefs that names this
// Gateway: the parent statuses' Accepted conditions, with nil for those
// accepted, and the attachments of each. Each listener counts r once.
func (t *translation) attach(r routeObject, ls []*listener) ([]gwv1.ParentReference, []*problem, []attachment) {
	var refs []gwv1.ParentReference
	var accepted []*problem
	var atts []attachment
	counted := map[*listener]bool{}
	for _, ref := range r.parents {
		if !t.names(ref, r.meta.Namespace) {
			continue
		}
		p, as := t.attachTo(r, ref, ls)
		refs, accepted = append(refs, ref), append(accepted, p)
		for _, a := range as {
			if !counted[a.listener] {
				counted[a.listener] = true
				a.listener.attached++
			}
		}
		atts = append(atts, as...)
	}
	return refs, accepted, atts
}

// attachTo attaches r through one parentRef: to the listeners it selects
// (by sectionName and port) that allow r's kind and namespace, and that
// share a hostname with it.
func (t *translation) attachTo(r routeObject, ref gwv1.ParentReference, ls []*listener) (*problem, []attachment) {
	var selected []*listener
	for _, l := range ls {
		if (ref.SectionName == nil || *ref.SectionName == l.spec.Name) && (ref.Port == nil || *ref.Port == l.spec.Port) {
			selected = append(selected, l)
		}
	}
	if len(selected) == 0 {
		return problemf(string(gwv1.RouteReasonNoMatchingParent), "the Gateway has no listener that the parentRef's sectionName and port select"), nil
	}
	var allowed []*listener
	for _, l := range selected {
		if t.allows(l, r) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return problemf(string(gwv1.RouteReasonNotAllowedByListeners), "no listener the parentRef selects allows %ss of namespace %s", r.kind, r.meta.Namespace), nil
	}
	var atts []attachment
	for _, l := range allowed {
		if hosts := intersect(l.spec.Hostname, r.hostnames); len(hosts) > 0 {
			atts = append(atts, attachment{listener: l, hosts: hosts})
		}
	}
	if len(atts) == 0 {
		return problemf(string(gwv1.RouteReasonNoMatchingListenerHostname), "no listener the parentRef selects shares a hostname with the route"), nil
	}
	return nil, atts
}

// allows reports whether l admits routes of r's kind and namespace.
func (t *translation) allows(l *listener, r routeObject) bool {
	kindOK := false
	for _, k := range l.kinds {
		kindOK = kindOK || k.Kind == r.kind
	}
	if !kindOK {
		return false
	}
	from := gwv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		selector = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return r.meta.Namespace == t.gw.Namespace
	case gwv1.NamespacesFromSelector:
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil || selector == nil {
			return false // a selector that selects nothing
		}
		return sel.Matches(labels.Set(t.in.Namespaces[r.meta.Namespace]))
	}
	return false
}

// parentStatuses writes a route's parent statuses: Accepted from
// attaching it, ResolvedRefs from its backends.
func (t *translation) parentStatuses(r routeObject, refs []gwv1.ParentReference, accepted []*problem, resolved *problem) []gwv1.RouteParentStatus {
	out := make([]gwv1.RouteParentStatus, 0, len(refs))
	for i, ref := range refs {
		out = append(out, gwv1.RouteParentStatus{
			ParentRef:      ref,
			ControllerName: ControllerName,
			Conditions: []metav1.Condition{
				t.condition(string(gwv1.RouteConditionAccepted), string(gwv1.RouteReasonAccepted), "the route is attached", accepted[i], r.meta.Generation),
				t.condition(string(gwv1.RouteConditionResolvedRefs), string(gwv1.RouteReasonResolvedRefs), "every reference resolved", resolved, r.meta.Generation),
			},
		})
	}
	return out
}

// condition is the condition typ: True with reason and message when p is
// nil, else False with p's. Its lastTransitionTime is left to the caller,
// who knows the time and the condition before.
func (t *translation) condition(typ, reason, message string, p *problem, generation int64) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: generation}
	if p != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, p.reason, p.message
	}
	return c
}

// gatewayStatus is the Gateway's Accepted condition and its listeners'
// status.
func (t *translation) gatewayStatus(ls []*listener) gwv1.GatewayStatus {
	gen := t.in.Gateway.Generation
	var st gwv1.GatewayStatus
	valid, acceptedAny := true, false
	for _, l := range ls {
		valid = valid && l.accepted == nil
		acceptedAny = acceptedAny || l.accepted == nil
		kinds := l.kinds
		if kinds == nil {
			kinds = []gwv1.RouteGroupKind{}
		}
		conflicted := metav1.Condition{Type: string(gwv1.ListenerConditionConflicted), Status: metav1.ConditionFalse,
			Reason: string(gwv1.ListenerReasonNoConflicts), Message: "no conflict", ObservedGeneration: gen}
		if l.conflicted != nil {
			conflicted.Status, conflicted.Reason, conflicted.Message = metav1.ConditionTrue, l.conflicted.reason, l.conflicted.message
		}
		st.Listeners = append(st.Listeners, gwv1.ListenerStatus{
			Name:           l.spec.Name,
			SupportedKinds: kinds,
			AttachedRoutes: l.attached,
			Conditions: []metav1.Condition{
				t.condition(string(gwv1.ListenerConditionAccepted), string(gwv1.ListenerReasonAccepted), "the listener is accepted", l.accepted, gen),
				t.condition(string(gwv1.ListenerConditionResolvedRefs), string(gwv1.ListenerReasonResolvedRefs), "every reference resolved", l.resolved, gen),
				conflicted,
			},
		})
	}
	var p *problem
	switch {
	case len(t.in.Gateway.Spec.Addresses) > 0:
		p = problemf(string(gwv1.GatewayReasonUnsupportedAddress), "spec.addresses is not supported: the fleet's Service has the addresses")
	case !acceptedAny:
		p = problemf(string(gwv1.GatewayReasonListenersNotValid), "no listener is valid")
	}
	accepted := t.condition(string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayReasonAccepted), "the Gateway is accepted", p, gen)
	if p == nil && !valid {
		accepted.Reason, accepted.Message = string(gwv1.GatewayReasonListenersNotValid), "some listeners are not valid"
	}
	st.Conditions = []metav1.Condition{accepted}
	return st
}

// sortedPorts returns the ports that serve, in order.
func (t *translation) sortedPorts() []gwv1.PortNumber {
	out := make([]gwv1.PortNumber, 0, len(t.ports))
	for p := range t.ports {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
