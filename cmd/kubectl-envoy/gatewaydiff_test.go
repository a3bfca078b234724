package main

import (
	"bytes"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

const (
	// edgeGateway is the Gateway team/edge, of the class kec, with one
	// HTTP listener.
	edgeGateway = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge}
spec:
  gatewayClassName: kec
  listeners:
  - {name: http, port: 80, protocol: HTTP}
`
	// webRoute is the HTTPRoute team/web: /app to the Service web.
	webRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs:
  - {name: edge}
  rules:
  - matches:
    - path: {type: PathPrefix, value: /app}
    backendRefs:
    - {name: web, port: 80}
`
)

// gatewayFilesOf decodes the Gateway API objects of content, of namespace team.
func gatewayFilesOf(t *testing.T, content string) []gatewayFile {
	t.Helper()
	docs, err := splitDocuments("test.yaml", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	files, problems := decodeGatewayFiles(docs, "team")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	return files
}

func TestDecodeGatewayFiles(t *testing.T) {
	docs, err := splitDocuments("test.yaml", []byte(edgeGateway+"---\n"+webRoute+"---\n"+clusterConfig+`---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata: {name: old, namespace: other}
spec: {parentRefs: [{name: edge, namespace: team}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: api}
spec: {parentRefs: [{name: edge}]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: to-web}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: other}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: tls}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: typo}
spec: {parentRef: [{name: edge}]}
---
`+webRoute))
	if err != nil {
		t.Fatal(err)
	}
	files, problems := decodeGatewayFiles(docs, "team")
	var got []string
	for _, f := range files {
		got = append(got, f.kind+" "+f.key.String())
	}
	want := []string{"Gateway team/edge", "HTTPRoute team/web", "HTTPRoute other/old", "GRPCRoute team/api", "ReferenceGrant team/to-web"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %q, want %q", got, want)
	}
	if files[2].http.Spec.ParentRefs[0].Name != "edge" || files[2].http.APIVersion != "gateway.networking.k8s.io/v1" || files[2].http.Kind != "HTTPRoute" {
		t.Errorf("a v1beta1 HTTPRoute decodes as v1's: %+v", files[2].http.Spec)
	}
	wantProblems := []string{
		"test.yaml (document 7): TLSRoute tls: diff reads Gateways, HTTPRoutes, GRPCRoutes and ReferenceGrants of the Gateway API, not TLSRoutes",
		`test.yaml (document 8): HTTPRoute typo: error unmarshaling JSON: while decoding JSON: json: unknown field "parentRef"`,
		"test.yaml (document 9): HTTPRoute team/web is also in test.yaml (document 2)",
	}
	if !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("problems:\n%q\nwant\n%q", problems, wantProblems)
	}
}

// liveGateway is the cluster of the tests: the class kec of this operator,
// the Gateway team/edge, the route team/web to the Service team/web, and
// the class other of another controller with its Gateway team/theirs.
func liveGateway(t *testing.T) gatewayObjects {
	t.Helper()
	g := newGatewayObjects()
	g.classes["kec"] = &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "kec"}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	g.classes["other"] = &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}}
	created := metav1.Unix(100, 0)
	for _, f := range gatewayFilesOf(t, edgeGateway+"---\n"+webRoute+"---\n"+strings.NewReplacer("name: edge", "name: theirs", "kec", "other").Replace(edgeGateway)) {
		o := f.object()
		o.SetCreationTimestamp(created)
		o.SetGeneration(1)
		switch {
		case f.gateway != nil:
			f.gateway.UID = types.UID("uid-" + f.key.Name)
			g.gateways[f.key] = *f.gateway
		case f.http != nil:
			g.httpRoutes[f.key] = *f.http
		}
	}
	g.namespaces["team"] = map[string]string{"kubernetes.io/metadata.name": "team"}
	g.services[types.NamespacedName{Namespace: "team", Name: "web"}] = corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	return g
}

