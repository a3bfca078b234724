package envoyconfig

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// gatewayWorld is what a reconcile reads of a fleet that serves a Gateway:
// the Gateway and its translation (xds/gateway), whose Config joins the
// fleet's EnvoyConfigs in w.current.
type gatewayWorld struct {
	gateway *gwv1.Gateway
	in      gateway.Input
	out     gateway.Output
	// httpRoutes and grpcRoutes are the routes that name the Gateway, as
	// read, for their status.
	httpRoutes map[types.NamespacedName]*gwv1.HTTPRoute
	grpcRoutes map[types.NamespacedName]*gwv1.GRPCRoute
	// secrets are the Secrets its listeners' certificates come from, by
	// the name the Config's tlsSecrets give them.
	secrets map[string]corev1.Secret
	// services are the backend Services its Config takes endpoints from
	// (namespace/name), for the watches.
	services []types.NamespacedName
	// rejected are the routes whose rules every proxy rejected
	// (withholdRejectedRoutes), refused alone whatever the judge says of
	// the others.
	rejected map[gateway.RouteKey]gateway.Refusal
}

// gatewayOf returns the Gateway that controls the fleet's Envoy, when the
// Gateway API is installed and the Gateway's class is this operator's; nil
// otherwise.
func (r *Reconciler) gatewayOf(ctx context.Context, w *world) (*gwv1.Gateway, *gwv1.GatewayClass, error) {
	if !r.GatewayAPI || w.envoy == nil {
		return nil, nil, nil
	}
	owner := metav1.GetControllerOf(w.envoy)
	if owner == nil || owner.Kind != "Gateway" || owner.APIVersion != gwv1.GroupVersion.String() {
		return nil, nil, nil
	}
	gw := &gwv1.Gateway{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: w.id.Namespace, Name: owner.Name}, gw); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	if gw.UID != owner.UID || !gw.DeletionTimestamp.IsZero() {
		return nil, nil, nil
	}
	class := &gwv1.GatewayClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, class); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	if class.Spec.ControllerName != gateway.ControllerName {
		return nil, nil, nil
	}
	return gw, class, nil
}

// readGateway reads, for a fleet that serves a Gateway, what the Gateway's
// translation needs, translates it, and adds its Config to w.current.
// Backend Services and listeners' Secrets are read from the API server,
// not the cache: the operator caches only the Services it made and the
// Secrets labelled for the control plane.
func (r *Reconciler) readGateway(ctx context.Context, w *world) error {
	gw, class, err := r.gatewayOf(ctx, w)
	if err != nil || gw == nil {
		r.gatewayBackends.set(w.id, nil)
		r.gatewayBackends.setSecrets(w.id, nil)
		return err
	}
	r.gatewayBackends.setSecrets(w.id, gateway.CertificateSecrets(*gw))
	in := gateway.Input{Class: *class, Gateway: *gw, FleetName: w.id.Name,
		Namespaces: map[string]map[string]string{}, Services: map[types.NamespacedName]corev1.Service{},
		Secrets: map[types.NamespacedName]corev1.Secret{}}
	gwr := &gatewayWorld{gateway: gw}

	var httpRoutes gwv1.HTTPRouteList
	if err := r.Client.List(ctx, &httpRoutes); err != nil {
		return err
	}
	gwr.httpRoutes = routesOf(httpRoutes.Items, gw, func(rt *gwv1.HTTPRoute) ([]gwv1.ParentReference, []gwv1.RouteParentStatus) {
		return rt.Spec.ParentRefs, rt.Status.Parents
	})
	for _, rt := range gwr.httpRoutes {
		in.HTTPRoutes = append(in.HTTPRoutes, *rt)
	}
	var grpcRoutes gwv1.GRPCRouteList
	if err := r.Client.List(ctx, &grpcRoutes); err != nil {
		return err
	}
	gwr.grpcRoutes = routesOf(grpcRoutes.Items, gw, func(rt *gwv1.GRPCRoute) ([]gwv1.ParentReference, []gwv1.RouteParentStatus) {
		return rt.Spec.ParentRefs, rt.Status.Parents
	})
	for _, rt := range gwr.grpcRoutes {
		in.GRPCRoutes = append(in.GRPCRoutes, *rt)
	}
	var grants gwv1beta1.ReferenceGrantList
	if err := r.Client.List(ctx, &grants); err != nil {
		return err
	}
	in.Grants = grants.Items
	var namespaces corev1.NamespaceList
	if err := r.Client.List(ctx, &namespaces); err != nil {
		return err
	}
	for _, ns := range namespaces.Items {
		in.Namespaces[ns.Name] = ns.Labels
	}
	for _, key := range gateway.BackendServices(in) {
		svc := &corev1.Service{}
		switch err := r.APIReader.Get(ctx, key, svc); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			in.Services[key] = *svc
		}
	}
	for _, key := range gateway.CertificateSecrets(*gw) {
		s := &corev1.Secret{}
		switch err := r.APIReader.Get(ctx, key, s); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			in.Secrets[key] = *s
		}
	}

	gwr.in, gwr.out = in, gateway.Translate(in)
	gwr.secrets = gateway.ServedSecrets(in, gwr.out.Config)
	for _, se := range gwr.out.Config.Spec.ServiceEndpoints {
		gwr.services = append(gwr.services, refKey(se.Service, gw.Namespace))
	}
	w.gateway = gwr
	w.current = append(w.current, gwr.out.Config)
	r.gatewayBackends.set(w.id, gwr.services)
	return nil
}

