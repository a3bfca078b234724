//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
)

// TestXDSAgainstContour measures the operator's xDS push beside Contour's,
// in the same run, on the same cluster and machine: hack/bench.sh starts
// Contour (the release hack/contour.sh pins) as a process on this host
// beside the operator when the run names this benchmark (-run Contour) or
// BENCH_CONTOUR=1; without it, the benchmark is skipped.
//
// Both serve the same shape: 50 EDS clusters of one endpoint each, and one
// endpoint's port changes per round. For the operator, two ways: one
// EnvoyConfig of its fleet whose endpoints change (as TestXDSPushToAck),
// and one whose clusters are filled from 50 Services (serviceEndpoints),
// whose EndpointSlice changes; for Contour, an HTTPProxy that routes to 50
// Services without selectors. The Services have one EndpointSlice each,
// which the benchmark writes itself. A round is timed from the API write
// (the EnvoyConfig's patch; the EndpointSlice's) to each proxy's ACK of the
// new endpoints.
// The operator's load clients are its stand-in proxies (one ADS stream each,
// as the operator's bootstrap configures Envoy); Contour's are Envoys as
// `contour bootstrap` configures them (contourProxy: a stream per type, EDS,
// RDS and RTDS by name). Each is on a connection of its own, over mutual TLS.
//
// For each mode (sotw, delta) and each size in BENCH_XDS_SIZES (default
// "100,1000"), six runs of BENCH_XDS_ROUNDS rounds each (default 10):
// ours, ours by EndpointSlice, Contour, Contour, ours by EndpointSlice,
// ours, so that a drift of the machine's load weighs on each alike. Each run starts its proxies afresh and stops them
// at its end. A side's figures pool its two runs. The first run of each
// side saves the control plane's heap profile (xdsRun).
//
// BENCH_CONTOUR_NODE=first makes Contour's proxies send their node with
// each stream's first request only (see nodeMode); by default they send it
// with every request, as Envoys bootstrapped by Contour do.
func TestXDSAgainstContour(t *testing.T) {
	caddr := os.Getenv("CONTOUR_XDS_ADDR")
	if caddr == "" {
		t.Skip("Contour is not running: hack/bench.sh -run Contour (or BENCH_CONTOUR=1) starts it beside the operator")
	}
	if os.Getenv("BENCH_XDS_PLAINTEXT") == "1" {
		t.Fatal("BENCH_XDS_PLAINTEXT=1: the operator serves without TLS, Contour over mutual TLS; this benchmark compares them over mutual TLS only")
	}
	sizes := sizesEnv(t, "BENCH_XDS_SIZES", "100,1000")
	rounds := sizeEnv(t, "BENCH_XDS_ROUNDS", 10)
	node := nodeMode(t)
	ours := oursSide(t)
	slices := oursBySlicesSide(t)
	theirs := contourSide(t, caddr, node)

	rows := []string{
		"| mode | proxies | control plane | connection set-up: all first ACKs (mean of 2 runs) | push to ACK sent p50 | p99 | all ACKs sent, median of rounds | bytes per proxy per endpoint change | CPU per push | RSS after the runs (MiB) |",
		"|---|---|---|---|---|---|---|---|---|---|",
	}
	ratios := []string{
		"| ours | Contour | proxies | push to ACK p50 | p99 | all ACKs, median | CPU per push |",
		"|---|---|---|---|---|---|---|",
	}
	for _, n := range sizes {
		results := map[string]map[string]sideResult{} // by mode, then side
		for _, mode := range []string{"sotw", "delta"} {
			var o, e, c [2]runResult
			o[0] = xdsRun(t, ours, mode, n, rounds, true)
			e[0] = xdsRun(t, slices, mode, n, rounds, true)
			c[0] = xdsRun(t, theirs, mode, n, rounds, true)
			c[1] = xdsRun(t, theirs, mode, n, rounds, false)
			e[1] = xdsRun(t, slices, mode, n, rounds, false)
			o[1] = xdsRun(t, ours, mode, n, rounds, false)
			results[mode] = map[string]sideResult{ours.name: pool(o), slices.name: pool(e), theirs.name: pool(c)}
			for _, side := range []string{ours.name, slices.name, theirs.name} {
				r := results[mode][side]
				rows = append(rows, fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %d | %.0f ms | %.0f |", mode, n, side,
					ms(r.setup), ms(r.p50), ms(r.p99), ms(r.all), r.bytes, r.cpuPerPush*1000, mib(r.rss)))
				t.Log(rows[len(rows)-1])
			}
		}
		// Each mode against Contour's in the same mode, and delta against
		// Contour's state of the world: what an Envoy bootstrapped by
		// Contour speaks.
		for _, side := range []string{ours.name, slices.name} {
			for _, pair := range [][2]string{{"sotw", "sotw"}, {"delta", "delta"}, {"delta", "sotw"}} {
				a, b := results[pair[0]][side], results[pair[1]][theirs.name]
				ratios = append(ratios, fmt.Sprintf("| %s, %s | %s | %d | %s | %s | %s | %s |", side, pair[0], pair[1], n,
					ratio(a.p50.Seconds(), b.p50.Seconds()), ratio(a.p99.Seconds(), b.p99.Seconds()), ratio(a.all.Seconds(), b.all.Seconds()),
					ratio(a.cpuPerPush, b.cpuPerPush)))
				t.Log(ratios[len(ratios)-1])
			}
		}
	}
	Record(t, "xds-contour", fmt.Sprintf("Contour's proxies send their node with %s request (BENCH_CONTOUR_NODE=%s).\n\n", map[string]string{"every": "every", "first": "each stream's first"}[node], node)+
		strings.Join(rows, "\n")+"\n\nours / Contour:\n\n"+strings.Join(ratios, "\n")+"\n")
}

