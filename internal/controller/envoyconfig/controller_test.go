package envoyconfig

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/stats"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

var (
	suite     testenv.Suite
	xdsServer *server.Server
	// statsReceiver receives the stats the suite's real Envoys stream, on
	// the xDS server's port, as the operator serves it; its windows are
	// figured every second, the flush interval of those Envoys
	// (rollout_envoy_test.go).
	statsReceiver *stats.Receiver
)

// operatorNamespace holds the replicas' reports of their proxies.
const operatorNamespace = "kec-system"

func TestMain(m *testing.M) {
	suite.GatewayAPI = true
	suite.Main(m, func(mgr ctrl.Manager) error {
		if err := createNamespace(mgr.GetConfig(), operatorNamespace); err != nil {
			return err
		}
		var err error
		if ca, err = authority.Add(mgr, authority.Config{Namespace: operatorNamespace, Options: testPKI, Hosts: []string{"localhost", "127.0.0.1"}}); err != nil {
			return err
		}
		o := stats.DefaultOptions
		o.TrustDomain, o.Own, o.WindowInterval = testPKI.TrustDomain, stats.BootstrapScopes(fleet.XDSClusterName), time.Second
		statsReceiver = stats.New(o)
		xdsServer, err = server.Add(mgr, server.Options{BindAddress: "127.0.0.1:0", Namespace: operatorNamespace, Replica: "replica-a", Authority: ca,
			Services: []server.Service{statsReceiver}, Stats: statsReceiver})
		if err != nil {
			return err
		}
		r := NewReconciler(mgr, xdsServer, operatorNamespace)
		r.GatewayAPI = true // envtest installs the Gateway API's CRDs
		// The leader loads content in a real Envoy before it records it, as
		// the operator does: bin/envoy, or $ENVOY (envoy_test.go).
		envoy, _ := realenvoy.Binary()
		r.Envoy = envoyjudge.New(context.Background(), envoyjudge.Options{Envoy: envoy, Concurrency: 2, Timeout: realenvoy.JudgeTimeout})
		elected := r.IsLeader
		r.IsLeader = func() bool { return !leaderPaused.Load() && elected() }
		suite.Reconciler = r
		return r.SetupWithManager(mgr)
	})
}

func createNamespace(cfg *rest.Config, name string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	return c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func cluster(name, timeout string) runtime.RawExtension {
	return raw(`{"name": "` + name + `", "type": "EDS", "connect_timeout": "` + timeout + `", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`)
}

// newFleet creates an Envoy (the fleet) in a new namespace.
func newFleet(t *testing.T) (ns, fleetID string) {
	t.Helper()
	ns = suite.Namespace(t)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}}
	if err := suite.Client.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return ns, ns + "/edge"
}

func newConfig(ns, name string, clusters ...runtime.RawExtension) *examplev1.EnvoyConfig {
	return &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: clusters}},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := suite.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitStatus waits until the EnvoyConfig's status satisfies cond.
func waitStatus(t *testing.T, c *examplev1.EnvoyConfig, what string, cond func(*examplev1.EnvoyConfig) bool) *examplev1.EnvoyConfig {
	t.Helper()
	got := &examplev1.EnvoyConfig{}
	testenv.Eventually(t, what, func() (bool, error) {
		if err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return false, err
		}
		// The status so far is what a failure reports.
		return got.Status.ObservedGeneration == got.Generation && cond(got), fmt.Errorf("status %+v", got.Status)
	})
	return got
}

func condition(c *examplev1.EnvoyConfig, typ string) metav1.Condition {
	if got := meta.FindStatusCondition(c.Status.Conditions, typ); got != nil {
		return *got
	}
	return metav1.Condition{}
}

func clusterNames(t *testing.T, p *xdstest.Proxy, nack string) (string, []string) {
	t.Helper()
	version, names, err := p.NextNames(nack)
	if err != nil {
		t.Fatal(err)
	}
	return version, names
}

// fleetMetric returns the value of a gauge or counter of the manager's
// registry for one fleet.
func fleetMetric(t *testing.T, name, fleetID string) float64 {
	t.Helper()
	m := fleetSeries(t, name, fleetID)
	return m.GetGauge().GetValue() + m.GetCounter().GetValue()
}