// routesOf returns, by name, the routes of items that are not being
// deleted and that name gw in their spec, or whose status has this
// operator's entry for gw (a parentRef taken away, which the status loses).
// Translation ignores the latter.
func routesOf[T any, P interface {
	*T
	client.Object
}](items []T, gw *gwv1.Gateway, refs func(P) ([]gwv1.ParentReference, []gwv1.RouteParentStatus)) map[types.NamespacedName]P {
	out := map[types.NamespacedName]P{}
	for i := range items {
		rt := P(&items[i])
		spec, parents := refs(rt)
		ours := slices.ContainsFunc(parents, func(p gwv1.RouteParentStatus) bool {
			return p.ControllerName == gateway.ControllerName && parentIs(p.ParentRef, rt.GetNamespace(), gw)
		})
		if rt.GetDeletionTimestamp().IsZero() && (ours || namesGateway(rt.GetNamespace(), spec, gw)) {
			out[client.ObjectKeyFromObject(rt)] = rt
		}
	}
	return out
}

// refKey reads a Config's reference to a Service or a Secret: "name" in
// the Gateway's namespace, or "namespace/name" (gateway.RefKey).
func refKey(ref, ns string) types.NamespacedName { return gateway.RefKey(ref, ns) }

// namesGateway reports whether parentRefs, of a route in namespace ns, name
// the Gateway gw (gateway.ParentIs).
func namesGateway(ns string, refs []gwv1.ParentReference, gw *gwv1.Gateway) bool {
	return slices.ContainsFunc(refs, func(p gwv1.ParentReference) bool { return parentIs(p, ns, gw) })
}

// gatewayBackends remembers, by fleet, the backend Services its Gateway's
// last translation took endpoints from: an EndpointSlice of one of them
// queues the fleet. It remembers too the Secrets its Gateway's listeners
// name as certificates: a change of one that the manager's cache holds
// (one labelled for the control plane) queues the fleet (fleetsOfSecret).
type gatewayBackends struct {
	m       sync.Map // fleet.ID → []types.NamespacedName
	secrets sync.Map // fleet.ID → []types.NamespacedName
}