// The Gateways a change touches: a Gateway of the files, those the files'
// routes name as they are and as they were, and every Gateway for a
// ReferenceGrant.
func TestTouchedGateways(t *testing.T) {
	live := liveGateway(t)
	edge, theirs, other := types.NamespacedName{Namespace: "team", Name: "edge"}, types.NamespacedName{Namespace: "team", Name: "theirs"}, types.NamespacedName{Namespace: "infra", Name: "shared"}
	moved := strings.Replace(webRoute, "- {name: edge}", "- {name: shared, namespace: infra}", 1)
	for _, c := range []struct {
		name, files string
		want        []types.NamespacedName
	}{
		{"a route edited", strings.Replace(webRoute, "/app", "/v2", 1), []types.NamespacedName{edge}},
		{"a route moved to another Gateway: both", moved, []types.NamespacedName{other, edge}},
		{"a new route", strings.Replace(moved, "name: web", "name: new", 1), []types.NamespacedName{other}},
		{"a Gateway", strings.Replace(edgeGateway, "port: 80", "port: 8080", 1), []types.NamespacedName{edge}},
		{"a ReferenceGrant: every Gateway", `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g}
spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: infra}], to: [{group: "", kind: Service}]}
`, []types.NamespacedName{edge, theirs}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := touchedGateways(live, gatewayFilesOf(t, c.files)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%v, want %v", got, c.want)
			}
		})
	}
}

// The routes the operator refused alone stay refused, as their status
// records it for their generation, unless the files change them.
func TestRefusedRoutes(t *testing.T) {
	live := liveGateway(t)
	key := types.NamespacedName{Namespace: "team", Name: "web"}
	status := func(reason, message string, generation int64) gatewayObjects {
		g := live
		g.httpRoutes = map[types.NamespacedName]gwv1.HTTPRoute{}
		rt := live.httpRoutes[key]
		rt.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: gateway.ControllerName, ParentRef: gwv1.ParentReference{Name: "edge"},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: generation}}}}
		g.httpRoutes[key] = rt
		return g
	}
	routeKey := gateway.RouteKey{Kind: kindHTTPRoute, NamespacedName: key}
	edge := types.NamespacedName{Namespace: "team", Name: "edge"}
	for _, c := range []struct {
		name    string
		objs    gatewayObjects
		changed bool
		want    map[gateway.RouteKey]gateway.Refusal
	}{
		{"refused by Envoy", status(gateway.ReasonRefusedByEnvoy, "Envoy: bad regex", 1), false,
			map[gateway.RouteKey]gateway.Refusal{routeKey: {Reason: gateway.ReasonRefusedByEnvoy, Message: "Envoy: bad regex"}}},
		{"refused by the rules", status("UnsupportedValue", "the route is not served: too big", 1), false,
			map[gateway.RouteKey]gateway.Refusal{routeKey: {Reason: "UnsupportedValue", Message: "the route is not served: too big"}}},
		{"another UnsupportedValue is translation's own", status("UnsupportedValue", "path type Foo", 1), false, nil},
		{"of an earlier generation", status(gateway.ReasonRefusedByEnvoy, "Envoy: bad regex", 0), false, nil},
		{"not accepted for another reason", status("NotAllowedByListeners", "no", 1), false, nil},
		{"changed by the files: judged again", status(gateway.ReasonRefusedByEnvoy, "Envoy: bad regex", 1), true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, ok := c.objs.input(edge, map[gateway.RouteKey]bool{routeKey: c.changed})
			if !ok {
				t.Fatal("no input")
			}
			if !reflect.DeepEqual(in.Refused, c.want) {
				t.Errorf("refused %+v, want %+v", in.Refused, c.want)
			}
		})
	}
}

// gatewayPlan is what diff reports for files against live, whose Gateway
// team/edge's fleet was published from live as it is.
func gatewayPlan(t *testing.T, live gatewayObjects, content string) diffReport {
	t.Helper()
	files := gatewayFilesOf(t, content)
	changes := planGateways(live, live.with(files, time.Unix(200, 0)), files, touchedGateways(live, files), nil)
	w := world{configs: map[string]translate.Config{}, histories: map[fleet.ID]publish.History{}, secrets: map[string]map[string]corev1.Secret{}}
	withGateways(&w, changes)
	id := fleet.ID{Namespace: "team", Name: "edge"}
	w.histories[id] = w.assumedHistory(id)
	r := plan(w, gatewayChanges(changes), time.Unix(300, 0))
	addGatewayNotes(&r, changes)
	return r
}