// fleetSeries returns the series of a metric of the manager's registry for
// one fleet, or, with fleetID "", the series of a metric without labels; nil
// when there is none yet.
func fleetSeries(t *testing.T, name, fleetID string) *dto.Metric {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if fleetID == "" && len(m.GetLabel()) == 0 {
				return m
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "fleet" && l.GetValue() == fleetID {
					return m
				}
			}
		}
	}
	return nil
}

// firstClusters ACKs responses until one has clusters: a fleet whose Envoy
// existed before its EnvoyConfig is first served empty.
func firstClusters(t *testing.T, p *xdstest.Proxy) (string, []string) {
	t.Helper()
	for range 5 {
		if version, names := clusterNames(t, p, ""); len(names) > 0 {
			return version, names
		}
	}
	t.Fatal("no clusters in five responses")
	return "", nil
}

// ca is the suite's xDS certificate authority: the server speaks mutual TLS
// only, as in production.
var ca *authority.Store

// testPKI: a new CA signs three seconds after it is trusted, so that a
// rotation completes within a test.
var testPKI = pki.Options{TrustDomain: "cluster.local", CAValidity: 30 * 24 * time.Hour, CertValidity: 24 * time.Hour, Propagation: 3 * time.Second}

// dialFleet connects to the xDS server at addr as a proxy of fleetID does:
// over mutual TLS, with a certificate for the fleet from the suite's CA.
func dialFleet(t *testing.T, addr, fleetID string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	id, err := fleet.Parse(fleetID)
	if err != nil {
		t.Fatal(err)
	}
	return xdstest.DialFleet(t, addr, ca, id.Namespace, id.Name, testPKI)
}

// xdsClient returns the xDS server's address, once it listens.
func xdsClient(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	addr, err := xdsServer.Addr(ctx)
	if err != nil {
		t.Fatalf("the xDS server does not listen: %v", err)
	}
	return addr.String()
}

func TestPublishesToTheFleetsProxies(t *testing.T) {
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)

	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	version, names := firstClusters(t, p)
	if len(names) != 1 || names[0] != "backend" {
		t.Fatalf("proxy got clusters %v", names)
	}
	got := waitStatus(t, cfg, "one proxy to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 1 })
	if got.Status.PublishedVersion != xdsServer.Version(fleetID) || version != xdsServer.TypeVersion(fleetID, resourcev3.ClusterType) ||
		got.Status.Proxies.Connected != 1 || got.Status.ContentHash == "" {
		t.Errorf("status = %+v, proxy got version %s", got.Status, version)
	}
	for typ, want := range map[string]metav1.ConditionStatus{examplev1.EnvoyConfigConditionAccepted: "True", examplev1.EnvoyConfigConditionPublished: "True", examplev1.EnvoyConfigConditionDegraded: "False"} {
		if c := condition(got, typ); c.Status != want {
			t.Errorf("%s = %+v", typ, c)
		}
	}

	// The manager's /metrics shows the fleet's proxy and its ACKs.
	for name, atLeast := range map[string]float64{
		"kube_envoy_controller_xds_connected_proxies": 1,
		"kube_envoy_controller_xds_acks_total":        1,
		"kube_envoy_controller_xds_pushes_total":      1,
	} {
		if got := fleetMetric(t, name, fleetID); got < atLeast {
			t.Errorf("%s{fleet=%q} = %v, want at least %v", name, fleetID, got, atLeast)
		}
	}

	// A proxy of another fleet, in the same namespace, gets nothing of this one.
	other := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	create(t, other)
	otherID := fleet.Of(other).String()
	testenv.Eventually(t, "the other fleet to be published", func() (bool, error) { return xdsServer.Version(otherID) != "", nil })
	q := xdstest.Connect(t, dialFleet(t, xdsClient(t), otherID), otherID, "pod-2", resourcev3.ClusterType)
	otherVersion, otherNames := clusterNames(t, q, "")
	if len(otherNames) != 0 || otherVersion == version {
		t.Errorf("a proxy of %s got version %q with clusters %v, want its own empty configuration", otherID, otherVersion, otherNames)
	}
}

