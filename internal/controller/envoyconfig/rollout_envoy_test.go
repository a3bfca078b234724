package envoyconfig

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// A fleet of four real Envoys rolls out its EnvoyConfig's changes step by
// step (one proxy, half, all), each step judged by what its proxies
// served, from the stats they stream to the operator over their ADS
// connection: the whole chain, from Envoy's metrics service sink through
// the replica's report of its proxies' windows to the leader's judgement.
// Traffic goes through every Envoy all along. A change that routes to a
// backend answering 503 is aborted at its first step by its analysis: the
// other three never serve it, the first one is served the previous
// revision again, and the status and an event give the proxy, the metric,
// its value and the threshold. A good change (a response header added)
// passes every step and reaches all four. With the traffic stopped, a
// change waits at its first step for traffic, and neither passes nor
// aborts.
//
// The Envoys run on this host and share the listener's port (SO_REUSEPORT,
// Envoy's default): the kernel spreads the test's connections, one a
// request, over the four, and what each one served is read from its own
// admin interface. They flush their stats every second (the bootstrap's
// stats_flush_interval, ten seconds in a fleet's pods).
func TestRealEnvoysRolloutJudgedByTheirStats(t *testing.T) {
	bin := realenvoy.Require(t)
	ctx := context.Background()
	ns := suite.Namespace(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	ok := answering(t, http.StatusOK, "ok")
	bad := answering(t, http.StatusServiceUnavailable, "bad")
	ports, err := realenvoy.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	edge := ports[0]

	const minRequests = 20
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}, Spec: examplev1.EnvoySpec{
		ConfigRollout: &examplev1.EnvoyConfigRollout{
			Steps:       []examplev1.EnvoyConfigRolloutStep{{Proxies: ptr.To[int32](1)}, {Percent: ptr.To[int32](50)}, {Percent: ptr.To[int32](100)}},
			BakeSeconds: ptr.To[int32](10),
			// The 5xx rule is this test's. The latency rule is the
			// analysis tables' (internal/xds/analysis): on 2 busy cores,
			// one proxy's p99 of a few hundred requests went from the
			// baseline's 21 ms to 155 ms on CPU starvation alone, and
			// aborted the good change.
			Analysis: &examplev1.EnvoyConfigRolloutAnalysis{MinRequests: ptr.To[int32](minRequests),
				LatencyP99: &examplev1.EnvoyRolloutLatencyLimit{MaxToBaselinePercent: ptr.To[int32](0)}},
		}}}
	create(t, e)
	cfg := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}, Spec: examplev1.EnvoyConfigSpec{
		EnvoyRef: "edge",
		Resources: examplev1.EnvoyResources{
			Listeners: []runtime.RawExtension{raw(edgeListener(edge))},
			Routes:    []runtime.RawExtension{raw(edgeRoute("ok", ""))},
			Clusters:  []runtime.RawExtension{raw(staticCluster("ok", ok.port)), raw(staticCluster("bad", bad.port))},
		}}}
	create(t, cfg)
	// On failure, where the rollout stands.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		c := &examplev1.EnvoyConfig{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cfg), c); err == nil {
			t.Logf("the EnvoyConfig's status: %+v; rollout %+v", c.Status.Conditions, c.Status.Rollout)
		}
		h := readHistory(t, id, "the history", func(publish.History) bool { return true })
		t.Logf("the history: current %s, rollout %+v, withheld %+v", h.Current, h.Rollout, h.Withheld)
		t.Logf("the proxies' answers: %+v", xdsServer.ProxyReport()[id.String()])
	})
	got := waitStatus(t, cfg, "the EnvoyConfig published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True"
	})
	v1 := got.Status.PublishedVersion

	nodes := []string{"edge-0", "edge-1", "edge-2", "edge-3"}
	envoys := map[string]*realenvoy.Process{}
	for _, n := range nodes {
		envoys[n] = runFleetEnvoy(t, bin, id, n)
	}
	waitStatus(t, cfg, "the four Envoys to accept the first version", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == v1 && c.Status.Proxies.Acked == 4
	})
	testenv.Eventually(t, "every Envoy to listen", func() (bool, error) {
		for _, n := range nodes {
			if s, err := envoys[n].Stat(ctx, "listener_manager.total_listeners_active"); err != nil || s < 2 {
				return false, fmt.Errorf("%s: %d listeners active (%v)", n, s, err)
			}
		}
		return true, nil
	})

	load := startLoad(t, edge, 4)
	// stat returns what Envoy n counted of name; 0 for a stat it has not
	// made yet.
	stat := func(n, name string) int64 {
		t.Helper()
		v, err := envoys[n].Stat(ctx, name)
		if err != nil && !strings.Contains(err.Error(), realenvoy.ErrNoStat.Error()) {
			t.Fatalf("%s: %v", n, err)
		}
		return v
	}
	// routesOf returns Envoy n's route configurations, as its admin
	// interface dumps them.
	routesOf := func(n string) string {
		t.Helper()
		routes, err := envoys[n].Get(ctx, "/config_dump?resource=dynamic_route_configs")
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		return routes
	}
	testenv.Eventually(t, "every Envoy to serve the load", func() (bool, error) {
		for _, n := range nodes {
			if s := stat(n, "cluster.ok.upstream_rq_2xx"); s < minRequests {
				return false, fmt.Errorf("%s served %d requests to ok", n, s)
			}
		}
		return true, nil
	})

	// The bad change: the route sends everything to the backend that
	// answers 503.
	change := func(route string) {
		t.Helper()
		c := &examplev1.EnvoyConfig{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cfg), c); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Resources.Routes = []runtime.RawExtension{raw(route)}
		if err := suite.Client.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
	}
	change(edgeRoute("bad", ""))
	rolling := readHistory(t, id, "the bad change rolling out", func(h publish.History) bool {
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutProgressing && h.Rollout.Cut != "" && h.Current != v1 && h.Rollout.Previous == v1
	})
	v2 := rolling.Current
	var first string
	for _, n := range nodes {
		if rolling.Rollout.Serves(n) == v2 {
			if first != "" {
				t.Fatalf("the first step serves %s and %s, want one proxy", first, n)
			}
			first = n
		}
	}
	if first == "" {
		t.Fatalf("the first step serves none of %v: %+v", nodes, *rolling.Rollout)
	}
	t.Logf("version %s rolls out to %s first", v2, first)
	aborted := readHistory(t, id, "the bad change aborted by its analysis", func(h publish.History) bool {
		return h.Withheld[ns+"/edge"].Analysis
	})
	withheld := aborted.Withheld[ns+"/edge"]
	t.Logf("withheld: %+v", withheld)
	// The figures of the window's first flush may hold some of what the
	// proxy served before; the abort comes once its 5xx are above 5%.
	if withheld.Node != first || withheld.Version != v2 || !strings.HasPrefix(withheld.Detail, "proxy "+first+" ") ||
		!strings.Contains(withheld.Detail, ": 5xx-ratio ") || !strings.HasSuffix(withheld.Detail, ", above the ceiling of 5.00%") {
		t.Errorf("the change withheld as %+v, want it withheld for %s's 5xx ratio above 5%%", withheld, first)
	}
	// The first proxy is back on the previous revision, and its answers
	// are the good backend's again.
	testenv.Eventually(t, first+" to be served the previous revision again", func() (bool, error) {
		routes := routesOf(first)
		return strings.Contains(routes, `"cluster": "ok"`) && !strings.Contains(routes, `"cluster": "bad"`), fmt.Errorf("%s's routes: %s", first, routes)
	})
	okBefore := stat(first, "cluster.ok.upstream_rq_2xx")
	testenv.Eventually(t, first+" to serve the good backend again", func() (bool, error) {
		return stat(first, "cluster.ok.upstream_rq_2xx") >= okBefore+minRequests, nil
	})
	if n := stat(first, "cluster.bad.upstream_rq_5xx"); n < minRequests {
		t.Errorf("%s served %d requests to the bad backend, want at least the %d that judge a proxy", first, n, minRequests)
	}
	for _, n := range nodes {
		if n == first {
			continue
		}
		if s := stat(n, "cluster.bad.upstream_rq_total"); s != 0 {
			t.Errorf("%s, outside the first step, sent %d requests to the bad backend", n, s)
		}
		if s := stat(n, "http.edge.downstream_rq_5xx"); s != 0 {
			t.Errorf("%s, outside the first step, answered %d requests with a 5xx", n, s)
		}
	}
	got = waitStatus(t, cfg, "the EnvoyConfig to say its change was aborted", func(c *examplev1.EnvoyConfig) bool {
		return strings.Contains(condition(c, examplev1.EnvoyConfigConditionDegraded).Message, withheld.Detail)
	})
	for _, typ := range []string{examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigConditionDegraded} {
		c := condition(got, typ)
		t.Logf("%s %s %s: %s", typ, c.Status, c.Reason, c.Message)
		if !strings.Contains(c.Message, "failed its analysis") || !strings.Contains(c.Message, "proxy "+first+" ") {
			t.Errorf("%s = %+v, want it to name the analysis and the proxy", typ, c)
		}
	}
	suite.WaitEvent(t, ns, "edge", fmt.Sprintf("Warning RolloutAborted version %s failed its analysis at step 1: %s", v2, withheld.Detail))

	// The good change: a response header, still to the good backend.
	change(edgeRoute("ok", "good"))
	passed := readHistory(t, id, "the good change served to all", func(h publish.History) bool {
		return h.Current != v2 && h.Current != v1 && h.Rollout == nil
	})
	v3 := passed.Current
	for _, n := range nodes {
		testenv.Eventually(t, n+" to be served "+v3, func() (bool, error) {
			routes := routesOf(n)
			return strings.Contains(routes, `"value": "good"`), fmt.Errorf("%s's routes: %s", n, routes)
		})
	}
	// The first step passed on what its proxy served: promoted to the
	// second; the history above shows the rollout complete.
	suite.WaitEvent(t, ns, "edge", "Normal RolloutPromoted version "+v3+" is served to 2 of 4 proxies (50%)")
	headed := load.headed.Load()
	testenv.Eventually(t, "responses with the header", func() (bool, error) {
		return load.headed.Load() >= headed+minRequests, nil
	})

	// Too little traffic: with the load stopped, a change waits.
	load.stop()
	change(edgeRoute("ok", "quiet"))
	waiting := readHistory(t, id, "the quiet change rolling out", func(h publish.History) bool {
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutProgressing && h.Rollout.Cut != "" && h.Current != v3 && h.Rollout.Previous == v3
	})
	v4 := waiting.Current
	got = waitStatus(t, cfg, "the quiet change waiting for traffic", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Rollout != nil && c.Status.Rollout.Version == v4 && strings.Contains(c.Status.Rollout.Message, "too little traffic")
	})
	t.Logf("rollout status: %+v", *got.Status.Rollout)
	// Long past its bake, its proxy reporting all along, it still waits.
	var quiet string
	for _, n := range nodes {
		if waiting.Rollout.Serves(n) == v4 {
			quiet = n
		}
	}
	testenv.Eventually(t, quiet+"'s window to outlast the bake", func() (bool, error) {
		w := xdsServer.ProxyReport()[id.String()].Proxies[quiet].Window
		return w != nil && w.Reports >= 11, fmt.Errorf("window %+v", w)
	})
	got = waitStatus(t, cfg, "the quiet change, baked, still waiting for traffic", func(c *examplev1.EnvoyConfig) bool {
		r := c.Status.Rollout
		return r != nil && r.Version == v4 && strings.Contains(r.Message, "too little traffic") && !strings.Contains(r.Message, "bakes until")
	})
	t.Logf("rollout status after the bake: %+v", *got.Status.Rollout)
	still := readHistory(t, id, "the history", func(publish.History) bool { return true })
	if still.Current != v4 || still.Rollout == nil || still.Rollout.Phase != publish.RolloutProgressing || still.Rollout.Step != 0 || len(still.Withheld) != 0 {
		t.Errorf("after the bake without traffic: current %s, rollout %+v, withheld %v; want %s still waiting at its first step", still.Current, still.Rollout, still.Withheld, v4)
	}
}

