package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// This file is diff's functional core for the Gateway API: from the Gateway
// API objects the cluster holds and those of the files, each touched
// Gateway's translate.Config as it is and as it would be, made by the
// operator's own stage (gateway.Translate) from the Input the operator
// builds. diff then compares what the Gateway's fleet is served with the
// Config as it is and as it would be, as it compares EnvoyConfig edits
// (plan).

// Kinds of the Gateway API that diff reads in the files.
const kindReferenceGrant = "ReferenceGrant"

// gatewayFile is one Gateway API object of the files, decoded: one of
// gateway, http, grpc and grant is set.
type gatewayFile struct {
	where   string
	kind    string
	key     types.NamespacedName
	gateway *gwv1.Gateway
	http    *gwv1.HTTPRoute
	grpc    *gwv1.GRPCRoute
	grant   *gwv1beta1.ReferenceGrant
}

// object is the file's object.
func (f gatewayFile) object() metav1.Object {
	switch {
	case f.gateway != nil:
		return f.gateway
	case f.http != nil:
		return f.http
	case f.grpc != nil:
		return f.grpc
	}
	return f.grant
}

// decodeGatewayFiles returns the Gateways, HTTPRoutes, GRPCRoutes and
// ReferenceGrants among docs, in order, each decoded strictly. An object
// without a namespace is in namespace. Other kinds are left to
// decodeConfigs; an object given twice, or that does not decode, is a
// problem.
func decodeGatewayFiles(docs []manifest, namespace string) (files []gatewayFile, problems []string) {
	seen := map[string]string{}
	for _, m := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(m.data, &tm); err != nil {
			continue // decodeConfigs says so
		}
		group, _, _ := strings.Cut(tm.APIVersion, "/")
		if group != gwv1.GroupName {
			continue
		}
		f := gatewayFile{where: m.where(), kind: tm.Kind}
		var obj any
		switch tm.Kind {
		case kindGateway:
			f.gateway = &gwv1.Gateway{}
			obj = f.gateway
		case kindHTTPRoute:
			f.http = &gwv1.HTTPRoute{}
			obj = f.http
		case kindGRPCRoute:
			f.grpc = &gwv1.GRPCRoute{}
			obj = f.grpc
		case kindReferenceGrant:
			f.grant = &gwv1beta1.ReferenceGrant{}
			obj = f.grant
		default:
			problems = append(problems, fmt.Sprintf("%s: %s %s: diff reads Gateways, HTTPRoutes, GRPCRoutes and ReferenceGrants of the Gateway API, not %ss",
				m.where(), tm.Kind, nameOf(m.data), tm.Kind))
			continue
		}
		// Every version of these kinds has the schema of v1's (v1beta1's
		// for ReferenceGrant), the version they are decoded into.
		if err := yaml.UnmarshalStrict(m.data, obj); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s %s: %v", m.where(), tm.Kind, nameOf(m.data), err))
			continue
		}
		version := gwv1.GroupVersion.String()
		if f.grant != nil {
			version = gwv1beta1.GroupVersion.String()
		}
		obj.(schema.ObjectKind).SetGroupVersionKind(schema.FromAPIVersionAndKind(version, tm.Kind))
		o := f.object()
		if o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		f.key = types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		id := f.kind + " " + f.key.String()
		if first, dup := seen[id]; dup {
			problems = append(problems, fmt.Sprintf("%s: %s is also in %s", m.where(), id, first))
			continue
		}
		seen[id] = m.where()
		files = append(files, f)
	}
	return files, problems
}