// A settled fleet, with a proxy that acknowledged its configuration, costs
// the API server nothing: the proxy counts in status do not churn.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "settled", cluster("backend", "1s"))
	create(t, cfg)
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	firstClusters(t, p)
	waitStatus(t, cfg, "one proxy to ACK", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 1 && c.Status.PublishedVersion != ""
	})
	fleetReq := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}}
	suite.ExpectNoWrites(t, ControllerName, cfg, fleetReq)
	// Nor its history, in the operator's namespace.
	if w := suite.Counter.WritesTo("/configmaps/" + history.Name(fleet.ID{Namespace: ns, Name: "edge"})); len(w) != 0 {
		t.Errorf("a settled reconcile wrote the fleet's history: %v", w)
	}
}

// An invalid change is refused with a message naming the resource and field;
// the fleet keeps being served the last accepted version.
func TestInvalidChangeKeepsLastGood(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	good := waitStatus(t, cfg, "accepted", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == "True"
	})

	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = []runtime.RawExtension{cluster("backend", "-5s")}
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	bad := waitStatus(t, cfg, "rejected", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == "False"
	})
	msg := condition(bad, examplev1.EnvoyConfigConditionAccepted).Message
	if condition(bad, examplev1.EnvoyConfigConditionAccepted).Reason != examplev1.EnvoyConfigReasonInvalidResources || !strings.Contains(msg, `spec.resources.clusters[0] ("backend")`) || !strings.Contains(msg, "ConnectTimeout") {
		t.Errorf("Accepted = %+v", condition(bad, examplev1.EnvoyConfigConditionAccepted))
	}
	if good.Status.PublishedVersion == "" || bad.Status.PublishedVersion != good.Status.PublishedVersion || xdsServer.Version(fleetID) != good.Status.PublishedVersion {
		t.Errorf("version moved from %s to %s on an invalid change", good.Status.PublishedVersion, xdsServer.Version(fleetID))
	}
}

// Service endpoints become the EDS cluster's ClusterLoadAssignment and follow
// the EndpointSlices.
func TestServiceEndpoints(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "eds", cluster("backend", "1s"))
	cfg.Spec.ServiceEndpoints = []examplev1.ServiceEndpoints{{Cluster: "backend", Service: "web", Port: intstr.FromString("http")}}
	create(t, cfg)

	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	create(t, slice)
	endpoints := func() []string {
		var out []string
		for _, r := range xdsServer.Resources(fleetID)[resourcev3.EndpointType] {
			for _, loc := range r.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
				for _, e := range loc.GetLbEndpoints() {
					sa := e.GetEndpoint().GetAddress().GetSocketAddress()
					out = append(out, sa.GetAddress()+":"+strconv.FormatUint(uint64(sa.GetPortValue()), 10))
				}
			}
		}
		return out
	}
	testenv.Eventually(t, "two ready endpoints", func() (bool, error) {
		return strings.Join(endpoints(), ",") == "10.0.0.1:8080,10.0.0.2:8080", nil
	})

	slice.Endpoints[2].Conditions.Ready = ptr.To(true)
	if err := suite.Client.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the third endpoint", func() (bool, error) {
		return strings.Join(endpoints(), ",") == "10.0.0.1:8080,10.0.0.2:8080,10.0.0.9:8080", nil
	})
}

// serviceEndpoints may name the pods' port by number: the EndpointSlice's
// port of that number is served, not the others. Endpoints without a zone
// are grouped in the locality "unknown", and every group carries a load
// balancing weight, as proxyless gRPC clients require.
func TestServiceEndpointsByPortNumber(t *testing.T) {
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "eds", cluster("backend", "1s"), cluster("by-name", "1s"))
	cfg.Spec.ServiceEndpoints = []examplev1.ServiceEndpoints{
		{Cluster: "backend", Service: "web", Port: intstr.FromInt32(9090)},
		// By name, the slice's other port: it shows when the slice was served.
		{Cluster: "by-name", Service: "web", Port: intstr.FromString("http")},
	}
	create(t, cfg)
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](8080)},
			{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)},
		},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.2"}, Zone: ptr.To("zone-a"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	})

	// byZone returns a cluster's endpoints by locality zone, and the
	// localities without a positive load balancing weight.
	byZone := func(cluster string) (eps map[string]string, unweighted []string) {
		eps = map[string]string{}
		for _, r := range xdsServer.Resources(fleetID)[resourcev3.EndpointType] {
			cla := r.(*endpointv3.ClusterLoadAssignment)
			if cla.GetClusterName() != cluster {
				continue
			}
			for _, g := range cla.GetEndpoints() {
				zone := g.GetLocality().GetZone()
				if g.GetLoadBalancingWeight().GetValue() == 0 {
					unweighted = append(unweighted, zone)
				}
				var addrs []string
				for _, e := range g.GetLbEndpoints() {
					sa := e.GetEndpoint().GetAddress().GetSocketAddress()
					addrs = append(addrs, sa.GetAddress()+":"+strconv.FormatUint(uint64(sa.GetPortValue()), 10))
				}
				eps[zone] = strings.Join(addrs, ",")
			}
		}
		return eps, unweighted
	}
	testenv.Eventually(t, "the slice's endpoints in cluster by-name", func() (bool, error) {
		eps, _ := byZone("by-name")
		return len(eps) == 2, nil
	})
	for cluster, port := range map[string]string{"backend": "9090", "by-name": "8080"} {
		want := map[string]string{"unknown": "10.0.0.1:" + port, "zone-a": "10.0.0.2:" + port}
		got, unweighted := byZone(cluster)
		if !maps.Equal(got, want) {
			t.Errorf("cluster %s: endpoints by zone = %v, want %v", cluster, got, want)
		}
		if len(unweighted) > 0 {
			t.Errorf("cluster %s: localities %q have no load balancing weight", cluster, unweighted)
		}
	}
}