// A route edit is shown as what it changes in what the Gateway's fleet is
// served, in Envoy's field names, through the operator's translation.
func TestPlanGatewayChanges(t *testing.T) {
	live := liveGateway(t)

	t.Run("the route as it is changes nothing", func(t *testing.T) {
		r := gatewayPlan(t, live, webRoute)
		if len(r.Fleets) != 1 || r.Fleets[0].Fleet != "team/edge" || r.changed() || r.Fleets[0].Version == "" || r.Fleets[0].NewVersion != r.Fleets[0].Version {
			t.Errorf("%+v", r)
		}
	})

	t.Run("a path changed", func(t *testing.T) {
		r := gatewayPlan(t, live, strings.Replace(webRoute, "/app", "/v2", 1))
		var b bytes.Buffer
		if err := printDiff(&b, outputText, r); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if len(r.Fleets) != 1 || !r.changed() || len(r.Fleets[0].Types) != 1 || r.Fleets[0].Types[0].Type != "routes" ||
			len(r.Fleets[0].Types[0].Changed) != 1 || !strings.Contains(out, `"/app" -> "/v2"`) {
			t.Errorf("%+v\n%s", r, out)
		}
	})

	t.Run("a new route to a Service that does not exist: added, answering 500, and why", func(t *testing.T) {
		r := gatewayPlan(t, live, strings.NewReplacer("name: web}", "name: api}", "{name: web, port: 80}", "{name: missing, port: 80}", "/app", "/api").Replace(webRoute))
		var b bytes.Buffer
		if err := printDiff(&b, outputText, r); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !r.changed() || !strings.Contains(out, `"/api"`) ||
			!strings.Contains(out, "note: HTTPRoute team/api (Gateway team/edge): ResolvedRefs False (BackendNotFound)") {
			t.Errorf("%s", out)
		}
	})

	t.Run("a listener's port changed", func(t *testing.T) {
		r := gatewayPlan(t, live, strings.Replace(edgeGateway, "port: 80", "port: 8080", 1))
		if !r.changed() {
			t.Fatalf("%+v", r)
		}
		var kinds []string
		for _, td := range r.Fleets[0].Types {
			kinds = append(kinds, td.Type)
		}
		if !reflect.DeepEqual(kinds, []string{"listeners", "routes"}) || len(r.Fleets[0].Types[0].Added) != 1 || len(r.Fleets[0].Types[0].Removed) != 1 {
			t.Errorf("%+v", r.Fleets[0].Types)
		}
	})

	t.Run("a new GRPCRoute: its route, and its backend's cluster speaks HTTP/2", func(t *testing.T) {
		r := gatewayPlan(t, live, `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: api}
spec:
  parentRefs: [{name: edge}]
  rules:
  - matches: [{method: {service: shop.Cart, method: Add}}]
    backendRefs: [{name: web, port: 80}]
`)
		var b bytes.Buffer
		if err := printDiff(&b, outputText, r); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); !r.changed() || !strings.Contains(out, "routes[name=GRPCRoute/team/api/rule/0/match/0]") ||
			!strings.Contains(out, "  clusters: 1 changed\n    ~ team/edge/team/web/80\n        + typed_extension_protocol_options: ") || !strings.Contains(out, "http2_protocol_options") {
			t.Errorf("%s", out)
		}
	})

	t.Run("a ReferenceGrant lets a route reach a Service of another namespace", func(t *testing.T) {
		g := live
		g.httpRoutes = map[types.NamespacedName]gwv1.HTTPRoute{}
		rt := live.httpRoutes[types.NamespacedName{Namespace: "team", Name: "web"}]
		rt = *rt.DeepCopy()
		rt.Spec.Rules[0].BackendRefs[0].Namespace = ptrTo(gwv1.Namespace("infra"))
		g.httpRoutes[types.NamespacedName{Namespace: "team", Name: "web"}] = rt
		g.services = maps.Clone(live.services)
		g.services[types.NamespacedName{Namespace: "infra", Name: "web"}] = corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		grant := `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-team, namespace: infra}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team}]
  to: [{group: "", kind: Service}]
`
		r := gatewayPlan(t, g, grant)
		var b bytes.Buffer
		if err := printDiff(&b, outputText, r); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !r.changed() || len(r.Fleets) != 2 || !strings.Contains(out, "fleet team/edge: ") || !strings.Contains(out, "  clusters: 1 added\n") ||
			!strings.Contains(out, `.direct_response: {"status":500}`) {
			t.Errorf("%s", out)
		}
	})

	t.Run("a route to a Gateway of another controller changes nothing served", func(t *testing.T) {
		r := gatewayPlan(t, live, strings.NewReplacer("name: web}", "name: x}", "{name: edge}", "{name: theirs}").Replace(webRoute))
		if r.changed() || len(r.Fleets) != 1 || r.Fleets[0].Fleet != "team/theirs" ||
			!reflect.DeepEqual(r.Fleets[0].Notes, []string{"Gateway team/theirs: its class other is not served by kube-envoy-controller.io/gateway-controller"}) {
			t.Errorf("%+v", r)
		}
	})

	t.Run("a Gateway moved to another controller's class: its fleet is served nothing of it", func(t *testing.T) {
		r := gatewayPlan(t, live, strings.Replace(edgeGateway, "gatewayClassName: kec", "gatewayClassName: other", 1))
		if !r.changed() || len(r.Fleets) != 1 {
			t.Fatalf("%+v", r)
		}
		for _, td := range r.Fleets[0].Types {
			if len(td.Added)+len(td.Changed) > 0 || len(td.Removed) == 0 {
				t.Errorf("%+v", td)
			}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// A route the operator refused alone keeps the rules the fleet's served
// revision serves of it (gateway.Input.Published): diff takes the
// Gateway's Config from the fleet's recorded history (servedGateways), as
// the operator does, and shows nothing changed for a file that changes
// nothing, not the refused route removed.
func TestPlanKeepsRefusedRouteEarlierRules(t *testing.T) {
	live := liveGateway(t)
	edge := types.NamespacedName{Namespace: "team", Name: "edge"}
	id := fleet.ID{Namespace: "team", Name: gateway.FleetName("edge")}

	// The fleet serves web as it was: /app.
	in, ok := live.input(edge, nil)
	if !ok {
		t.Fatal("no input")
	}
	served := gateway.Translate(in).Config
	recorded := world{configs: map[string]translate.Config{served.Name: served}}.assumedHistory(id)
	if rev := recorded.Served(); rev == nil || gateway.PublishedOf(rev.Configs, edge) == nil {
		t.Fatalf("the recorded history serves no Config of the Gateway: %+v", recorded)
	}

	// web's edit, /v2, was refused by Envoy, as its status records for its
	// generation.
	key := types.NamespacedName{Namespace: "team", Name: "web"}
	live.httpRoutes = maps.Clone(live.httpRoutes)
	was := live.httpRoutes[key]
	rt := *was.DeepCopy()
	rt.Generation = 2
	rt.Spec.Rules[0].Matches[0].Path.Value = ptrTo("/v2")
	rt.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: gateway.ControllerName, ParentRef: gwv1.ParentReference{Name: "edge"},
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: gateway.ReasonRefusedByEnvoy, Message: "Envoy: bad", ObservedGeneration: 2}}}}
	live.httpRoutes[key] = rt

	files := gatewayFilesOf(t, edgeGateway) // the Gateway as it is
	touched := touchedGateways(live, files)
	report := func(published map[types.NamespacedName]*translate.Config) diffReport {
		changes := planGateways(live, live.with(files, time.Unix(200, 0)), files, touched, published)
		w := world{configs: map[string]translate.Config{}, histories: map[fleet.ID]publish.History{id: recorded}, secrets: map[string]map[string]corev1.Secret{}}
		withGateways(&w, changes)
		return plan(w, gatewayChanges(changes), time.Unix(300, 0))
	}

	if r := report(servedGateways(map[fleet.ID]publish.History{id: recorded}, touched)); len(r.Fleets) != 1 || r.changed() {
		t.Errorf("with the served revision's Config: %+v, want nothing changed", r)
	}
	// Without it, the refused route shows as removed: what diff showed.
	if r := report(nil); len(r.Fleets) != 1 || !r.changed() {
		t.Errorf("without the served revision's Config: %+v, want the route removed", r)
	}
}
