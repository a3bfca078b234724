package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Gateway API translation at scale: one Gateway with 1,000 HTTPRoutes, and
// 100 Gateways (100 fleets) of 10 each. docs/benchmarks.md has the figures:
//
//	go test ./internal/xds/gateway -run '^$' -bench . -benchtime 20x
//
// The floor of each is the same content written by hand: each Gateway's
// Config, translated once before the run, given to translate as an
// EnvoyConfig of its own name, and recorded as the controller records a
// revision. What the path costs beyond it is what the Gateway API layer
// costs.

const benchOperatorNamespace = "kube-envoy-controller"

// benchFleet is one Gateway, what it reads, and what translate is given
// for its backends.
type benchFleet struct {
	in     Input
	slices map[string][]discoveryv1.EndpointSlice
}

// benchGateways makes gateways Gateways of routes HTTPRoutes each, of a
// shape met in clusters: each Gateway, in namespace infra-<g>, has an HTTP
// listener on port 80 that admits routes of every namespace and one on
// 8080 for the routes of its own; its routes are spread over ten team
// namespaces, each with two or three hostnames (one in three adds a
// wildcard), two or three rules matching on path, header, method or query,
// and one or two weighted backends of their own namespace; one route in
// ten also sends to a shared Service of namespace shared, which a
// ReferenceGrant per team namespace allows. salt changes one route's path
// (revisions of the same fleet).
func benchGateways(gateways, routes int, salt string) []benchFleet {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	all := gwv1.NamespacesFromAll
	var out []benchFleet
	for g := range gateways {
		gwNS := fmt.Sprintf("infra-%d", g)
		gw := gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: gwNS, Name: "edge", Generation: 1, CreationTimestamp: created},
			Spec: gwv1.GatewaySpec{GatewayClassName: "kec", Listeners: []gwv1.Listener{
				{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
					AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}},
				{Name: "internal", Port: 8080, Protocol: gwv1.HTTPProtocolType, Hostname: ptr(gwv1.Hostname("*.internal.example.com"))},
			}},
		}
		f := benchFleet{
			in: Input{
				Class:      gwv1.GatewayClass{Spec: gwv1.GatewayClassSpec{ControllerName: ControllerName}},
				Gateway:    gw,
				FleetName:  "edge",
				Namespaces: map[string]map[string]string{gwNS: nil, "shared": nil},
				Services:   map[types.NamespacedName]corev1.Service{},
				Secrets:    map[types.NamespacedName]corev1.Secret{},
			},
			slices: map[string][]discoveryv1.EndpointSlice{},
		}
		addService := func(ns, name string) {
			key := types.NamespacedName{Namespace: ns, Name: name}
			if _, ok := f.in.Services[key]; ok {
				return
			}
			f.in.Services[key] = corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000)}}},
			}
			n := len(f.in.Services)
			f.slices[localRef(gwNS, key)] = []discoveryv1.EndpointSlice{{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints: []discoveryv1.Endpoint{
					{Addresses: []string{fmt.Sprintf("10.%d.%d.1", n/250, n%250)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
					{Addresses: []string{fmt.Sprintf("10.%d.%d.2", n/250, n%250)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
				},
				Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(3000))}},
			}}
		}
		addService("shared", "auth")
		for team := range 10 {
			ns := fmt.Sprintf("team-%d", team)
			f.in.Namespaces[ns] = map[string]string{"team": fmt.Sprint(team)}
			f.in.Grants = append(f.in.Grants, gwv1beta1.ReferenceGrant{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "from-" + ns},
				Spec: gwv1beta1.ReferenceGrantSpec{
					From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(ns)}},
					To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr(gwv1.ObjectName("auth"))}},
				},
			})
		}
		for i := range routes {
			ns := fmt.Sprintf("team-%d", i%10)
			app := fmt.Sprintf("app-%d-%d", g, i)
			backend := func(name string, weight int32) gwv1.HTTPBackendRef {
				return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{Weight: ptr(weight), BackendObjectReference: gwv1.BackendObjectReference{
					Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(8080))}}}
			}
			addService(ns, app)
			addService(ns, app+"-canary")
			hosts := []gwv1.Hostname{gwv1.Hostname(app + ".example.com"), gwv1.Hostname("www." + app + ".example.com")}
			if i%3 == 0 {
				hosts = append(hosts, gwv1.Hostname("*."+app+".example.net"))
			}
			api := "/api"
			if i == 0 {
				api += salt
			}
			rules := []gwv1.HTTPRouteRule{
				{
					Matches: []gwv1.HTTPRouteMatch{
						{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(api)},
							Headers: []gwv1.HTTPHeaderMatch{{Name: "x-version", Value: "v2"}}},
						{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(api)},
							Method: ptr(gwv1.HTTPMethodPost)},
					},
					BackendRefs: []gwv1.HTTPBackendRef{backend(app, 90), backend(app+"-canary", 10)},
				},
				{
					Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr("/healthz")}}},
					BackendRefs: []gwv1.HTTPBackendRef{backend(app, 1)},
				},
			}
			if i%2 == 0 {
				rules = append(rules, gwv1.HTTPRouteRule{
					Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")},
						QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "debug", Value: "1"}}}},
					BackendRefs: []gwv1.HTTPBackendRef{backend(app, 1)},
				})
			}
			if i%10 == 0 {
				auth := backend("auth", 1)
				auth.Namespace = ptr(gwv1.Namespace("shared"))
				rules = append(rules, gwv1.HTTPRouteRule{
					Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/login")}}},
					BackendRefs: []gwv1.HTTPBackendRef{auth},
				})
			}
			f.in.HTTPRoutes = append(f.in.HTTPRoutes, gwv1.HTTPRoute{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app, Generation: 1, CreationTimestamp: created},
				Spec: gwv1.HTTPRouteSpec{
					CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{
						{Namespace: ptr(gwv1.Namespace(gwNS)), Name: "edge", SectionName: ptr(gwv1.SectionName("http"))}}},
					Hostnames: hosts,
					Rules:     rules,
				},
			})
		}
		out = append(out, f)
	}
	return out
}

