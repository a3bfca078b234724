package envoyconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// What the controller's reconcile of a fleet serving one Gateway with
// 1,000 HTTPRoutes costs, against envtest's API server. The suite's
// controller first brings the Gateway and its routes to their status
// (reported once, as settle-s); then, with the suite's replica made a
// follower, a reconciler of the same manager, whose reads are counted, is
// called directly: with nothing changed ("settled"), and after one route's
// path is edited ("route-edited": judged by Envoy when bin/envoy is there,
// recorded and pushed). The process's heap in use after a GC is reported
// before the objects are created and after the reconciles: the manager's
// caches of them, the translation's and the xDS server's share.
// docs/benchmarks.md has the figures:
//
//	go test ./internal/controller/envoyconfig -run '^$' -bench BenchmarkGatewayReconcile -benchtime 20x
func BenchmarkGatewayReconcile(b *testing.B) {
	const routes = 1000
	ctx := context.Background()
	heapBefore := heapInUse()
	ns := suite.Namespace(b)
	shared := suite.Namespace(b)
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "kec-"}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	benchCreate(b, class)
	b.Cleanup(func() { _ = suite.Client.Delete(context.Background(), class) })
	all := gwv1.NamespacesFromAll
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class.Name), Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}},
		}},
	}
	benchCreate(b, gw)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gateway.FleetName(gw.Name),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(gw, gwv1.SchemeGroupVersion.WithKind("Gateway"))}}}
	benchCreate(b, e)
	benchCreate(b, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.Name, Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "gw-80", Port: 80, TargetPort: intstr.FromInt32(10080)}}},
	})
	benchCreate(b, &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: shared, Name: "routes"},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(ns)}},
			To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr.To[gwv1.ObjectName]("auth")}},
		},
	})

	// Each route has its own Service, one in five a canary too, one in ten
	// also sends /login to the Service auth of another namespace.
	objects := []client.Object{}
	objects = append(objects, benchBackend(shared, "auth", 0)...)
	for i := range routes {
		app := fmt.Sprintf("app-%d", i)
		objects = append(objects, benchBackend(ns, app, i)...)
		if i%5 == 0 {
			objects = append(objects, benchBackend(ns, app+"-canary", i)...)
		}
		objects = append(objects, benchRoute(ns, shared, i, "/api"))
	}
	start := time.Now()
	benchCreateAll(b, objects)
	created := time.Since(start)

	testenv.Eventually(b, "the Gateway to count its routes", func() (bool, error) {
		got := &gwv1.Gateway{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(gw), got); err != nil {
			return false, err
		}
		a := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayConditionAccepted))
		return a != nil && a.Status == metav1.ConditionTrue && len(got.Status.Listeners) == 1 && got.Status.Listeners[0].AttachedRoutes == routes,
			fmt.Errorf("status %+v", got.Status.Listeners)
	})
	last := benchRoute(ns, shared, routes-1, "")
	testenv.Eventually(b, "the last route's status", func() (bool, error) {
		got := &gwv1.HTTPRoute{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(last), got); err != nil {
			return false, err
		}
		return len(got.Status.Parents) == 1 && meta.IsStatusConditionTrue(got.Status.Parents[0].Conditions, string(gwv1.RouteConditionResolvedRefs)), nil
	})
	testenv.Eventually(b, "the controller to be idle", func() (bool, error) { return testenv.Idle(ControllerName), nil })
	settled := time.Since(start)
	heapSettled := heapInUse()

	// What the reconcile's reads of the backend Services from the API
	// server take alone, one after the other as it sends them.
	t0 := time.Now()
	services := 0
	for _, o := range objects {
		if svc, ok := o.(*corev1.Service); ok {
			services++
			if err := suite.Manager.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	serviceGets := time.Since(t0)

	// The suite's replica follows; the measured reconciler leads.
	leaderPaused.Store(true)
	b.Cleanup(func() { leaderPaused.Store(false) })
	counted := &countingReaders{}
	r := NewReconciler(suite.Manager, xdsServer, operatorNamespace)
	r.GatewayAPI = true
	r.Envoy = suite.Reconciler.(*Reconciler).Envoy
	r.IsLeader = func() bool { return true }
	r.Client = cachedReads{Client: r.Client, n: &counted.cache}
	r.APIReader = apiReads{Reader: r.APIReader, n: &counted.api}
	r.Histories.APIReader = apiReads{Reader: r.Histories.APIReader, n: &counted.api}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: e.Name}}
	edits := 0

	for _, mode := range []string{"settled", "route-edited"} {
		b.Run(mode, func(b *testing.B) {
			counted.reset()
			suite.Counter.Reset()
			var took time.Duration
			writes := 0
			for range b.N {
				if mode == "route-edited" {
					b.StopTimer()
					edits++
					rt := benchRoute(ns, shared, 0, "")
					patch := fmt.Appendf(nil, `{"spec":{"rules":[%s]}}`, benchRulesJSON(0, shared, fmt.Sprintf("/api-v%d", edits)))
					if err := suite.Client.Patch(ctx, rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
						b.Fatal(err)
					}
					testenv.Eventually(b, "the manager's cache to hold the edit", func() (bool, error) {
						got := &gwv1.HTTPRoute{}
						err := suite.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(rt), got)
						return err == nil && got.Generation == rt.Generation, err
					})
					testenv.Eventually(b, "the controller to be idle", func() (bool, error) { return testenv.Idle(ControllerName), nil })
					counted.discard()
					suite.Counter.Reset()
					b.StartTimer()
				}
				t0 := time.Now()
				if _, err := r.Reconcile(ctx, req); err != nil {
					b.Fatal(err)
				}
				took += time.Since(t0)
				if mode == "route-edited" {
					counted.add()
					writes += len(suite.Counter.Writes())
				}
			}
			if mode == "settled" {
				counted.add()
				writes = len(suite.Counter.Writes())
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "reconcile-ms/op")
			b.ReportMetric(float64(counted.apiTotal)/float64(b.N), "api-reads/op")
			b.ReportMetric(float64(counted.cacheTotal)/float64(b.N), "cache-reads/op")
			b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
			b.ReportMetric(float64(services), "backend-services")
			b.ReportMetric(float64(serviceGets.Milliseconds()), "backend-gets-ms")
			b.ReportMetric(created.Seconds(), "create-s")
			b.ReportMetric(settled.Seconds(), "settle-s")
			b.ReportMetric(heapBefore, "heap-before-MiB")
			b.ReportMetric(heapSettled, "heap-settled-MiB")
			b.ReportMetric(heapInUse(), "heap-after-MiB")
		})
	}
}