// gatewayObjects are the Gateway API objects, and what else a Gateway's
// translation reads, as the cluster holds them or as the files would
// leave them.
type gatewayObjects struct {
	// classes are the GatewayClasses of the Gateways, by name; a class
	// that the caller may not read is nil, and taken to be this
	// operator's.
	classes    map[string]*gwv1.GatewayClass
	gateways   map[types.NamespacedName]gwv1.Gateway
	httpRoutes map[types.NamespacedName]gwv1.HTTPRoute
	grpcRoutes map[types.NamespacedName]gwv1.GRPCRoute
	grants     map[types.NamespacedName]gwv1beta1.ReferenceGrant
	// namespaces are the namespaces' labels, by name.
	namespaces map[string]map[string]string
	// services and secrets are the routes' backend Services and the
	// listeners' certificate Secrets; one missing does not exist.
	services map[types.NamespacedName]corev1.Service
	secrets  map[types.NamespacedName]corev1.Secret
}

func newGatewayObjects() gatewayObjects {
	return gatewayObjects{
		classes:    map[string]*gwv1.GatewayClass{},
		gateways:   map[types.NamespacedName]gwv1.Gateway{},
		httpRoutes: map[types.NamespacedName]gwv1.HTTPRoute{},
		grpcRoutes: map[types.NamespacedName]gwv1.GRPCRoute{},
		grants:     map[types.NamespacedName]gwv1beta1.ReferenceGrant{},
		namespaces: map[string]map[string]string{},
		services:   map[types.NamespacedName]corev1.Service{},
		secrets:    map[types.NamespacedName]corev1.Secret{},
	}
}

// with returns g with the files' objects applied, in order, as kubectl
// apply would store them: a file's object replaces the spec of the live
// one, which keeps its metadata (its creation time orders routes) and its
// status; one that is new is created at now, in order.
func (g gatewayObjects) with(files []gatewayFile, now time.Time) gatewayObjects {
	out := g
	out.gateways, out.httpRoutes, out.grpcRoutes, out.grants = maps.Clone(g.gateways), maps.Clone(g.httpRoutes), maps.Clone(g.grpcRoutes), maps.Clone(g.grants)
	created := func(i int, o metav1.Object) {
		o.SetCreationTimestamp(metav1.NewTime(now.Add(time.Duration(i) * time.Millisecond)))
		o.SetGeneration(1)
	}
	for i, f := range files {
		switch {
		case f.gateway != nil:
			gw, ok := out.gateways[f.key]
			if !ok {
				gw = *f.gateway.DeepCopy()
				created(i, &gw)
			} else if !equality.Semantic.DeepEqual(gw.Spec, f.gateway.Spec) {
				gw.Spec, gw.Generation = *f.gateway.Spec.DeepCopy(), gw.Generation+1
			}
			out.gateways[f.key] = gw
		case f.http != nil:
			rt, ok := out.httpRoutes[f.key]
			if !ok {
				rt = *f.http.DeepCopy()
				created(i, &rt)
			} else if !equality.Semantic.DeepEqual(rt.Spec, f.http.Spec) {
				rt.Spec, rt.Generation = *f.http.Spec.DeepCopy(), rt.Generation+1
			}
			out.httpRoutes[f.key] = rt
		case f.grpc != nil:
			rt, ok := out.grpcRoutes[f.key]
			if !ok {
				rt = *f.grpc.DeepCopy()
				created(i, &rt)
			} else if !equality.Semantic.DeepEqual(rt.Spec, f.grpc.Spec) {
				rt.Spec, rt.Generation = *f.grpc.Spec.DeepCopy(), rt.Generation+1
			}
			out.grpcRoutes[f.key] = rt
		case f.grant != nil:
			out.grants[f.key] = *f.grant.DeepCopy()
		}
	}
	return out
}