// edgeListener listens on 127.0.0.1:port, its routes (stat prefix edge)
// over RDS.
func edgeListener(port uint32) string {
	return fmt.Sprintf(`{"name": "edge", "address": {"socket_address": {"address": "127.0.0.1", "port_value": %d}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "edge", "rds": {"route_config_name": "edge", "config_source": {"ads": {}, "resource_api_version": "V3"}}, "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`, port)
}

// edgeRoute sends everything to cluster, and, with header set, adds
// x-rollout: header to the responses.
func edgeRoute(cluster, header string) string {
	add := ""
	if header != "" {
		add = `, "response_headers_to_add": [{"header": {"key": "x-rollout", "value": "` + header + `"}}]`
	}
	return `{"name": "edge", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "` + cluster + `"}}]` + add + `}]}`
}

func staticCluster(name string, port uint32) string {
	return fmt.Sprintf(`{"name": "%s", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "%s", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": %d}}}}]}]}}`, name, name, port)
}

// localBackend is a local HTTP server that answers every request with one
// status.
type localBackend struct{ port uint32 }

func answering(t *testing.T, status int, body string) localBackend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return localBackend{port: uint32(lis.Addr().(*net.TCPAddr).Port)}
}

// load sends requests to 127.0.0.1:port from loops of their own, each
// request on a connection of its own, until stopped (at the latest when
// the test ends).
type load struct {
	// headed counts the responses that carried x-rollout.
	headed atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(t *testing.T, port uint32, loops int) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for range loops {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					continue
				}
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.Header.Get("x-rollout") != "" {
					l.headed.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

// stop ends the loops and waits for them.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// runFleetEnvoy starts a real Envoy as the proxy node of fleet id, as its
// pod would run it: the fleet's bootstrap, with the stats sink, over mutual
// TLS to the suite's xDS server with a client certificate of the fleet,
// and its container's arguments. It flushes its stats every second. Envoy
// is stopped when the test ends.
func runFleetEnvoy(t *testing.T, bin string, id fleet.ID, node string) *realenvoy.Process {
	t.Helper()
	xds := proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "localhost", Port: 1, MutualTLS: true, StatsSink: true}
	b := proxy.Bootstrap(xds, proxy.Overload{})
	b.StatsFlushInterval = durationpb.New(time.Second)
	a, err := ca.Authority(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueClient(a, id, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := realenvoy.FleetPod(b, xds, id.String(), node, leaf.Cert, leaf.Key, a.Bundle())
	if err != nil {
		t.Fatal(err)
	}
	log := &realenvoy.Log{}
	p, err := realenvoy.Run(bin, pod, t.TempDir(), xdsClient(t), false, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("%s's log:\n%s", node, log.String())
		}
	})
	return p
}
