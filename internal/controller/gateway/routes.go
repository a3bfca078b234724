package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// A route's status has an entry per parent, each written by the controller
// of that parent (the envoyconfig controller writes ours, from the fleet's
// translation). A Gateway that is gone has no fleet to write its entries
// again, so they would stay as they were last written, Accepted, for
// whoever reads the route. The Gateway's controller takes them out: when
// it finds the Gateway gone, and when a route still names, in an entry of
// ours, a Gateway that is gone (what the operator finds at its start, if
// the Gateway went while it was down).

// gatewaysGone queues the Gateways that a route's entries of ours name
// and that the cache does not hold: for Reconcile to take the entries out.
func (r *Reconciler) gatewaysGone(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, key := range ourParents(o) {
		// A Gateway the cache holds is left to its own events; one it
		// could not read, Reconcile reads again.
		if err := r.Client.Get(ctx, key, &gwv1.Gateway{}); err != nil {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// ourParents returns the Gateways that a route's status entries of this
// operator's controller name.
func ourParents(o client.Object) []types.NamespacedName {
	var out []types.NamespacedName
	for _, p := range *parentsOf(o) {
		if p.ControllerName != gateway.ControllerName || p.ParentRef.Group != nil && *p.ParentRef.Group != gwv1.GroupName ||
			p.ParentRef.Kind != nil && *p.ParentRef.Kind != "Gateway" {
			continue
		}
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: string(p.ParentRef.Name)}
		if p.ParentRef.Namespace != nil && *p.ParentRef.Namespace != "" {
			key.Namespace = string(*p.ParentRef.Namespace)
		}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// leaveRoutes takes the status entries of ours for the Gateway gw, which
// is gone, out of every route that has one. Each route's write is its
// own; the first error is returned, for the queue to retry.
func (r *Reconciler) leaveRoutes(ctx context.Context, gw types.NamespacedName) error {
	var https gwv1.HTTPRouteList
	var grpcs gwv1.GRPCRouteList
	for _, list := range []client.ObjectList{&https, &grpcs} {
		if err := r.Client.List(ctx, list); err != nil {
			return fmt.Errorf("listing routes to take Gateway %s out of their status: %w", gw, err)
		}
	}
	routes := make([]client.Object, 0, len(https.Items)+len(grpcs.Items))
	for i := range https.Items {
		routes = append(routes, &https.Items[i])
	}
	for i := range grpcs.Items {
		routes = append(routes, &grpcs.Items[i])
	}
	var errs []error
	for _, rt := range routes {
		if kept, ok := without(*parentsOf(rt), rt.GetNamespace(), gw); ok {
			after := rt.DeepCopyObject().(client.Object)
			*parentsOf(after) = kept
			errs = append(errs, client.IgnoreNotFound(r.Client.Status().Update(ctx, after)))
		}
	}
	return errors.Join(errs...)
}

// parentsOf returns where a route (an HTTPRoute or a GRPCRoute) keeps its
// status entries.
func parentsOf(o client.Object) *[]gwv1.RouteParentStatus {
	switch rt := o.(type) {
	case *gwv1.HTTPRoute:
		return &rt.Status.Parents
	case *gwv1.GRPCRoute:
		return &rt.Status.Parents
	}
	return &[]gwv1.RouteParentStatus{}
}

// without returns a route's parents without the entries of ours for gw,
// and whether there were any.
func without(parents []gwv1.RouteParentStatus, ns string, gw types.NamespacedName) ([]gwv1.RouteParentStatus, bool) {
	kept := slices.DeleteFunc(slices.Clone(parents), func(p gwv1.RouteParentStatus) bool {
		return p.ControllerName == gateway.ControllerName && gateway.ParentIs(p.ParentRef, ns, gw)
	})
	return kept, len(kept) != len(parents)
}