// translateInput is what translate is given for the fleet serving c.
func (f benchFleet) translateInput(c translate.Config) translate.Input {
	return translate.Input{
		Configs: []translate.Config{c},
		Slices:  f.slices,
		Secrets: map[string]corev1.Secret{},
		Policy:  translate.Policy{Namespace: benchOperatorNamespace},
	}
}

// handWritten is the floor's EnvoyConfig: the Gateway's Config under an
// EnvoyConfig's name.
func (f benchFleet) handWritten(c translate.Config) translate.Config {
	c.Name = f.in.Gateway.Namespace + "/edge-routes"
	return c
}

// served translates in and checks that the fleet serves it whole.
func served(b *testing.B, in translate.Input) translate.IR {
	ir := translate.Translate(in)
	for name, st := range ir.Configs {
		if st.Choice != translate.ChoiceCurrent || len(st.Invalid) > 0 || len(st.Refused) > 0 || len(st.Dangling) > 0 || len(st.Clashes) > 0 {
			b.Fatalf("%s is not served whole: %+v", name, st)
		}
	}
	return ir
}

// record builds the fleet's history ConfigMap with ir as its only
// revision, as the controller does when it records a revision: an error
// when it does not fit.
func record(f benchFleet, ir translate.IR) error {
	id := fleet.ID{Namespace: f.in.Gateway.Namespace, Name: f.in.FleetName}
	_, err := history.ConfigMap(benchOperatorNamespace, id, publish.History{
		Current: ir.Version, Revisions: []publish.Revision{{Version: ir.Version, Configs: ir.Revision}},
	})
	return err
}

// storedSize is the size of a history as a ConfigMap stores it: its JSON,
// and that JSON gzipped at the best compression, as the history's
// encoding is.
func storedSize(b *testing.B, h publish.History) (jsonBytes, gzipBytes int) {
	js, err := json.Marshal(h)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(js)
	_ = zw.Close()
	return len(js), buf.Len()
}

// allocated returns the bytes allocated by the process so far.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// BenchmarkGatewayTranslate is gateway.Translate alone, for each Gateway.
func BenchmarkGatewayTranslate(b *testing.B) {
	for _, shape := range []struct{ gateways, routes int }{{1, 1000}, {100, 10}} {
		b.Run(fmt.Sprintf("gateways=%d/routes=%d", shape.gateways, shape.routes), func(b *testing.B) {
			fleets := benchGateways(shape.gateways, shape.routes, "")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, f := range fleets {
					if out := Translate(f.in); len(out.Config.Spec.Resources.Routes) == 0 {
						b.Fatal("nothing translated")
					}
				}
			}
		})
	}
}