// /metrics counts NACKs by fleet, and observes, once per published version,
// the time from its publication until every connected proxy accepted it.
func TestNACKCounterAndPublishToACKHistogram(t *testing.T) {
	ctx := context.Background()
	const (
		nacks        = "kube_envoy_controller_xds_nacks_total"
		publishToAck = "kube_envoy_controller_xds_publish_to_ack_seconds"
	)
	ns, fleetID := newFleet(t)
	before := fleetSeries(t, publishToAck, "").GetHistogram()
	start := time.Now()
	cfg := newConfig(ns, "metrics", cluster("backend", "1s"))
	create(t, cfg)
	waitStatus(t, cfg, "the configuration to be published", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion != "" && c.Status.PublishedVersion == xdsServer.Version(fleetID)
	})

	// Two proxies accept the version: one observation, no NACK.
	addr := xdsClient(t)
	proxies := []*xdstest.Proxy{
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.ClusterType),
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.ClusterType),
	}
	for _, p := range proxies {
		firstClusters(t, p)
	}
	waitStatus(t, cfg, "both proxies to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 2 })
	elapsed := time.Since(start)
	h := fleetSeries(t, publishToAck, "").GetHistogram()
	if n := h.GetSampleCount() - before.GetSampleCount(); n != 1 {
		t.Fatalf("%s has %d new observations after both proxies accepted one version, want 1", publishToAck, n)
	}
	// The observation lies between the create and now.
	if d := h.GetSampleSum() - before.GetSampleSum(); d <= 0 || d > elapsed.Seconds() {
		t.Errorf("%s observed %vs, want a time in (0, %v]", publishToAck, d, elapsed.Seconds())
	}
	if got := fleetMetric(t, nacks, fleetID); got != 0 {
		t.Errorf("%s{fleet=%q} = %v before any NACK", nacks, fleetID, got)
	}

	// A new version: one proxy rejects it, the other accepts it. One NACK is
	// counted, and no observation, since not every proxy accepted it.
	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster("extra", "2s"))
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	if _, names := clusterNames(t, proxies[0], "cluster extra: unsupported here"); len(names) != 2 {
		t.Fatalf("proxy 1 got clusters %v, want the new version's two", names)
	}
	if _, names := clusterNames(t, proxies[1], ""); len(names) != 2 {
		t.Fatalf("proxy 2 got clusters %v, want the new version's two", names)
	}
	waitStatus(t, cfg, "one NACK and one ACK of the new version", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Nacked == 1 && c.Status.Proxies.Acked == 1
	})
	if got := fleetMetric(t, nacks, fleetID); got != 1 {
		t.Errorf("%s{fleet=%q} = %v, want 1", nacks, fleetID, got)
	}
	if n := fleetSeries(t, publishToAck, "").GetHistogram().GetSampleCount() - before.GetSampleCount(); n != 1 {
		t.Errorf("%s has %d observations, want still 1: a version one proxy rejected was observed", publishToAck, n)
	}
}