// xdsSide is one control plane of TestXDSAgainstContour.
type xdsSide struct {
	name    string
	key     string // its name in file names
	pid     string // its process, for /proc
	addr    string // its xDS address
	fleet   string // the load clients' XDS_LOAD_FLEET
	certDir string // the load clients' certificate
	env     []string
	// change makes one endpoint change with one API write, and returns
	// when the write was sent.
	change func(t *testing.T) time.Time
	// idle waits until no stream of an earlier run is left.
	idle func(t *testing.T)
	// profile saves the control plane's heap profile, after a GC, as
	// name.heap.pprof in the results (saveProfiles).
	profile func(t *testing.T, name string)
}

// podlessFleet makes the namespace ns and in it the operator's fleet edge,
// without pods, and returns the directory of the client certificate the
// operator issued it, which the load clients present.
func podlessFleet(t *testing.T, ns string) string {
	t.Helper()
	namespace(t, ns)
	if err := k8s.Create(context.Background(), &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](0)}}); err != nil {
		t.Fatal(err)
	}
	return fleetCertificate(t, ns, "edge")
}

// oursSide makes the operator's fleet, without pods, and its EnvoyConfig
// of 50 EDS clusters in the namespace bench-xds-vs-ours.
func oursSide(t *testing.T) xdsSide {
	t.Helper()
	ns := "bench-xds-vs-ours"
	ctx := context.Background()
	certDir := podlessFleet(t, ns)
	port := 9000
	cfg := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "eds", Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: xdsResources(port)}}
	if err := k8s.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return xdsSide{
		name: "ours", key: "ours", pid: envOrFail(t, "OPERATOR_PID"), addr: xdsAddr(t), fleet: ns + "/edge", certDir: certDir,
		change: func(t *testing.T) time.Time {
			t.Helper()
			port++
			patch := client.MergeFrom(cfg.DeepCopy())
			cfg.Spec.Resources = xdsResources(port)
			start := time.Now()
			if err := k8s.Patch(ctx, cfg, patch); err != nil {
				t.Fatal(err)
			}
			return start
		},
		idle:    func(t *testing.T) { waitConnected(t, "", 0) },
		profile: saveProfiles,
	}
}