// BenchmarkGatewayPath is the controller's pure path for every fleet:
// gateway.Translate, translate.Translate with the backends' slices, and
// the revision recorded (the history's ConfigMap built, its JSON gzipped);
// beside its floor, the same content as a hand-written EnvoyConfig
// translated and recorded, run in turn in each iteration. It reports each
// part's time and allocation per iteration, the ratio of the path to the
// floor, and the size of what is recorded: one revision, and the five a
// history keeps (publish.MaxRevisions) when each edit changes one route.
func BenchmarkGatewayPath(b *testing.B) {
	for _, shape := range []struct{ gateways, routes int }{{1, 1000}, {100, 10}} {
		b.Run(fmt.Sprintf("gateways=%d/routes=%d", shape.gateways, shape.routes), func(b *testing.B) {
			fleets := benchGateways(shape.gateways, shape.routes, "")
			floors := make([]translate.Config, len(fleets))
			var jsonOne, gzipOne, envoyRoutes int
			fits := 1.0
			for i, f := range fleets {
				out := Translate(f.in)
				for _, rc := range out.Config.Spec.Resources.Routes {
					var v struct {
						VirtualHosts []struct {
							Routes []json.RawMessage `json:"routes"`
						} `json:"virtual_hosts"`
					}
					if err := json.Unmarshal(rc.Raw, &v); err != nil {
						b.Fatal(err)
					}
					for _, vh := range v.VirtualHosts {
						envoyRoutes += len(vh.Routes)
					}
				}
				floors[i] = f.handWritten(out.Config)
				ir := served(b, f.translateInput(out.Config))
				j, z := storedSize(b, publish.History{Fleet: f.in.Gateway.Namespace + "/edge", Current: ir.Version,
					Revisions: []publish.Revision{{Version: ir.Version, Configs: ir.Revision}}})
				jsonOne, gzipOne = max(jsonOne, j), max(gzipOne, z)
				if record(f, ir) != nil {
					fits = 0
				}
			}
			// Five revisions of the first fleet, each edit changing one
			// route's path: the history a fleet keeps.
			var h publish.History
			h.Fleet = fleets[0].in.Gateway.Namespace + "/edge"
			for k := range publish.MaxRevisions {
				f := benchGateways(1, shape.routes, fmt.Sprint("/v", k))[0]
				f.in.Gateway.Namespace = fleets[0].in.Gateway.Namespace
				ir := served(b, f.translateInput(Translate(f.in).Config))
				h.Revisions = append([]publish.Revision{{Version: ir.Version, Configs: ir.Revision}}, h.Revisions...)
				h.Current = ir.Version
			}
			json5, gzip5 := storedSize(b, h)
			_, err5 := history.ConfigMap(benchOperatorNamespace, fleet.ID{Namespace: fleets[0].in.Gateway.Namespace, Name: "edge"}, h)
			fits5 := 1.0
			if err5 != nil {
				fits5 = 0
			}

			var gwNS, trNS, recNS, floorNS time.Duration
			var gwB, trB, recB, floorB uint64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i, f := range fleets {
					a0, t0 := allocated(), time.Now()
					out := Translate(f.in)
					a1, t1 := allocated(), time.Now()
					ir := translate.Translate(f.translateInput(out.Config))
					a2, t2 := allocated(), time.Now()
					err := record(f, ir)
					a3, t3 := allocated(), time.Now()
					if (err != nil) != (fits == 0) {
						b.Fatal(err)
					}
					fir := translate.Translate(f.translateInput(floors[i]))
					err = record(f, fir)
					a4, t4 := allocated(), time.Now()
					if (err != nil) != (fits == 0) {
						b.Fatal(err)
					}
					gwNS, trNS, recNS, floorNS = gwNS+t1.Sub(t0), trNS+t2.Sub(t1), recNS+t3.Sub(t2), floorNS+t4.Sub(t3)
					gwB, trB, recB, floorB = gwB+a1-a0, trB+a2-a1, recB+a3-a2, floorB+a4-a3
				}
			}
			b.StopTimer()
			n := float64(b.N)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
			mib := func(v uint64) float64 { return float64(v) / (1 << 20) / n }
			b.ReportMetric(ms(gwNS), "gateway-ms/op")
			b.ReportMetric(ms(trNS), "translate-ms/op")
			b.ReportMetric(ms(recNS), "record-ms/op")
			b.ReportMetric(ms(floorNS), "floor-ms/op")
			b.ReportMetric(float64(gwNS+trNS+recNS)/float64(floorNS), "path/floor")
			b.ReportMetric(mib(gwB), "gateway-MiB/op")
			b.ReportMetric(mib(trB+recB), "translate+record-MiB/op")
			b.ReportMetric(mib(floorB), "floor-MiB/op")
			b.ReportMetric(float64(envoyRoutes), "envoy-routes")
			b.ReportMetric(float64(jsonOne)/1024, "revision-json-KiB")
			b.ReportMetric(float64(gzipOne)/1024, "revision-gzip-KiB")
			b.ReportMetric(fits, "revision-fits")
			b.ReportMetric(float64(json5)/1024, "5-revisions-json-KiB")
			b.ReportMetric(float64(gzip5)/1024, "5-revisions-gzip-KiB")
			b.ReportMetric(fits5, "5-revisions-fit")
		})
	}
}

// coveringHosts finds, among a port's virtual hosts, exactly those that
// testing each against h finds: h, anyHost and the wildcards covering h.
func TestCoveringHostsAsScan(t *testing.T) {
	all := []string{anyHost, "a.example.com", "b.a.example.com", "*.example.com", "*.a.example.com", "*.com",
		"example.com", "*.b.a.example.com", "x.example.net", "*.example.net", "*.a.example.net", "a.example.com.", "*.", "."}
	for _, h := range all {
		var scan []string
		for _, g := range all {
			if g == h || g == anyHost || (wildcard(g) && covers(g, h)) {
				scan = append(scan, g)
			}
		}
		var found []string
		for _, g := range coveringHosts(h) {
			if slices.Contains(all, g) {
				found = append(found, g)
			}
		}
		hostOrder(scan)
		hostOrder(found)
		if !slices.Equal(scan, found) {
			t.Errorf("%q: coveringHosts finds %q, a scan %q", h, found, scan)
		}
	}
}
