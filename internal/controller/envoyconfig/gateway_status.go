package envoyconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// programmed says whether the fleet's proxies serve the Gateway's Config as
// it is now, and why not: its content is accepted, published to every
// proxy, and every connected proxy acknowledged it. It is the Gateway
// API's Programmed, measured at the proxies rather than at the write.
func programmed(s State) (bool, gwv1.GatewayConditionReason, string) {
	synthetic := &examplev1.EnvoyConfig{}
	st := Status(synthetic, s)
	accepted := meta.FindStatusCondition(st.Conditions, examplev1.EnvoyConfigConditionAccepted)
	published := meta.FindStatusCondition(st.Conditions, examplev1.EnvoyConfigConditionPublished)
	switch {
	case accepted != nil && accepted.Status != metav1.ConditionTrue:
		return false, gwv1.GatewayReasonInvalid, accepted.Message
	case published == nil || published.Status != metav1.ConditionTrue || published.Reason != examplev1.EnvoyConfigReasonPublished:
		msg := "not published to the fleet yet"
		if published != nil {
			msg = published.Message
		}
		return false, gwv1.GatewayReasonPending, msg
	case s.Proxies.Connected == 0:
		return false, gwv1.GatewayReasonPending, "no proxy of the fleet is connected yet"
	case s.Proxies.Acked < s.Proxies.Connected:
		return false, gwv1.GatewayReasonPending, fmt.Sprintf("%d of %d connected proxies acknowledged version %s", s.Proxies.Acked, s.Proxies.Connected, s.PublishedVersion)
	}
	return true, gwv1.GatewayReasonProgrammed, fmt.Sprintf("every connected proxy (%d) acknowledged version %s", s.Proxies.Connected, s.PublishedVersion)
}

// reportGateway writes the status of the Gateway the fleet serves, and of
// its routes' parents for it: what translation found, the addresses of the
// fleet's Service, and Programmed from the proxies' answers (s).
func (r *Reconciler) reportGateway(ctx context.Context, w *world, s State) error {
	gwr := w.gateway
	gw := gwr.gateway
	ok, reason, msg := programmed(s)
	addresses, err := r.serviceAddresses(ctx, w)
	if err != nil {
		return err
	}
	if ok && len(addresses) == 0 {
		ok, reason, msg = false, gwv1.GatewayReasonAddressNotAssigned, "the fleet's Service has no load-balancer address yet"
	}
	nack, blamed := rejectedRoutes(w, s)
	if !ok && nack != "" {
		msg += "; " + rejectionOf(nack, blamed)
	}
	after := gw.DeepCopy()
	st := gwr.out.Gateway
	st.Addresses = addresses
	setCondition(&st.Conditions, gw.Generation, string(gwv1.GatewayConditionProgrammed), ok, string(reason), msg)
	st.Conditions = mergeConditions(gw.Status.Conditions, st.Conditions)
	for i := range st.Listeners {
		l := &st.Listeners[i]
		lok, lreason, lmsg := ok, string(reason), msg
		if !gwr.out.ListenerValid[l.Name] {
			lok, lreason, lmsg = false, string(gwv1.ListenerReasonInvalid), "the listener is not served: see its other conditions"
		}
		setCondition(&l.Conditions, gw.Generation, string(gwv1.ListenerConditionProgrammed), lok, lreason, lmsg)
		var old []metav1.Condition
		if o := findListener(gw.Status.Listeners, l.Name); o != nil {
			old = o.Conditions
		}
		l.Conditions = mergeConditions(old, l.Conditions)
	}
	after.Status = st
	var errs []error
	if !equality.Semantic.DeepEqual(gw.Status, after.Status) {
		if err := r.Client.Status().Update(ctx, after); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating the status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err))
		}
	}
	httpParents, grpcParents := gwr.out.HTTPRoutes, gwr.out.GRPCRoutes
	if len(blamed) > 0 {
		httpParents, grpcParents = maps.Clone(httpParents), maps.Clone(grpcParents)
		for _, a := range blamed {
			m := httpParents
			if a.Route.Kind == "GRPCRoute" {
				m = grpcParents
			}
			m[a.Route.NamespacedName] = rejectedParents(m[a.Route.NamespacedName], a, nack)
		}
	}
	for key, rt := range gwr.httpRoutes {
		if parents := ourParents(rt.Status.Parents, gw, rt.Namespace, httpParents[key]); parents != nil {
			after := rt.DeepCopy()
			after.Status.Parents = parents
			errs = append(errs, r.writeRouteStatus(ctx, rt, after))
		}
	}
	for key, rt := range gwr.grpcRoutes {
		if parents := ourParents(rt.Status.Parents, gw, rt.Namespace, grpcParents[key]); parents != nil {
			after := rt.DeepCopy()
			after.Status.Parents = parents
			errs = append(errs, r.writeRouteStatus(ctx, rt, after))
		}
	}
	return errors.Join(errs...)
}

// ReasonRejectedByProxies is the reason of a route's Accepted condition
// when the fleet's proxies rejected a version of the Gateway's
// configuration, and their rejection names the route's rules.
const ReasonRejectedByProxies = "RejectedByProxies"