// touchedGateways returns the Gateways whose translation the files may
// change, in order: those of the files; those the files' routes name in
// their parentRefs, as they are and as the files have them; and, for a
// ReferenceGrant of the files, every Gateway of live.
func touchedGateways(live gatewayObjects, files []gatewayFile) []types.NamespacedName {
	set := map[types.NamespacedName]bool{}
	addRefs := func(ns string, refs []gwv1.ParentReference) {
		for _, p := range refs {
			if p.Group != nil && *p.Group != gwv1.GroupName || p.Kind != nil && *p.Kind != kindGateway {
				continue
			}
			key := types.NamespacedName{Namespace: ns, Name: string(p.Name)}
			if p.Namespace != nil {
				key.Namespace = string(*p.Namespace)
			}
			set[key] = true
		}
	}
	for _, f := range files {
		switch {
		case f.gateway != nil:
			set[f.key] = true
		case f.http != nil:
			addRefs(f.key.Namespace, f.http.Spec.ParentRefs)
			if rt, ok := live.httpRoutes[f.key]; ok {
				addRefs(f.key.Namespace, rt.Spec.ParentRefs)
			}
		case f.grpc != nil:
			addRefs(f.key.Namespace, f.grpc.Spec.ParentRefs)
			if rt, ok := live.grpcRoutes[f.key]; ok {
				addRefs(f.key.Namespace, rt.Spec.ParentRefs)
			}
		case f.grant != nil:
			for k := range live.gateways {
				set[k] = true
			}
		}
	}
	return slices.SortedFunc(maps.Keys(set), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
}

// input is the Input the operator translates the Gateway gw from, as it
// builds it: every route (translation keeps those that name gw), the
// ReferenceGrants, the namespaces' labels, the backends' Services and the
// listeners' Secrets; and the routes the operator has refused alone, as
// their status records them (refusedRoutes), but for those of changed,
// which it judges again. ok is false when there is no such Gateway, or its
// class is not this operator's: nothing of it is served.
func (g gatewayObjects) input(gw types.NamespacedName, changed map[gateway.RouteKey]bool) (in gateway.Input, ok bool) {
	obj, exists := g.gateways[gw]
	if !exists || !obj.DeletionTimestamp.IsZero() {
		return in, false
	}
	class, known := g.classes[string(obj.Spec.GatewayClassName)]
	switch {
	case !known:
		return in, false
	case class == nil: // not readable: taken to be this operator's
		class = &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: string(obj.Spec.GatewayClassName)}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	case class.Spec.ControllerName != gateway.ControllerName:
		return in, false
	}
	in = gateway.Input{Class: *class, Gateway: obj, FleetName: gateway.FleetName(gw.Name),
		Namespaces: g.namespaces, Services: g.services, Secrets: g.secrets}
	for _, k := range sortedKeys(g.httpRoutes) {
		if rt := g.httpRoutes[k]; rt.DeletionTimestamp.IsZero() {
			in.HTTPRoutes = append(in.HTTPRoutes, rt)
		}
	}
	for _, k := range sortedKeys(g.grpcRoutes) {
		if rt := g.grpcRoutes[k]; rt.DeletionTimestamp.IsZero() {
			in.GRPCRoutes = append(in.GRPCRoutes, rt)
		}
	}
	for _, k := range sortedKeys(g.grants) {
		in.Grants = append(in.Grants, g.grants[k])
	}
	in.Refused = refusedRoutes(in, changed)
	return in, true
}

func sortedKeys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	return slices.SortedFunc(maps.Keys(m), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
}

// refusedRoutes returns the routes of in that the operator refused alone
// (gateway.Input.Refused), as their status for in's Gateway records it for
// their generation: Accepted False, because a real Envoy refused the route
// (gateway.ReasonRefusedByEnvoy) or its content broke the rules
// (UnsupportedValue, "the route is not served: ..."). A route of changed
// is judged again, and left out.
func refusedRoutes(in gateway.Input, changed map[gateway.RouteKey]bool) map[gateway.RouteKey]gateway.Refusal {
	out := map[gateway.RouteKey]gateway.Refusal{}
	add := func(k gateway.RouteKey, generation int64, parents []gwv1.RouteParentStatus) {
		if changed[k] {
			return
		}
		for _, p := range parents {
			if p.ControllerName != gateway.ControllerName || !gateway.ParentIs(p.ParentRef, k.Namespace, types.NamespacedName{Namespace: in.Gateway.Namespace, Name: in.Gateway.Name}) {
				continue
			}
			c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
			if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != generation {
				continue
			}
			if c.Reason == gateway.ReasonRefusedByEnvoy ||
				c.Reason == string(gwv1.RouteReasonUnsupportedValue) && strings.HasPrefix(c.Message, "the route is not served: ") {
				out[k] = gateway.Refusal{Reason: c.Reason, Message: c.Message}
			}
		}
	}
	for _, rt := range in.HTTPRoutes {
		add(gateway.RouteKey{Kind: kindHTTPRoute, NamespacedName: types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}}, rt.Generation, rt.Status.Parents)
	}
	for _, rt := range in.GRPCRoutes {
		add(gateway.RouteKey{Kind: kindGRPCRoute, NamespacedName: types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}}, rt.Generation, rt.Status.Parents)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// gatewayChange is what the files change of one Gateway: its Config as