func (b *gatewayBackends) setSecrets(id fleet.ID, secrets []types.NamespacedName) {
	if len(secrets) == 0 {
		b.secrets.Delete(id)
		return
	}
	b.secrets.Store(id, secrets)
}

// fleetsOfSecret returns the fleets whose Gateway's listeners name the
// Secret s as a certificate.
func (b *gatewayBackends) fleetsOfSecret(s types.NamespacedName) []reconcile.Request {
	return fleetsNaming(&b.secrets, s)
}

// fleetsNaming returns the fleets of m (fleet.ID → []types.NamespacedName)
// that name key.
func fleetsNaming(m *sync.Map, key types.NamespacedName) []reconcile.Request {
	var out []reconcile.Request
	m.Range(func(k, v any) bool {
		if slices.Contains(v.([]types.NamespacedName), key) {
			id := k.(fleet.ID)
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		}
		return true
	})
	return out
}

func (b *gatewayBackends) set(id fleet.ID, services []types.NamespacedName) {
	if len(services) == 0 {
		b.m.Delete(id)
		return
	}
	b.m.Store(id, services)
}

// fleetsOf returns the fleets whose Gateway takes endpoints from svc.
func (b *gatewayBackends) fleetsOf(svc types.NamespacedName) []reconcile.Request {
	return fleetsNaming(&b.m, svc)
}

// watchGateways adds the Gateway API's objects to what queues fleets: a
// Gateway queues its fleet; a route, the fleets of the Gateways its
// parentRefs name, before and after a change; a GatewayClass, a
// ReferenceGrant or a Namespace (whose labels listeners select routes by),
// every Gateway's fleet; the fleet's own Service, whose load-balancer
// address is the Gateway's.
func (r *Reconciler) watchGateways(b *builder.Builder) *builder.Builder {
	if !r.GatewayAPI {
		return b
	}
	routes := func(_ context.Context, o client.Object) []reconcile.Request {
		var refs []gwv1.ParentReference
		switch rt := o.(type) {
		case *gwv1.HTTPRoute:
			refs = rt.Spec.ParentRefs
			for _, p := range rt.Status.Parents {
				refs = append(refs, p.ParentRef)
			}
		case *gwv1.GRPCRoute:
			refs = rt.Spec.ParentRefs
			for _, p := range rt.Status.Parents {
				refs = append(refs, p.ParentRef)
			}
		}
		var out []reconcile.Request
		for _, p := range refs {
			if p.Group != nil && *p.Group != gwv1.GroupName || p.Kind != nil && *p.Kind != "Gateway" {
				continue
			}
			ns := o.GetNamespace()
			if p.Namespace != nil {
				ns = string(*p.Namespace)
			}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: gateway.FleetName(string(p.Name))}}
			if !slices.Contains(out, req) {
				out = append(out, req)
			}
		}
		return out
	}
	everyGateway := func(ctx context.Context, o client.Object) []reconcile.Request {
		var list gwv1.GatewayList
		if err := r.Client.List(ctx, &list); err != nil {
			// Every fleet with a history, which a Gateway's fleet has once served.
			logf.FromContext(ctx).Error(err, "listing the Gateways; resyncing every fleet")
			return []reconcile.Request{resyncRequest("")}
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, gw := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: gw.Namespace, Name: gateway.FleetName(gw.Name)}})
		}
		return out
	}
	return b.
		Watches(&gwv1.Gateway{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: gateway.FleetName(o.GetName())}}}
		})).
		Watches(&gwv1.HTTPRoute{}, handler.EnqueueRequestsFromMapFunc(routes)).
		Watches(&gwv1.GRPCRoute{}, handler.EnqueueRequestsFromMapFunc(routes)).
		Watches(&gwv1.GatewayClass{}, handler.EnqueueRequestsFromMapFunc(everyGateway)).
		Watches(&gwv1beta1.ReferenceGrant{}, handler.EnqueueRequestsFromMapFunc(everyGateway)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(everyGateway)).
		Watches(&corev1.Service{}, handler.EnqueueRequestForOwner(r.Client.Scheme(), r.Client.RESTMapper(), &examplev1.Envoy{}, handler.OnlyControllerOwner()))
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses;gateways;httproutes;grpcroutes;referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/status;httproutes/status;grpcroutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services;secrets,verbs=get;list;watch