// rejectNewVersion connects two proxies of fleetID, which accept cfg's
// content, then gives cfg a second cluster, extra, which both reject. It
// returns the proxies, the clusters' version they accepted, the version the
// fleet published then, and the clusters' version they rejected.
func rejectNewVersion(t *testing.T, cfg *examplev1.EnvoyConfig, fleetID string) (proxies []*xdstest.Proxy, acceptedClusters, accepted, rejectedClusters string) {
	t.Helper()
	addr := xdsClient(t)
	proxies = []*xdstest.Proxy{
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.ClusterType),
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.ClusterType),
	}
	for _, p := range proxies {
		acceptedClusters, _ = firstClusters(t, p)
	}
	accepted = waitStatus(t, cfg, "both proxies to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 2 }).Status.PublishedVersion

	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster("extra", "2s"))
	if err := suite.Client.Patch(context.Background(), cfg, patch); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies {
		v, names := clusterNames(t, p, "cluster extra: unsupported here")
		if v == acceptedClusters || len(names) != 2 {
			t.Fatalf("expected the new version with 2 clusters, got %s %v", v, names)
		}
		rejectedClusters = v
	}
	return proxies, acceptedClusters, accepted, rejectedClusters
}

// When every connected proxy rejects a new version, the last version they
// accepted is published again, and the change, attributed to the one
// EnvoyConfig that made it, is withheld: the EnvoyConfig says so, with the
// proxy and Envoy's message.
func TestRollbackWhenEveryProxyRejects(t *testing.T) {
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	proxies, v1, accepted, _ := rejectNewVersion(t, cfg, fleetID)
	got := waitStatus(t, cfg, "the change withheld", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonWithheld
	})
	if got.Status.PublishedVersion != accepted || xdsServer.Version(fleetID) != accepted {
		t.Errorf("published %s, want the rolled-back-to %s", xdsServer.Version(fleetID), accepted)
	}
	if c := condition(got, examplev1.EnvoyConfigConditionPublished); c.Status != "False" || c.Reason != examplev1.EnvoyConfigReasonNotPublished {
		t.Errorf("Published = %+v", c)
	}
	for _, typ := range []string{examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigConditionDegraded} {
		c := condition(got, typ)
		if c.Reason != examplev1.EnvoyConfigReasonWithheld || !strings.Contains(c.Message, "cluster extra: unsupported here") || !strings.Contains(c.Message, `proxy "pod-`) {
			t.Errorf("%s = %+v, want Withheld with the proxy and its message", typ, c)
		}
	}
	// The proxies are sent the version they accepted again.
	for _, p := range proxies {
		if v, names := clusterNames(t, p, ""); v != v1 || len(names) != 1 {
			t.Errorf("after the rollback a proxy got %s %v", v, names)
		}
	}
	suite.WaitEvent(t, ns, "edge", "Warning RolledBack")
	suite.WaitEvent(t, ns, cfg.Name, "Warning Withheld")
}