// rejectedRoutes is the proxies' rejection of the Gateway's configuration,
// if any, and the routes it names (gateway.Attribute): when every proxy
// rejected the newest version, its words read against the Gateway's
// Config as it is now; else those of a proxy that rejected the served
// version, against the Config that version serves.
func rejectedRoutes(w *world, s State) (string, []gateway.Attribution) {
	cfg := w.gateway.out.Config
	served := cfg
	for _, c := range w.published() {
		if c.Name == cfg.Name {
			served = c
		}
	}
	switch {
	case s.Rejected != "" && s.Rejected != publish.KnownRejection:
		return s.Rejected, gateway.Attribute(cfg, s.Rejected)
	case s.ServedRejected != "" && s.ServedRejected != publish.KnownRejection:
		return s.ServedRejected, gateway.Attribute(served, s.ServedRejected)
	case s.Proxies.Nacked > 0 && s.Proxies.LastNACK != "":
		return s.Proxies.LastNACK, gateway.Attribute(served, s.Proxies.LastNACK)
	}
	return "", nil
}

// rejectionOf says, for the Gateway's Programmed condition, what the
// proxies rejected: the routes their rejection names, or its words.
func rejectionOf(nack string, blamed []gateway.Attribution) string {
	if len(blamed) == 0 {
		return "the proxies rejected it: " + nack
	}
	routes := make([]string, 0, len(blamed))
	for _, a := range blamed {
		routes = append(routes, fmt.Sprintf("%s (generation %d)", a.Route, a.Generation))
	}
	return "the proxies' rejection names the rules of " + strings.Join(routes, ", ") + ": see their status"
}

// rejectedParents is a route's parent statuses with those that accepted
// it told that the proxies rejected its rules (a), in their words.
func rejectedParents(parents []gwv1.RouteParentStatus, a gateway.Attribution, nack string) []gwv1.RouteParentStatus {
	out := make([]gwv1.RouteParentStatus, len(parents))
	for i, p := range parents {
		p.Conditions = slices.Clone(p.Conditions)
		if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); c != nil && c.Status == metav1.ConditionTrue {
			c.Status, c.Reason = metav1.ConditionFalse, ReasonRejectedByProxies
			c.Message = fmt.Sprintf("the fleet's proxies rejected the route's rules of generation %d (%s): %s", a.Generation, strings.Join(a.Entries, ", "), nack)
		}
		out[i] = p
	}
	return out
}

// writeRouteStatus writes a route's status when it changed.
func (r *Reconciler) writeRouteStatus(ctx context.Context, before, after client.Object) error {
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, after); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating the status of %s %s/%s: %w", after.GetObjectKind().GroupVersionKind().Kind, after.GetNamespace(), after.GetName(), err)
	}
	return nil
}

// ourParents returns a route's parent statuses with this operator's entries
// for gw replaced by ours, the other controllers' and other Gateways'
// entries kept; nil when nothing changes. Conditions that did not change
// keep their lastTransitionTime.
func ourParents(old []gwv1.RouteParentStatus, gw *gwv1.Gateway, routeNS string, ours []gwv1.RouteParentStatus) []gwv1.RouteParentStatus {
	var out []gwv1.RouteParentStatus
	for _, p := range old {
		if p.ControllerName == gateway.ControllerName && parentIs(p.ParentRef, routeNS, gw) {
			continue
		}
		out = append(out, p)
	}
	for _, p := range ours {
		var conds []metav1.Condition
		for _, o := range old {
			if o.ControllerName == p.ControllerName && equality.Semantic.DeepEqual(o.ParentRef, p.ParentRef) {
				conds = o.Conditions
			}
		}
		p.Conditions = mergeConditions(conds, p.Conditions)
		out = append(out, p)
	}
	if out == nil {
		out = []gwv1.RouteParentStatus{}
	}
	if equality.Semantic.DeepEqual(old, out) || len(old) == 0 && len(out) == 0 {
		return nil
	}
	return out
}

// parentIs reports whether ref, of a route in namespace ns, names gw
// (gateway.ParentIs).
func parentIs(ref gwv1.ParentReference, ns string, gw *gwv1.Gateway) bool {
	return gateway.ParentIs(ref, ns, client.ObjectKeyFromObject(gw))
}

// serviceAddresses are the load-balancer addresses of the fleet's Service.
func (r *Reconciler) serviceAddresses(ctx context.Context, w *world) ([]gwv1.GatewayStatusAddress, error) {
	svc := &corev1.Service{}
	name := fleet.Name(w.envoy)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: w.id.Namespace, Name: name}, svc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	var out []gwv1.GatewayStatusAddress
	ip, host := gwv1.IPAddressType, gwv1.HostnameAddressType
	for _, in := range svc.Status.LoadBalancer.Ingress {
		switch {
		case in.IP != "":
			out = append(out, gwv1.GatewayStatusAddress{Type: &ip, Value: in.IP})
		case in.Hostname != "":
			out = append(out, gwv1.GatewayStatusAddress{Type: &host, Value: in.Hostname})
		}
	}
	return out, nil
}

// mergeConditions returns want with each condition's lastTransitionTime
// taken from old when its status did not change.
func mergeConditions(old, want []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(want))
	for _, c := range want {
		if o := meta.FindStatusCondition(old, c.Type); o != nil && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.Now()
		}
		out = append(out, c)
	}
	return out
}

// setCondition sets one condition, without its lastTransitionTime, which
// mergeConditions sets.
func setCondition(conds *[]metav1.Condition, gen int64, typ string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	c := metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen}
	if i := slices.IndexFunc(*conds, func(o metav1.Condition) bool { return o.Type == typ }); i >= 0 {
		(*conds)[i] = c
		return
	}
	*conds = append(*conds, c)
}

func findListener(ls []gwv1.ListenerStatus, name gwv1.SectionName) *gwv1.ListenerStatus {
	i := slices.IndexFunc(ls, func(l gwv1.ListenerStatus) bool { return l.Name == name })
	if i < 0 {
		return nil
	}
	return &ls[i]
}