// isolateRoutes is the judge phase's part for a Gateway whose content the
// rules or a real Envoy refused: it translates each of the Gateway's
// routes alone (its translation with that route as the only one,
// gateway.Input.Alone), checks it with the rules of in and, when they pass
// and an Envoy is available, has Envoy load it; then it translates the
// Gateway again without the routes refused alone (gateway.Input.Refused),
// each keeping the rules the fleet's published revision serves of it, if
// any (gateway.Input.Published). So a route's refused change is withheld
// from it alone: its earlier rules and the Gateway's other routes are
// served. again is set when that changed the Gateway's
// content; retry when a verdict may be another on a second try. The
// judge's cache makes a route loaded before free.
func (r *Reconciler) isolateRoutes(ctx context.Context, w *world, in translate.Input, unavailable string) (again, retry bool) {
	gwr := w.gateway
	refused := map[gateway.RouteKey]gateway.Refusal{}
	var keys []gateway.RouteKey
	var load []translate.Config
	for _, k := range gwr.in.Routes() {
		alone := gateway.Translate(gwr.in.Alone(k)).Config
		rules := translate.Translate(translate.Input{Configs: []translate.Config{alone}, Slices: in.Slices, Secrets: in.Secrets, Policy: in.Policy})
		if st := rules.Configs[alone.Name]; len(st.Invalid) > 0 || len(st.Refused) > 0 {
			refused[k] = gateway.Refusal{Reason: string(gwv1.RouteReasonUnsupportedValue),
				Message: "the route is not served: " + strings.Join(append(st.Invalid, st.Refused...), "; ")}
			continue
		}
		if unavailable == "" {
			keys, load = append(keys, k), append(load, alone)
		}
	}
	for i, v := range r.loadAll(ctx, load, nil) {
		retry = retry || v.Outcome == envoyjudge.TimedOut || v.Outcome == envoyjudge.Unjudged
		if v.Refuses() {
			refused[keys[i]] = gateway.Refusal{Reason: gateway.ReasonRefusedByEnvoy, Message: v.Message}
		}
	}
	return r.refuseRoutes(w, refused), retry
}

// refuseRoutes translates the fleet's Gateway again with the routes of
// refused, and those every proxy rejected, refused alone, each keeping the
// rules the fleet's published revision serves of it (as a refused
// EnvoyConfig keeps its published content), and puts its Config in
// w.current; it reports whether that changed what the Gateway's
// translation refuses.
func (r *Reconciler) refuseRoutes(w *world, refused map[gateway.RouteKey]gateway.Refusal) bool {
	gwr := w.gateway
	refused = maps.Clone(refused)
	if refused == nil {
		refused = map[gateway.RouteKey]gateway.Refusal{}
	}
	for k, why := range gwr.rejected {
		if _, ok := refused[k]; !ok {
			refused[k] = why
		}
	}
	if maps.Equal(refused, gwr.in.Refused) || len(refused) == 0 && len(gwr.in.Refused) == 0 {
		return false
	}
	gwr.in.Refused = refused
	gwr.in.Published = gateway.PublishedOf(w.published(), client.ObjectKeyFromObject(gwr.gateway))
	gwr.out = gateway.Translate(gwr.in)
	for i := range w.current {
		if w.current[i].Name == gwr.out.Config.Name {
			w.current[i] = gwr.out.Config
		}
	}
	return true
}