// Two tenants in one fleet: every proxy rejects A's change. It is withheld,
// and B's later changes are served to every proxy; A's status names the
// proxy and Envoy's message. Once A changes again, its content is served.
func TestRejectedConfigStaysWithItsAuthor(t *testing.T) {
	ns, fleetID := newFleet(t)
	a := newConfig(ns, "a", cluster("a-backend", "1s"))
	b := newConfig(ns, "b", cluster("b-backend", "1s"))
	create(t, a)
	create(t, b)
	const refusal = "cluster extra: unsupported here"
	judge := func(names []string) string {
		if slices.Contains(names, "extra") {
			return refusal
		}
		return ""
	}
	addr := xdsClient(t)
	proxies := []*xdstest.Proxy{
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.ClusterType),
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.ClusterType),
	}
	// until has each proxy answer what it is sent, as judge says, until it
	// is sent exactly the clusters want.
	until := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		for _, p := range proxies {
			for i := 0; ; i++ {
				_, names, err := p.NextJudged(judge)
				if err != nil {
					for _, c := range []*examplev1.EnvoyConfig{a, b} {
						got := &examplev1.EnvoyConfig{}
						_ = suite.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got)
						t.Logf("%s: %+v", c.Name, got.Status)
					}
					t.Fatalf("waiting for %v: %v (the fleet is served version %s)", want, err, xdsServer.Version(fleetID))
				}
				slices.Sort(names)
				if slices.Equal(names, want) {
					break
				}
				if i == 20 {
					t.Fatalf("proxy %s: 20 responses, the last with %v, none with %v", p.Node.GetId(), names, want)
				}
			}
		}
	}
	until("a-backend", "b-backend")

	patchConfig := func(c *examplev1.EnvoyConfig, clusters ...runtime.RawExtension) {
		t.Helper()
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Resources.Clusters = clusters
		if err := suite.Client.Patch(context.Background(), c, patch); err != nil {
			t.Fatal(err)
		}
	}
	patchConfig(a, cluster("a-backend", "1s"), cluster("extra", "2s"))
	until("a-backend", "b-backend", "extra") // rejected by both
	until("a-backend", "b-backend")          // the accepted version again
	got := waitStatus(t, a, "A's change withheld", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonWithheld
	})
	if m := condition(got, examplev1.EnvoyConfigConditionAccepted).Message; !strings.Contains(m, refusal) || !strings.Contains(m, `proxy "pod-`) {
		t.Errorf("A's Accepted condition: %q, want the proxy and its message", m)
	}
	suite.WaitEvent(t, ns, a.Name, "Warning Withheld")

	// B changes: every proxy gets it, without A's rejected change.
	patchConfig(b, cluster("b-backend", "1s"), cluster("b-two", "1s"))
	until("a-backend", "b-backend", "b-two")
	gotB := waitStatus(t, b, "B's change served and acknowledged", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue &&
			c.Status.PublishedVersion == xdsServer.Version(fleetID) && c.Status.Proxies.Acked == 2
	})
	if c := condition(gotB, examplev1.EnvoyConfigConditionDegraded); c.Status != metav1.ConditionFalse {
		t.Errorf("B is told %+v: A's rejection is not B's", c)
	}
	waitStatus(t, a, "A still withheld, at the new version", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonWithheld &&
			c.Status.PublishedVersion == gotB.Status.PublishedVersion
	})

	// A changes again: its new content is served.
	patchConfig(a, cluster("a-backend", "1s"), cluster("a-two", "1s"))
	until("a-backend", "a-two", "b-backend", "b-two")
	waitStatus(t, a, "A's new change served", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == metav1.ConditionTrue &&
			condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
	})
}

// Two EnvoyConfigs that define the same cluster: both are told, the older one's is served.
func TestNameClash(t *testing.T) {
	ns, fleetID := newFleet(t)
	older := newConfig(ns, "older", cluster("shared", "1s"))
	create(t, older)
	waitStatus(t, older, "accepted", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == "True"
	})
	time.Sleep(1100 * time.Millisecond) // creation timestamps have one-second precision
	newer := newConfig(ns, "newer", cluster("shared", "7s"))
	create(t, newer)
	for _, c := range []*examplev1.EnvoyConfig{older, newer} {
		waitStatus(t, c, "a clash", func(c *examplev1.EnvoyConfig) bool {
			return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonNameClash
		})
	}
	cs := xdsServer.Resources(fleetID)[resourcev3.ClusterType]
	if len(cs) != 1 || cs[0].(*clusterv3.Cluster).GetConnectTimeout().AsDuration() != time.Second {
		t.Errorf("served %v, want the older config's cluster", cs)
	}
}

const (
	rdsListener = `{"name": "http", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "h", "rds": {"route_config_name": "r", "config_source": {"ads": {}, "resource_api_version": "V3"}}, "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`
	routeToK    = `{"name": "r", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "k"}}]}]}`
)

// served returns the names of the fleet's served resources of typeURL.
func served(fleetID, typeURL string) []string {
	var names []string
	for _, r := range xdsServer.Resources(fleetID)[typeURL] {
		names = append(names, cachev3.GetResourceName(r))
	}
	return names
}