// translated now and as it would be (nil when it is not served), and what
// its translation reports of the files' objects.
type gatewayChange struct {
	gateway       types.NamespacedName
	before, after *translate.Config
	// secrets are the Secrets the Configs serve, by the name their
	// tlsSecrets give them, marked as the operator marks a Secret a
	// listener may serve.
	secrets map[string]corev1.Secret
	notes   []string
}

// fleet is the Gateway's fleet.
func (c gatewayChange) fleet() fleet.ID {
	return fleet.ID{Namespace: c.gateway.Namespace, Name: gateway.FleetName(c.gateway.Name)}
}

// planGateways translates each Gateway of touched as live holds it and as
// after (live with the files) would, as the operator does: a route the
// operator refused alone keeps the rules the fleet's served revision
// serves of it, published (servedGateways) holding the Gateway's Config as
// that revision does (gateway.Input.Published). Without it, such a route
// shows as removed.
func planGateways(live, after gatewayObjects, files []gatewayFile, touched []types.NamespacedName, published map[types.NamespacedName]*translate.Config) []gatewayChange {
	changed := map[gateway.RouteKey]bool{}
	for _, f := range files {
		if f.http != nil || f.grpc != nil {
			changed[gateway.RouteKey{Kind: gwv1.Kind(f.kind), NamespacedName: f.key}] = true
		}
	}
	var out []gatewayChange
	for _, gw := range touched {
		c := gatewayChange{gateway: gw, secrets: map[string]corev1.Secret{}}
		if in, ok := live.input(gw, nil); ok {
			in.Published = published[gw]
			o := gateway.Translate(in)
			c.before = &o.Config
			c.addSecrets(in, o.Config)
		}
		in, ok := after.input(gw, changed)
		if !ok {
			if _, exists := after.gateways[gw]; exists {
				c.notes = append(c.notes, fmt.Sprintf("Gateway %s: its class %s is not served by %s", gw, after.gateways[gw].Spec.GatewayClassName, gateway.ControllerName))
			} else if c.before == nil {
				c.notes = append(c.notes, fmt.Sprintf("Gateway %s does not exist", gw))
			}
			out = append(out, c)
			continue
		}
		in.Published = published[gw]
		o := gateway.Translate(in)
		c.after = &o.Config
		c.addSecrets(in, o.Config)
		c.notes = append(c.notes, translationNotes(gw, files, o)...)
		out = append(out, c)
	}
	return out
}

// servedGateways are the Configs of the Gateways of touched as their
// fleets' served revisions, in histories, hold them (gateway.PublishedOf);
// a Gateway whose fleet has none, or whose revision holds none of it, is
// left out.
func servedGateways(histories map[fleet.ID]publish.History, touched []types.NamespacedName) map[types.NamespacedName]*translate.Config {
	out := map[types.NamespacedName]*translate.Config{}
	for _, gw := range touched {
		rev := histories[fleet.ID{Namespace: gw.Namespace, Name: gateway.FleetName(gw.Name)}].Served()
		if rev == nil {
			continue
		}
		if c := gateway.PublishedOf(rev.Configs, gw); c != nil {
			out[gw] = c
		}
	}
	return out
}

// addSecrets adds the Secrets of in that cfg, in's translation, serves.
func (c *gatewayChange) addSecrets(in gateway.Input, cfg translate.Config) {
	maps.Copy(c.secrets, gateway.ServedSecrets(in, cfg))
}