// contourSide makes Contour's equivalent of the operator's fleet in the
// namespace bench-xds-vs-contour: 50 Services c0..c49 of one port, without
// selectors, each with one EndpointSlice of one endpoint that the benchmark
// writes itself (its managed-by label is not the EndpointSlice controller's,
// which leaves it alone), and an HTTPProxy that routes /c<i> to Service
// c<i>. Contour makes an EDS cluster of each Service; it has accepted the
// HTTPProxy when its status says valid.
func contourSide(t *testing.T, addr, node string) xdsSide {
	t.Helper()
	ns := "bench-xds-vs-contour"
	namespace(t, ns)
	ctx := context.Background()
	change := serviceEndpoints(t, ns)
	var routes []any
	for i := range xdsClusters {
		routes = append(routes, map[string]any{
			"conditions": []any{map[string]any{"prefix": fmt.Sprintf("/c%d", i)}},
			"services":   []any{map[string]any{"name": fmt.Sprintf("c%d", i), "port": int64(80)}},
		})
	}
	proxy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
		"metadata": map[string]any{"name": "bench", "namespace": ns},
		"spec":     map[string]any{"virtualhost": map[string]any{"fqdn": "bench.example.com"}, "routes": routes},
	}}
	if err := k8s.Create(ctx, proxy); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 200*time.Millisecond, 2*time.Minute, "Contour to accept the HTTPProxy", func() (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(proxy.GroupVersionKind())
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(proxy), got); err != nil {
			return false, err
		}
		status, _, _ := unstructured.NestedString(got.Object, "status", "currentStatus")
		desc, _, _ := unstructured.NestedString(got.Object, "status", "description")
		return status == "valid", fmt.Errorf("status %q: %s", status, desc)
	})
	return xdsSide{
		name: "Contour", key: "contour", pid: envOrFail(t, "CONTOUR_PID"), addr: addr, fleet: "projectcontour",
		certDir: envOrFail(t, "CONTOUR_CERT_DIR"), env: []string{"XDS_LOAD_AS=contour", "XDS_LOAD_NODE=" + node},
		change: change,
		idle:   waitContourIdle,
		profile: func(t *testing.T, name string) {
			t.Helper()
			dir := os.Getenv("BENCH_OUT")
			if dir == "" || Smoke() {
				return
			}
			b := httpGet(t, "http://"+envOrFail(t, "CONTOUR_DEBUG_ADDR")+"/debug/pprof/heap?gc=1")
			if err := os.WriteFile(filepath.Join(dir, name+".heap.pprof"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// serviceEndpoints makes, in ns, 50 Services c0..c49 of one port (http,
// 80), without selectors, each with one EndpointSlice of one endpoint that
// the benchmark writes itself (its managed-by label is not the
// EndpointSlice controller's, which leaves it alone), and returns the
// change of a round: one merge patch of c0's EndpointSlice, a new port.
func serviceEndpoints(t *testing.T, ns string) func(t *testing.T) time.Time {
	t.Helper()
	ctx := context.Background()
	port := 9000
	slice := func(i, p int) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d-1", i), Namespace: ns, Labels: map[string]string{
				discoveryv1.LabelServiceName: fmt.Sprintf("c%d", i), discoveryv1.LabelManagedBy: BenchUserAgent}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.%d.%d.1", i/256, i%256)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(p)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
	}
	for i := range xdsClusters {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Port: 80,
				TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := 8080
		if i == 0 {
			p = port // the endpoint that changes
		}
		if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(i, p), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return func(t *testing.T) time.Time {
		t.Helper()
		port++
		body := fmt.Sprintf(`{"ports":[{"name":"http","port":%d,"protocol":"TCP"}]}`, port)
		start := time.Now()
		if _, err := cs.DiscoveryV1().EndpointSlices(ns).Patch(ctx, "c0-1", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return start
	}
}

// oursBySlicesSide makes the operator's fleet, without pods, in the
// namespace bench-xds-vs-ours-slices, with one EnvoyConfig of 50 EDS
// clusters filled from the Services of serviceEndpoints
// (spec.serviceEndpoints): a round is the same API write as Contour's, one
// EndpointSlice's new port, which admission does not see.
func oursBySlicesSide(t *testing.T) xdsSide {
	t.Helper()
	ns := "bench-xds-vs-ours-slices"
	ctx := context.Background()
	certDir := podlessFleet(t, ns)
	change := serviceEndpoints(t, ns)
	cfg := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "eds", Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: xdsResources(0).Clusters}}}
	for i := range xdsClusters {
		cfg.Spec.ServiceEndpoints = append(cfg.Spec.ServiceEndpoints, examplev1.ServiceEndpoints{
			Cluster: fmt.Sprintf("c%d", i), Service: fmt.Sprintf("c%d", i), Port: intstr.FromString("http")})
	}
	if err := k8s.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return xdsSide{
		name: "ours, by EndpointSlice", key: "ours-slices", pid: envOrFail(t, "OPERATOR_PID"), addr: xdsAddr(t), fleet: ns + "/edge", certDir: certDir,
		change: change, idle: func(t *testing.T) { waitConnected(t, "", 0) }, profile: saveProfiles,
	}
}

// waitContourIdle waits until Contour's gRPC server has no stream open:
// its grpc_server_started_total and grpc_server_handled_total (every
// method) are equal.
func waitContourIdle(t *testing.T) {
	t.Helper()
	addr := envOrFail(t, "CONTOUR_METRICS_ADDR")
	testenv.Poll(t, 200*time.Millisecond, 2*time.Minute, "Contour's xDS streams of the previous run to close", func() (bool, error) {
		fams, err := measure.ParseMetrics(httpGet(t, "http://"+addr+"/metrics"))
		if err != nil {
			return false, err
		}
		var open float64
		for name, sign := range map[string]float64{"grpc_server_started_total": 1, "grpc_server_handled_total": -1} {
			s, err := measure.Sum(fams, name, nil)
			if err != nil && !errors.Is(err, measure.ErrNoFamily) {
				return false, err
			}
			open += sign * s.Value
		}
		return open == 0, fmt.Errorf("%.0f streams open", open)
	})
}

// againstContourSetupWait bounds a run's connection set-up. Contour's
// proxies each open 54 streams and send a 61 KB node with each request:
// on 2 cores, a thousand of them take minutes to set up.
const againstContourSetupWait = 30 * time.Minute

// runResult is what one run of a side measured.
type runResult struct {
	setup    time.Duration
	lat, all []time.Duration // each ACK's push to ACK; each round's last
	bytes    int64
	cpu      float64 // seconds of the control plane's CPU over the rounds
	rounds   int
	acks     int
	rss      int64
}

// xdsRun starts n proxies of side in mode, waits for their first ACKs,
// makes rounds endpoint changes one after the other, each once every proxy
// ACKed the one before, and stops the proxies. With profile, it saves the
// control plane's heap profile with the proxies connected, after the
// rounds: xds-vs-<ours|contour>-<mode>-<n>.heap.pprof in the results.
func xdsRun(t *testing.T, side xdsSide, mode string, n, rounds int, profile bool) runResult {
	t.Helper()
	side.idle(t)
	started := time.Now()
	acks := startLoadClients(t, side.addr, side.fleet, mode, n, xdsClusters, side.certDir, side.env...)
	defer acks.stop()
	acks.waitAllWithin(t, n, "", againstContourSetupWait)
	r := runResult{setup: time.Since(started), rounds: rounds}
	cpuBefore := procCPU(t, side.pid)
	for range rounds {
		prev := acks.latest()
		start := side.change(t)
		var last time.Duration
		for _, a := range acks.waitAll(t, n, prev) {
			d := a.at.Sub(start)
			r.lat = append(r.lat, d)
			last = max(last, d)
			r.bytes += int64(a.bytes)
			r.acks++
		}
		r.all = append(r.all, last)
	}
	r.cpu = procCPU(t, side.pid) - cpuBefore
	r.rss = procMemory(t, side.pid).Current
	if profile {
		side.profile(t, fmt.Sprintf("xds-vs-%s-%s-%d", side.key, mode, n))
	}
	t.Logf("%s, %s, %d proxies: set-up %s, all ACKs per round %v, %.0f ms CPU per push", side.name, mode, n, ms(r.setup), r.all, r.cpu/float64(rounds)*1000)
	return r
}

// sideResult pools a side's two runs.
type sideResult struct {
	setup, p50, p99, all time.Duration
	bytes                int64 // per proxy per change
	cpuPerPush           float64
	rss                  int64
}

func pool(runs [2]runResult) sideResult {
	var lat, all []time.Duration
	var bytes int64
	var cpu float64
	acks, rounds := 0, 0
	for _, r := range runs {
		lat, all = append(lat, r.lat...), append(all, r.all...)
		bytes += r.bytes
		cpu += r.cpu
		acks += r.acks
		rounds += r.rounds
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return sideResult{
		setup: (runs[0].setup + runs[1].setup) / 2,
		p50:   lat[len(lat)/2], p99: lat[len(lat)*99/100], all: all[len(all)/2],
		bytes: bytes / int64(max(acks, 1)), cpuPerPush: cpu / float64(rounds), rss: max(runs[0].rss, runs[1].rss),
	}
}

// ratio is a/b with two decimals, or "—" when b is 0: a CPU time below
// /proc's resolution (10 ms) over the rounds.
func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// procCPU reads the CPU time process pid has used, in seconds, from its
// /proc/PID/stat.
func procCPU(t *testing.T, pid string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		t.Fatalf("reading process %s's CPU time: %v", pid, err)
	}
	s, err := measure.ParseProcStat(b)
	if err != nil {
		t.Fatalf("process %s's CPU time: %v", pid, err)
	}
	return s
}

// procMemory reads process pid's memory from its /proc/PID/status.
func procMemory(t *testing.T, pid string) measure.ProcMemory {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatalf("reading process %s's memory: %v", pid, err)
	}
	m, err := measure.ParseProcStatus(b)
	if err != nil {
		t.Fatalf("process %s's memory (/proc/%s/status): %v", pid, pid, err)
	}
	return m
}

// envOrFail reads a variable hack/bench.sh sets, and fails without it.
func envOrFail(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Fatalf("%s is not set: run through hack/bench.sh", key)
	}
	if strings.HasSuffix(key, "_PID") {
		if _, err := strconv.Atoi(v); err != nil {
			t.Fatalf("%s=%q is not a process id", key, v)
		}
	}
	return v
}

// nodeMode is BENCH_CONTOUR_NODE: "every" (the default), Contour's proxies
// send their node with every request, as an Envoy bootstrapped by Contour
// does; "first", with each stream's first request only, as an Envoy whose
// bootstrap sets set_node_on_first_message_only would.
func nodeMode(t *testing.T) string {
	t.Helper()
	switch v := envOr("BENCH_CONTOUR_NODE", "every"); v {
	case "every", "first":
		return v
	default:
		t.Fatalf("BENCH_CONTOUR_NODE=%q: want every or first", v)
		return ""
	}
}