// A change to one EnvoyConfig never takes configuration away from the
// fleet because of another's references (the webhook, which would refuse
// these changes, does not run here). L's listener uses R's route, which
// sends traffic to C's cluster k. C dropping k, then C's deletion, leave the
// fleet serving what it had, and the EnvoyConfigs say why. Once the
// EnvoyConfigs are really gone, the fleet is served nothing.
func TestCascadeNeverEmptiesTheFleet(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	l := newConfig(ns, "l")
	l.Spec.Resources.Listeners = []runtime.RawExtension{raw(rdsListener)}
	r := newConfig(ns, "r")
	r.Spec.Resources.Routes = []runtime.RawExtension{raw(routeToK)}
	c := newConfig(ns, "c", cluster("k", "1s"), cluster("other", "1s"))
	for _, o := range []*examplev1.EnvoyConfig{c, r, l} {
		create(t, o)
	}
	for _, o := range []*examplev1.EnvoyConfig{c, r, l} {
		waitStatus(t, o, "published", func(c *examplev1.EnvoyConfig) bool {
			return condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True"
		})
	}
	wantServed := func(when string) {
		t.Helper()
		if got := served(fleetID, resourcev3.ListenerType); !slices.Equal(got, []string{"http"}) {
			t.Errorf("%s: listeners %v, want http", when, got)
		}
		if got := served(fleetID, resourcev3.ClusterType); !slices.Contains(got, "k") {
			t.Errorf("%s: clusters %v, want k among them", when, got)
		}
	}
	wantServed("at first")

	// C drops cluster k: the change is held, and C says what it would break.
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Resources.Clusters = []runtime.RawExtension{cluster("other", "1s")}
	if err := suite.Client.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, c, "C's change to be held", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonHeld
	})
	if msg := condition(got, examplev1.EnvoyConfigConditionAccepted).Message; !strings.Contains(msg, "EnvoyConfig "+ns+`/r: spec.resources.routes[0] ("r"): cluster "k" does not exist`) {
		t.Errorf("C's Accepted message does not name what it breaks: %q", msg)
	}
	waitStatus(t, r, "R to be told", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonReferencesMissing
	})
	wantServed("after C dropped k")

	// C is deleted: the fleet keeps serving C's published content.
	if err := suite.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, suite.Client, ns, c.Name, &examplev1.EnvoyConfig{})
	got = waitStatus(t, r, "R to be told", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonReferencesMissing
	})
	if msg := condition(got, examplev1.EnvoyConfigConditionDegraded).Message; !strings.Contains(msg, `cluster "k" does not exist`) || !strings.Contains(msg, "keeps serving version") {
		t.Errorf("R's Degraded message: %q", msg)
	}
	wantServed("after C was deleted")

	// The fleet's EnvoyConfigs are really gone: nothing is served.
	for _, o := range []*examplev1.EnvoyConfig{l, r} {
		if err := suite.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the fleet to be served nothing", func() (bool, error) {
		return len(served(fleetID, resourcev3.ListenerType))+len(served(fleetID, resourcev3.ClusterType)) == 0 && xdsServer.Version(fleetID) != "", nil
	})
}

// A fleet without EnvoyConfigs is served empty, and nothing is recorded for
// it: an Envoy costs the control plane no write until it is configured.
func TestFleetWithoutConfigsRecordsNothing(t *testing.T) {
	ns, fleetID := newFleet(t)
	testenv.Eventually(t, "the fleet to be served", func() (bool, error) { return xdsServer.Version(fleetID) != "", nil })
	envoy := &examplev1.Envoy{}
	if err := suite.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "edge"}, envoy); err != nil {
		t.Fatal(err)
	}
	suite.ExpectNoWrites(t, ControllerName, envoy, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}})
	err := suite.Client.Get(context.Background(), types.NamespacedName{Namespace: operatorNamespace, Name: history.Name(fleet.ID{Namespace: ns, Name: "edge"})}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the fleet's history: got %v, want none", err)
	}
}

// The fleet's revision history refused by the API server (an admission
// policy of the operator's namespace here; a quota alike): the EnvoyConfig
// is Degraded with the API server's reason, retried with backoff, and
// published once admitted.
func TestRefusedHistoryIsDegraded(t *testing.T) {
	ns, _ := newFleet(t)
	testenv.TestRefusal(t, &suite, testenv.Refusal[*examplev1.EnvoyConfig]{
		Controller: ControllerName,
		Object:     newConfig(ns, "refused", cluster("a", "1s")),
		Probe:      testenv.ConfigMapProbe(operatorNamespace),
		Resource:   "configmaps",
		Change: func(c *examplev1.EnvoyConfig) {
			c.Spec.Resources.Clusters = []runtime.RawExtension{cluster("a", "2s")}
		},
		Recovered: func(c *examplev1.EnvoyConfig) bool {
			return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
		},
	})
}