// withholdRejectedRoutes withholds alone the routes whose rules every
// proxy rejected: when the Gateway's content is one the fleet withholds
// (every proxy rejected it, translate.Withheld) and the proxies' words
// name routes' rules (gateway.Attribute), those routes are refused alone
// and keep their earlier rules, and the Gateway's other changes are
// served, rather than the Gateway's whole content held back. The
// Gateway's content is also known for one every proxy rejected when ir,
// its translation, is a revision of the history that they rejected: the
// reconcile that withholds the routes records the Gateway's content
// without them, and so forgets the withheld content, before it writes the
// routes' status, and that write may fail. It reports whether that
// changed the Gateway's content.
//
// The route's status keeps it: the fleet's history forgets the Gateway's
// rejected content once the Gateway's content is another, so a route whose
// status says that every proxy rejected its generation stays refused alone
// until it changes.
func (r *Reconciler) withholdRejectedRoutes(w *world, ir translate.IR) bool {
	gwr := w.gateway
	gwr.rejected = map[gateway.RouteKey]gateway.Refusal{}
	for key, rt := range gwr.httpRoutes {
		if why, ok := rejectedByStatus(rt.Status.Parents, gwr.gateway, rt.Namespace, rt.Generation); ok {
			gwr.rejected[gateway.RouteKey{Kind: "HTTPRoute", NamespacedName: key}] = why
		}
	}
	for key, rt := range gwr.grpcRoutes {
		if why, ok := rejectedByStatus(rt.Status.Parents, gwr.gateway, rt.Namespace, rt.Generation); ok {
			gwr.rejected[gateway.RouteKey{Kind: "GRPCRoute", NamespacedName: key}] = why
		}
	}
	version, detail := "", ""
	if wh, ok := w.stored.History.Withheld[gwr.out.Config.Name]; ok && wh.Content == translate.ContentOf(gwr.out.Config) {
		version, detail = wh.Version, wh.Detail
	} else if rev := w.stored.History.Find(ir.Version); rev != nil && rev.Rejected != "" && rev.Rejected != publish.KnownRejection {
		// The history forgot the withheld content when the reconcile that
		// withheld the routes recorded the Gateway's content without them,
		// but that reconcile's write of the routes' status may have failed
		// (a conflict with a stale read): the history's revision of the
		// Gateway's content, which every proxy rejected, still says it.
		version, detail = rev.Version, rev.Rejected
	}
	if detail != "" {
		for _, a := range gateway.Attribute(gwr.out.Config, detail) {
			gwr.rejected[a.Route] = gateway.Refusal{Reason: ReasonRejectedByProxies, Message: fmt.Sprintf(
				"%s %d (%s) in version %s: %s", everyProxyRejected, a.Generation, strings.Join(a.Entries, ", "), version, detail)}
		}
	}
	if len(gwr.rejected) == 0 {
		return false
	}
	return r.refuseRoutes(w, gwr.in.Refused)
}

// everyProxyRejected starts the message of a route withheld alone because
// every proxy rejected its rules (withholdRejectedRoutes).
const everyProxyRejected = "every proxy rejected the route's rules of generation"

// rejectedByStatus returns the refusal that a route's parent status for gw
// says it is withheld alone by, at its generation, because every proxy
// rejected its rules; without what translation adds to it.
func rejectedByStatus(parents []gwv1.RouteParentStatus, gw *gwv1.Gateway, ns string, generation int64) (gateway.Refusal, bool) {
	for _, p := range parents {
		if p.ControllerName != gateway.ControllerName || !parentIs(p.ParentRef, ns, gw) {
			continue
		}
		a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
		if a != nil && a.Status == metav1.ConditionFalse && a.Reason == ReasonRejectedByProxies && a.ObservedGeneration == generation &&
			strings.HasPrefix(a.Message, everyProxyRejected) {
			msg, _, _ := strings.Cut(a.Message, gateway.KeptSuffix)
			return gateway.Refusal{Reason: ReasonRejectedByProxies, Message: msg}, true
		}
	}
	return gateway.Refusal{}, false
}