// heapInUse is the process's heap in use after a GC, in MiB.
func heapInUse() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// countingReaders counts the reads of the measured reconciler: from the
// manager's cache, and from the API server.
type countingReaders struct {
	cache, api           atomic.Int64
	cacheTotal, apiTotal int64
}

// discard forgets the counts since the last add.
func (c *countingReaders) discard() {
	c.cache.Store(0)
	c.api.Store(0)
}

func (c *countingReaders) reset() {
	c.cache.Store(0)
	c.api.Store(0)
	c.cacheTotal, c.apiTotal = 0, 0
}

// add moves the counts since the last add or discard into the totals.
func (c *countingReaders) add() {
	c.cacheTotal += c.cache.Swap(0)
	c.apiTotal += c.api.Swap(0)
}

// cachedReads counts the Gets and Lists of a client that reads the cache.
type cachedReads struct {
	client.Client
	n *atomic.Int64
}

func (c cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.Add(1)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c cachedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.n.Add(1)
	return c.Client.List(ctx, list, opts...)
}

// apiReads counts the Gets and Lists sent to the API server.
type apiReads struct {
	client.Reader
	n *atomic.Int64
}

func (c apiReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c apiReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.n.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

func benchCreate(b *testing.B, obj client.Object) {
	b.Helper()
	if err := suite.Client.Create(context.Background(), obj); err != nil {
		b.Fatal(err)
	}
}

// benchCreateAll creates objs, 16 at a time.
func benchCreateAll(b *testing.B, objs []client.Object) {
	b.Helper()
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	work := make(chan client.Object)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := suite.Client.Create(context.Background(), o); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// benchBackend is a headless Service of port 8080 and its EndpointSlice of two
// ready endpoints.
func benchBackend(ns, name string, i int) []client.Object {
	return []client.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			// Headless: envtest's Service range holds 254 addresses.
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000)}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](3000)}},
		},
	}
}

// benchRoute is route i of the Gateway edge: two hostnames (one in three
// adds a wildcard), rules on a path with a header or a method, an exact
// path, and for one in two a query parameter; one in five splits its
// first rule with a canary, one in ten sends /login to shared/auth. With
// api "", only its name.
func benchRoute(ns, shared string, i int, api string) *gwv1.HTTPRoute {
	app := fmt.Sprintf("app-%d", i)
	rt := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app}}
	if api == "" {
		return rt
	}
	rt.Spec.ParentRefs = []gwv1.ParentReference{{Name: "edge"}}
	rt.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(app + ".example.com"), gwv1.Hostname("www." + app + ".example.com")}
	if i%3 == 0 {
		rt.Spec.Hostnames = append(rt.Spec.Hostnames, gwv1.Hostname("*."+app+".example.net"))
	}
	backend := func(name string, weight int32) gwv1.HTTPBackendRef {
		return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{Weight: ptr.To(weight), BackendObjectReference: gwv1.BackendObjectReference{
			Name: gwv1.ObjectName(name), Port: ptr.To[gwv1.PortNumber](8080)}}}
	}
	first := []gwv1.HTTPBackendRef{backend(app, 1)}
	if i%5 == 0 {
		first = []gwv1.HTTPBackendRef{backend(app, 90), backend(app+"-canary", 10)}
	}
	rt.Spec.Rules = []gwv1.HTTPRouteRule{
		{
			Matches: []gwv1.HTTPRouteMatch{
				{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(api)}, Headers: []gwv1.HTTPHeaderMatch{{Name: "x-version", Value: "v2"}}},
				{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(api)}, Method: ptr.To(gwv1.HTTPMethodPost)},
			},
			BackendRefs: first,
		},
		{
			Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchExact), Value: ptr.To("/healthz")}}},
			BackendRefs: []gwv1.HTTPBackendRef{backend(app, 1)},
		},
	}
	if i%2 == 0 {
		rt.Spec.Rules = append(rt.Spec.Rules, gwv1.HTTPRouteRule{
			Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/")},
				QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "debug", Value: "1"}}}},
			BackendRefs: []gwv1.HTTPBackendRef{backend(app, 1)},
		})
	}
	if i%10 == 0 {
		auth := backend("auth", 1)
		auth.Namespace = ptr.To(gwv1.Namespace(shared))
		rt.Spec.Rules = append(rt.Spec.Rules, gwv1.HTTPRouteRule{
			Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/login")}}},
			BackendRefs: []gwv1.HTTPBackendRef{auth},
		})
	}
	return rt
}

// benchRulesJSON is route i's rules with its first rule's path api, in
// JSON, for a merge patch (which replaces the list).
func benchRulesJSON(i int, shared, api string) string {
	rt := benchRoute("", shared, i, api)
	var out []byte
	for k, rule := range rt.Spec.Rules {
		js, err := json.Marshal(rule)
		if err != nil {
			panic(err)
		}
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, js...)
	}
	return string(out)
}