// translationNotes are what the Gateway gw's translation o reports of the
// files' objects that is not all well: a condition False (True for
// Conflicted) of the Gateway or a listener, and of a route's parent.
func translationNotes(gw types.NamespacedName, files []gatewayFile, o gateway.Output) []string {
	var out []string
	bad := func(c metav1.Condition) bool {
		if c.Type == string(gwv1.ListenerConditionConflicted) {
			return c.Status == metav1.ConditionTrue
		}
		return c.Status == metav1.ConditionFalse
	}
	say := func(who string, cs []metav1.Condition) {
		sorted := slices.Clone(cs)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Type < sorted[j].Type })
		for _, c := range sorted {
			if bad(c) {
				out = append(out, fmt.Sprintf("%s: %s %s (%s): %s", who, c.Type, c.Status, c.Reason, c.Message))
			}
		}
	}
	for _, f := range files {
		switch {
		case f.gateway != nil && f.key == gw:
			say("Gateway "+gw.String(), o.Gateway.Conditions)
			for _, l := range o.Gateway.Listeners {
				say(fmt.Sprintf("Gateway %s listener %s", gw, l.Name), l.Conditions)
			}
		case f.http != nil || f.grpc != nil:
			parents := o.HTTPRoutes[f.key]
			if f.grpc != nil {
				parents = o.GRPCRoutes[f.key]
			}
			for _, p := range parents {
				who := fmt.Sprintf("%s %s (Gateway %s", f.kind, f.key, gw)
				if p.ParentRef.SectionName != nil {
					who += " listener " + string(*p.ParentRef.SectionName)
				}
				say(who+")", p.Conditions)
			}
		}
	}
	return out
}

// isGatewayConfig reports whether name, a Config's, is a Gateway's
// (gateway.ConfigName), which no EnvoyConfig can be named.
func isGatewayConfig(name string) bool {
	_, short := splitName(name)
	return strings.HasPrefix(short, gateway.ConfigSeparator)
}

// gatewayConfigsOf are the Configs of changes, as they are and as they
// would be.
func gatewayConfigsOf(changes []gatewayChange) []translate.Config {
	var out []translate.Config
	for _, c := range changes {
		for _, cfg := range []*translate.Config{c.before, c.after} {
			if cfg != nil {
				out = append(out, *cfg)
			}
		}
	}
	return out
}

// withGateways adds to w what changes hold as the cluster holds it: each
// Gateway's Config as it is now, among the EnvoyConfigs, and the Secrets
// of its listeners.
func withGateways(w *world, changes []gatewayChange) {
	for _, c := range changes {
		if c.before != nil {
			w.configs[c.before.Name] = *c.before
		}
	}
	gatewaySecretsInto(w.secrets, changes)
}

// gatewayChanges are the changes to each Gateway's Config, for plan: its
// Config as it would be, or its deletion when it would not be served.
func gatewayChanges(changes []gatewayChange) []change {
	var out []change
	for _, c := range changes {
		where := "Gateway " + c.gateway.String()
		switch {
		case c.after != nil:
			out = append(out, change{where: where, config: *c.after, gateway: true})
		case c.before != nil:
			out = append(out, change{where: where, config: *c.before, gateway: true, delete: true})
		}
	}
	return out
}

// addGatewayNotes adds to the report's fleets what the Gateways'
// translations report of the files' objects.
func addGatewayNotes(r *diffReport, changes []gatewayChange) {
	for _, c := range changes {
		if len(c.notes) == 0 {
			continue
		}
		i := slices.IndexFunc(r.Fleets, func(f fleetDiff) bool { return f.Fleet == c.fleet().String() })
		if i < 0 {
			r.Fleets = append(r.Fleets, fleetDiff{Fleet: c.fleet().String()})
			i = len(r.Fleets) - 1
		}
		r.Fleets[i].Notes = append(r.Fleets[i].Notes, c.notes...)
	}
}
