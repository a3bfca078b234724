//go:build bench

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/standin"
)

// The xDS benchmark's fleet: xdsClusters EDS clusters, each with one endpoint.
const xdsClusters = 50

// loadClientsEnv, set in a child process of the bench binary, makes it run ADS
// clients instead of tests (see TestMain): the proxies are a separate
// process from the server and from the benchmark.
const loadClientsEnv = "XDS_LOAD_CLIENTS"

func xdsResources(port int) examplev1.EnvoyResources { return clusterRange(0, xdsClusters, port, 8080) }

// clusterRange returns the EDS clusters c<from>..c<to-1> and their
// ClusterLoadAssignments, each with one endpoint: port for c0, other for the rest.
func clusterRange(from, to, port, other int) examplev1.EnvoyResources {
	var res examplev1.EnvoyResources
	for i := from; i < to; i++ {
		res.Clusters = append(res.Clusters, runtime.RawExtension{Raw: []byte(fmt.Sprintf(
			`{"name": "c%d", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`, i))})
		p := other
		if i == 0 {
			p = port // the endpoint that changes
		}
		res.Endpoints = append(res.Endpoints, runtime.RawExtension{Raw: []byte(fmt.Sprintf(
			`{"cluster_name": "c%d", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.%d.%d.1", "port_value": %d}}}}]}]}`, i, i/256, i%256, p))})
	}
	return res
}

// TestXDSPushToAck measures, with 100 and 1000 proxies connected over state
// of the world and over delta ADS, each over mutual TLS with its fleet's
// certificate as the operator issued it: the time from starting the proxies
// to every proxy's first ACK (connection set-up: handshakes and first push),
// the time from an EnvoyConfig update (one EDS endpoint changes) to each
// proxy's ACK, the bytes each proxy is sent for it, the mean wall time of
// each stage of its push (the operator's
// kube_envoy_controller_xds_push_stage_seconds over the rounds), and the
// operator's live heap per 1000 connected proxies.
// BENCH_XDS_SIZES sets the numbers of proxies (default "100,1000"),
// BENCH_XDS_ROUNDS the updates per row (default 10), BENCH_XDS_SETUPS how
// many proxies may be setting up at once (default: all of them). Each row
// saves the operator's heap and goroutine profiles with the proxies
// connected (saveProfiles).
func TestXDSPushToAck(t *testing.T) {
	addr := xdsAddr(t)
	sizes := sizesEnv(t, "BENCH_XDS_SIZES", "100,1000")
	rounds := sizeEnv(t, "BENCH_XDS_ROUNDS", 10)
	rows := []string{
		"| mode | transport | proxies | connection set-up: all first ACKs | push to ACK sent p50 | p99 | all ACKs sent, median of rounds | bytes per proxy per endpoint change | operator CPU per push | operator live heap per 1000 proxies (MiB) | operator RSS (MiB) | of which heap in use / goroutine stacks (MiB), goroutines | " +
			strings.Join(pushStageNames, " | ") + " |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|" + strings.Repeat("---|", len(pushStageNames)),
	}
	// Each row's content is its own (its endpoints' ports), so that every
	// push of every row has the real Envoy load what admission and the
	// leader judge: a row that repeated another's content would find
	// their verdicts cached, and not pay for what the others do.
	row := 0
	for _, mode := range []string{"sotw", "delta"} {
		for _, n := range sizes {
			base := 9000 + row*(rounds+1)
			row++
			ns := fmt.Sprintf("bench-xds-%s-%d", mode, n)
			fleet := ns + "/edge"
			namespace(t, ns)
			ctx := context.Background()
			// A fleet of the built-in server, without pods: the operator
			// issues its client certificate, which the load clients present.
			if err := k8s.Create(ctx, &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
				Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](0)}}); err != nil {
				t.Fatal(err)
			}
			certDir := ""
			if os.Getenv("BENCH_XDS_PLAINTEXT") != "1" {
				certDir = fleetCertificate(t, ns, "edge")
			}
			cfg := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "eds", Namespace: ns},
				Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: xdsResources(base)}}
			if err := k8s.Create(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			// The memory of n proxies: the live heap with them connected minus
			// without, both after a GC, once the previous row's streams are gone.
			waitConnected(t, "", 0)
			heapBefore := operatorHeap(t)
			started := time.Now()
			acks := startLoadClients(t, addr, fleet, mode, n, xdsClusters, certDir)
			acks.waitAllWithin(t, n, "", setupWait)
			setup := time.Since(started)
			waitConnected(t, fleet, n)
			heapAfter := operatorHeap(t)
			saveProfiles(t, fmt.Sprintf("xds-%s-%d", mode, n))

			var lat []time.Duration
			var all []time.Duration
			var bytes int64
			cpuBefore := operatorCPU(t)
			stagesBefore := pushStages(t)
			loadsBefore := envoyLoads(t)
			for r := range rounds {
				prev := acks.latest()
				patch := client.MergeFrom(cfg.DeepCopy())
				cfg.Spec.Resources = xdsResources(base + 1 + r)
				start := time.Now()
				if err := k8s.Patch(ctx, cfg, patch); err != nil {
					t.Fatal(err)
				}
				got := acks.waitAll(t, n, prev)
				var last time.Duration
				for _, a := range got {
					d := a.at.Sub(start)
					lat = append(lat, d)
					last = max(last, d)
					bytes += int64(a.bytes)
				}
				all = append(all, last)
			}
			cpuPerPush := (operatorCPU(t) - cpuBefore) / float64(rounds)
			// The last round's stages are observed once its reconcile ends
			// and its proxies all ACKed: wait for them.
			stages := waitPushStages(t, stagesBefore, rounds)
			loads := envoyLoads(t)
			// The judge stage: Envoy runs at admission (the webhook, in the
			// patch's request) and before the leader records, once per
			// content; the other is a verdict from its cache.
			t.Logf("%s, %d proxies: %.0f Envoy loads in %d rounds, %.1f ms each; %.0f verdicts from the judge's cache", mode, n,
				loads.Count-loadsBefore.Count, rounds, (loads.Sum-loadsBefore.Sum)/max(loads.Count-loadsBefore.Count, 1)*1000, loads.Value-loadsBefore.Value)
			rss := operatorRSS(t)
			goroutines, err := operatorMetric(t, "go_goroutines", nil)
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			perThousand := mib(heapAfter.HeapAlloc-heapBefore.HeapAlloc) / float64(n) * 1000
			transport := "mutual TLS"
			if certDir == "" {
				transport = "plaintext"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %s | %d | %.0f ms | %.1f | %.0f | %.0f / %.0f, %.0f | %s |", mode, transport, n, ms(setup),
				ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(all[len(all)/2]), bytes/int64(rounds*n), cpuPerPush*1000, perThousand,
				mib(rss.Current), mib(heapAfter.HeapInuse), mib(heapAfter.StackInuse), goroutines.Value, strings.Join(stages, " | ")))
			t.Log(rows[len(rows)-1])
			acks.stop()
		}
	}
	Record(t, "xds", strings.Join(rows, "\n")+"\n")
}

// envoyLoads reads the operator's real Envoy loads (envoy --mode validate):
// their count and sum of durations, and, as Value, the verdicts its judge
// took from its cache instead.
func envoyLoads(t *testing.T) measure.Series {
	t.Helper()
	fams := operatorMetrics(t)
	loads, err := measure.Sum(fams, "kube_envoy_controller_envoy_validation_duration_seconds", nil)
	if err != nil && !errors.Is(err, measure.ErrNoFamily) { // no family: no Envoy has loaded anything yet
		t.Fatal(err)
	}
	hits, err := measure.Sum(fams, "kube_envoy_controller_envoy_validation_cache_hits_total", nil)
	if err != nil {
		t.Fatal(err)
	}
	loads.Value = hits.Value
	return loads
}

// pushStageMetric is the operator's histogram of the wall time of each
// stage of a push, and pushStageNames its stages, in a push's order.
const pushStageMetric = "kube_envoy_controller_xds_push_stage_seconds"

var pushStageNames = []string{"queue", "read", "translate", "judge", "reports", "record", "serve", "status", "fanout"}

// pushStages reads the operator's observations of each stage of a push.
// A stage not observed yet has none; the histogram itself must be there.
func pushStages(t *testing.T) map[string]measure.Series {
	t.Helper()
	fams := operatorMetrics(t)
	out := map[string]measure.Series{}
	for _, stage := range pushStageNames {
		s, err := measure.Sum(fams, pushStageMetric, map[string]string{"stage": stage})
		if err != nil {
			t.Fatalf("the operator's push stages: %v", err)
		}
		out[stage] = s
	}
	return out
}

// waitPushStages waits until each stage of a push has been observed pushes
// times since before or, for a stage that is not, until no more
// observations come, and returns each stage's mean wall time per push since
// before: "12.3 ms", with the number of pushes observed when it is not
// pushes ("—" for none).
func waitPushStages(t *testing.T, before map[string]measure.Series, pushes int) []string {
	t.Helper()
	var after map[string]measure.Series
	short := func() bool {
		after = pushStages(t)
		for _, stage := range pushStageNames {
			if after[stage].Count-before[stage].Count < float64(pushes) {
				return true
			}
		}
		return false
	}
	if short() {
		// A stage that some push does not observe (a queue whose write came
		// before the previous reconcile started) stays short for good.
		testenv.Steady(t, time.Second, time.Minute, "the push stages' observations", func() (string, error) {
			short()
			var counts []string
			for _, stage := range pushStageNames {
				counts = append(counts, strconv.FormatFloat(after[stage].Count, 'f', 0, 64))
			}
			return strings.Join(counts, ","), nil
		})
	}
	out := make([]string, 0, len(pushStageNames))
	for _, stage := range pushStageNames {
		n, sum := after[stage].Count-before[stage].Count, after[stage].Sum-before[stage].Sum
		switch {
		case n == 0:
			out = append(out, "—")
		case n == float64(pushes):
			out = append(out, fmt.Sprintf("%.1f ms", sum/n*1000))
		default:
			out = append(out, fmt.Sprintf("%.1f ms (%.0f pushes)", sum/n*1000, n))
		}
	}
	return out
}

// saveProfiles writes the operator's heap profile, taken right after a
// GC, and its goroutines grouped by stack into the results directory, as
// name.heap.pprof and name.goroutines.txt: what a row's memory is made of
// (`go tool pprof -sample_index=inuse_space -top name.heap.pprof`). A
// smoke run, which records nothing, saves none.
func saveProfiles(t *testing.T, name string) {
	t.Helper()
	dir, addr := os.Getenv("BENCH_OUT"), os.Getenv("OPERATOR_PPROF_ADDR")
	if dir == "" || Smoke() {
		return
	}
	for file, path := range map[string]string{name + ".heap.pprof": "heap?gc=1", name + ".goroutines.txt": "goroutine?debug=1"} {
		if err := os.WriteFile(filepath.Join(dir, file), httpGet(t, "http://"+addr+"/debug/pprof/"+path), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// xdsAddr is the operator's xDS address.
func xdsAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("OPERATOR_XDS_ADDR")
	if addr == "" {
		t.Fatal("OPERATOR_XDS_ADDR is not set: run through hack/bench.sh (make bench)")
	}
	return addr
}

// connectedMetric is the xDS server's gauge of connected proxies, by fleet.
const connectedMetric = "kube_envoy_controller_xds_connected_proxies"

// waitConnected waits until the operator's xDS server counts n connected
// proxies: of fleet, or of every fleet when fleet is "". Before any proxy
// connected the gauge has no series at all, which counts as 0 for every fleet
// but not for a named one.
func waitConnected(t *testing.T, fleet string, n int) {
	t.Helper()
	var labels map[string]string
	if fleet != "" {
		labels = map[string]string{"fleet": fleet}
	}
	testenv.Poll(t, 200*time.Millisecond, 2*time.Minute, fmt.Sprintf("the operator's %s%v to be %d", connectedMetric, labels, n), func() (bool, error) {
		s, err := operatorMetric(t, connectedMetric, labels)
		switch {
		case errors.Is(err, measure.ErrNoFamily) && fleet == "":
			s = measure.Series{}
		case err != nil:
			return false, err
		case fleet != "" && s.Matched == 0:
			return false, errors.New("no series for the fleet")
		}
		return int(s.Value) == n, fmt.Errorf("%.0f connected", s.Value)
	})
}

type ack struct {
	client  int
	version string
	at      time.Time
	bytes   int
}

// loadClients reads the ACK lines of the client process.
type loadClients struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	cond *sync.Cond
	// byVersion[v][client] is that client's ACK of version v.
	byVersion map[string]map[int]ack
	order     []string
	err       error
}

// fleetCertificate waits for the client certificate Secret the operator
// issues to Envoy ns/name, and writes its files into a directory, as the
// kubelet mounts them for the fleet's pods.
func fleetCertificate(t *testing.T, ns, name string) string {
	t.Helper()
	sec := &corev1.Secret{}
	testenv.Poll(t, 200*time.Millisecond, 2*time.Minute, "the fleet's client certificate", func() (bool, error) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-xds-client"}, sec)
		return err == nil && len(sec.Data["tls.crt"]) > 0, err
	})
	dir := t.TempDir()
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, k), sec.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startLoadClients starts the client process: n proxies of fleet, each
// subscribed to the EDS clusters c0..c<clusters-1>. env adds to the
// process's environment (XDS_LOAD_AS=contour: see runLoadClients).
func startLoadClients(t *testing.T, addr, fleet, mode string, n, clusters int, certDir string, env ...string) *loadClients {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), loadClientsEnv+"=1", "XDS_LOAD_ADDR="+addr, "XDS_LOAD_FLEET="+fleet,
		"XDS_LOAD_MODE="+mode, "XDS_LOAD_N="+strconv.Itoa(n), "XDS_LOAD_CLUSTERS="+strconv.Itoa(clusters), "XDS_LOAD_CERT_DIR="+certDir,
		"XDS_LOAD_SETUPS="+os.Getenv("BENCH_XDS_SETUPS"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lc := &loadClients{cmd: cmd, byVersion: map[string]map[int]ack{}}
	lc.cond = sync.NewCond(&lc.mu)
	t.Cleanup(lc.stop)
	go lc.read(out)
	return lc
}

func (lc *loadClients) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	var err error
	for sc.Scan() {
		var a ack
		if a, err = parseAck(sc.Text()); err != nil {
			break
		}
		lc.mu.Lock()
		if lc.byVersion[a.version] == nil {
			lc.byVersion[a.version] = map[int]ack{}
			lc.order = append(lc.order, a.version)
		}
		lc.byVersion[a.version][a.client] = a
		lc.cond.Broadcast()
		lc.mu.Unlock()
	}
	if err == nil {
		err = fmt.Errorf("the client process ended (%v)", sc.Err())
	}
	lc.mu.Lock()
	lc.err = err
	lc.cond.Broadcast()
	lc.mu.Unlock()
}

// parseAck parses a line of the client process: "client version unixnano bytes".
func parseAck(line string) (ack, error) {
	f := strings.Fields(line)
	bad := fmt.Errorf("the client process printed %q, want: client version unixnano bytes", line)
	if len(f) != 4 {
		return ack{}, bad
	}
	id, err1 := strconv.Atoi(f[0])
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	b, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return ack{}, bad
	}
	return ack{id, f[1], time.Unix(0, ns), b}, nil
}

// latest returns the newest version some client acknowledged.
func (lc *loadClients) latest() string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if len(lc.order) == 0 {
		return ""
	}
	return lc.order[len(lc.order)-1]
}

// setupWait bounds the connection set-up of a row: on a busy machine
// thousands of handshakes at once time out, and their proxies connect
// again (as Envoys do), which takes minutes.
const setupWait = 10 * time.Minute

// waitAll waits until n clients acknowledged one version other than prev,
// and returns their ACKs.
func (lc *loadClients) waitAll(t *testing.T, n int, prev string) []ack {
	t.Helper()
	return lc.waitAllWithin(t, n, prev, 2*time.Minute)
}

// waitAllWithin is waitAll, waiting at most d.
func (lc *loadClients) waitAllWithin(t *testing.T, n int, prev string, d time.Duration) []ack {
	t.Helper()
	deadline := time.Now().Add(d)
	go func() { time.Sleep(time.Until(deadline)); lc.cond.Broadcast() }()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for {
		// Only versions first seen after prev are new.
		newer := lc.order
		for i, v := range lc.order {
			if v == prev {
				newer = lc.order[i+1:]
			}
		}
		for _, v := range newer {
			if len(lc.byVersion[v]) >= n {
				out := make([]ack, 0, n)
				for _, a := range lc.byVersion[v] {
					out = append(out, a)
				}
				return out
			}
		}
		if lc.err != nil || time.Now().After(deadline) {
			t.Fatalf("not every one of %d proxies acknowledged a new version (%v)", n, lc.err)
		}
		lc.cond.Wait()
	}
}

// allAcked reports whether n clients acknowledged version.
func (lc *loadClients) allAcked(version string, n int) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.byVersion[version]) >= n
}

func (lc *loadClients) stop() {
	if lc.cmd.Process != nil {
		_ = lc.cmd.Process.Kill()
		_ = lc.cmd.Wait()
	}
}

// runLoadClients is the client process: XDS_LOAD_N stand-in proxies
// (test/standin) of fleet XDS_LOAD_FLEET, each subscribed to the EDS
// clusters c0..c<XDS_LOAD_CLUSTERS-1>, that ACK every response and print
// "client version unixnano bytes" for it, the time being when the ACK was
// sent. With XDS_LOAD_AS=contour each proxy is instead an Envoy as Contour
// bootstraps it (contourProxy: every type it serves, each on a stream of its
// own), which prints its EDS ACKs only, the first once it is set up.
func runLoadClients() {
	n, err := measure.Size(os.Getenv("XDS_LOAD_N"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "XDS_LOAD_N:", err)
		os.Exit(1)
	}
	clusters, err := measure.Size(os.Getenv("XDS_LOAD_CLUSTERS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "XDS_LOAD_CLUSTERS:", err)
		os.Exit(1)
	}
	addr, fleet, mode := os.Getenv("XDS_LOAD_ADDR"), os.Getenv("XDS_LOAD_FLEET"), os.Getenv("XDS_LOAD_MODE")
	names := make([]string, clusters)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	var outMu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	report := func(id int, version string, size int, sent time.Time) {
		outMu.Lock()
		fmt.Fprintf(out, "%d %s %d %d\n", id, version, sent.UnixNano(), size)
		out.Flush()
		outMu.Unlock()
	}
	// One connection per stream, as each Envoy opens its own; with
	// BENCH_XDS_STREAMS_PER_CONN, that many streams share a connection (the
	// server allows 100 by default, --xds-max-streams-per-connection).
	perConn := 1
	if v := os.Getenv("BENCH_XDS_STREAMS_PER_CONN"); v != "" {
		if perConn, err = measure.Size(v); err != nil {
			fmt.Fprintln(os.Stderr, "BENCH_XDS_STREAMS_PER_CONN:", err)
			os.Exit(1)
		}
	}
	creds, err := standin.CredentialsFromDir(os.Getenv("XDS_LOAD_CERT_DIR"), "localhost")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var conns []*grpc.ClientConn
	for range (n + perConn - 1) / perConn {
		// A stream waits for its connection, which gRPC makes again, with
		// backoff, when it fails, as an Envoy does: on a busy machine some
		// of thousands of handshakes at once time out.
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conns = append(conns, c)
	}
	run := standin.SotW
	if mode == "delta" {
		run = standin.Delta
	}
	subs := []standin.Subscription{{TypeURL: resourcev3.EndpointType, Names: names}}
	// XDS_LOAD_AS=contour: each proxy is an Envoy as Contour bootstraps it
	// (contourProxy), on its own connection, reporting its EDS ACKs.
	asContour := os.Getenv("XDS_LOAD_AS") == "contour"
	nodeOnce := os.Getenv("XDS_LOAD_NODE") == "first"
	// At most setupsAtOnce proxies set up at once (XDS_LOAD_SETUPS, 0 for
	// no bound): each holds a place from its start to its first response.
	// Thousands of TLS handshakes at once on a busy machine outlast the
	// handshake timeouts of both sides, and then come again at once.
	var places chan struct{}
	if v := os.Getenv("XDS_LOAD_SETUPS"); v != "" && v != "0" {
		k, err := measure.Size(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "XDS_LOAD_SETUPS:", err)
			os.Exit(1)
		}
		places = make(chan struct{}, k)
	}
	for i := range n {
		node := &corev3.Node{Id: fmt.Sprintf("load-%d", i), Cluster: fleet}
		if asContour {
			// Contour's Envoys run with --service-cluster set to Contour's
			// namespace and --service-node to the pod's name.
			node = envoyNode(fmt.Sprintf("envoy-%d", i), "projectcontour")
		}
		c := discoveryv3.NewAggregatedDiscoveryServiceClient(conns[i%len(conns)])
		var once sync.Once
		release := func() {}
		if places != nil {
			places <- struct{}{}
			release = func() { once.Do(func() { <-places }) }
		}
		// A stream that ends is opened again, as an Envoy does, after a
		// pause: the server closes a connection whose keepalive pings go
		// unanswered, which a client process of 10,000 proxies on a busy
		// machine may not answer in time.
		go func() {
			for {
				var err error
				if asContour {
					err = runContourProxy(context.Background(), conns[i%len(conns)], node, mode == "delta", nodeOnce, func(v string, size int, sent time.Time) {
						release()
						report(i, v, size, sent)
					})
				} else {
					err = run(context.Background(), c, node, subs, func(_, v string, size int) { release(); report(i, v, size, time.Now()) })
				}
				release()
				fmt.Fprintf(os.Stderr, "client %d: %v; opening the stream again\n", i, err)
				time.Sleep(time.Second)
			}
		}()
	}
	select {}
}

// operatorCPU is the CPU time the operator process has used, in seconds
// (its process_cpu_seconds_total).
func operatorCPU(t *testing.T) float64 {
	t.Helper()
	s, err := operatorMetric(t, "process_cpu_seconds_total", nil)
	if err != nil {
		t.Fatalf("the operator's CPU time: %v", err)
	}
	if s.Matched != 1 {
		t.Fatalf("the operator's CPU time: %d series, want 1", s.Matched)
	}
	return s.Value
}

// twoFleets makes the fleets a and b of ns, of the built-in server and
// without pods, and returns the directories of their client certificates
// ("" with BENCH_XDS_PLAINTEXT=1).
func twoFleets(t *testing.T, ns string) (certA, certB string) {
	t.Helper()
	for _, name := range []string{"a", "b"} {
		if err := k8s.Create(context.Background(), &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](0)}}); err != nil {
			t.Fatal(err)
		}
	}
	if os.Getenv("BENCH_XDS_PLAINTEXT") == "1" {
		return "", ""
	}
	return fleetCertificate(t, ns, "a"), fleetCertificate(t, ns, "b")
}

// pushRounds changes one endpoint of cfg's fleet rounds times, and returns
// the time from each change to each of its proxies' ACK, sorted. *port is
// the next endpoint port to use.
func pushRounds(t *testing.T, cfg *examplev1.EnvoyConfig, acks *loadClients, proxies, rounds int, port *int) []time.Duration {
	t.Helper()
	var lat []time.Duration
	for range rounds {
		prev := acks.latest()
		patch := client.MergeFrom(cfg.DeepCopy())
		cfg.Spec.Resources = xdsResources(*port)
		*port++
		start := time.Now()
		if err := k8s.Patch(context.Background(), cfg, patch); err != nil {
			t.Fatal(err)
		}
		for _, a := range acks.waitAll(t, proxies, prev) {
			lat = append(lat, a.at.Sub(start))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}

// TestXDSNoisyNeighbour measures how much a fleet that churns its endpoints
// delays another fleet's pushes on the same server. Fleet A has
// BENCH_NOISY_CLUSTERS EDS clusters (default 4096), in EnvoyConfigs of
// BENCH_NOISY_CHUNK (default 512), and BENCH_NOISY_PROXIES proxies (default
// 10) subscribed to all of them;
// fleet B is the push-to-ACK benchmark's fleet with BENCH_NOISY_B_PROXIES
// proxies (default 100). Fleet B's push to ACK is measured
// BENCH_XDS_ROUNDS times with A quiet, then as many times while A's
// EnvoyConfigs are patched one after the other without pause, each patch
// moving every endpoint of its clusters, then, once A has settled, with
// A quiet again.
func TestXDSNoisyNeighbour(t *testing.T) {
	addr := xdsAddr(t)
	clustersA := sizeEnv(t, "BENCH_NOISY_CLUSTERS", 4096)
	proxiesA := sizeEnv(t, "BENCH_NOISY_PROXIES", 10)
	proxiesB := sizeEnv(t, "BENCH_NOISY_B_PROXIES", 100)
	rounds := sizeEnv(t, "BENCH_XDS_ROUNDS", 10)
	chunk := sizeEnv(t, "BENCH_NOISY_CHUNK", 512)
	ctx := context.Background()
	ns := "bench-xds-noisy"
	namespace(t, ns)
	certA, certB := twoFleets(t, ns)
	var configsA []*examplev1.EnvoyConfig
	for from := 0; from < clustersA; from += chunk {
		c := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", from/chunk), Namespace: ns},
			Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "a", Resources: clusterRange(from, min(from+chunk, clustersA), 8080, 8080)}}
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		configsA = append(configsA, c)
	}
	cfgB := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "b", Resources: xdsResources(9000)}}
	if err := k8s.Create(ctx, cfgB); err != nil {
		t.Fatal(err)
	}
	acksA := startLoadClients(t, addr, ns+"/a", "sotw", proxiesA, clustersA, certA)
	acksB := startLoadClients(t, addr, ns+"/b", "sotw", proxiesB, xdsClusters, certB)
	acksA.waitAll(t, proxiesA, "")
	acksB.waitAll(t, proxiesB, "")

	port := 9001
	pushB := func() []time.Duration { return pushRounds(t, cfgB, acksB, proxiesB, rounds, &port) }
	quiet := pushB()

	// Churn fleet A until B's rounds are done.
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		n := 0
		defer func() { churned <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := configsA[i%len(configsA)]
			from := (i % len(configsA)) * chunk
			patch := client.MergeFrom(c.DeepCopy())
			c.Spec.Resources = clusterRange(from, min(from+chunk, clustersA), 8081+i, 8081+i)
			if err := k8s.Patch(ctx, c, patch); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	pushesA := func() float64 {
		s, err := operatorMetric(t, "kube_envoy_controller_xds_pushes_total", map[string]string{"fleet": ns + "/a"})
		if err != nil {
			t.Fatal(err)
		}
		return s.Value
	}
	before, started := pushesA(), time.Now()
	busy := pushB()
	// The churn goes on until fleet A has published at least once: a churn
	// that never reached the server would measure nothing.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return pushesA() > before, nil
	})
	close(stop)
	patches := <-churned
	churnSeconds := time.Since(started).Seconds()
	published := pushesA() - before
	if err != nil {
		t.Fatalf("fleet A published nothing while it was patched %d times: the churn did not reach the server", patches)
	}
	// Fleet A's last patches may still be in the works: B's quiet rounds
	// wait until A's proxies all have its newest version and A publishes
	// no more.
	var last float64
	testenv.Poll(t, time.Second, 2*time.Minute, "fleet A to settle after its churn", func() (bool, error) {
		now := pushesA()
		settled := now == last && acksA.allAcked(acksA.latest(), proxiesA)
		last = now
		return settled, nil
	})
	quiet = append(quiet, pushB()...)
	sort.Slice(quiet, func(i, j int) bool { return quiet[i] < quiet[j] })

	p := func(l []time.Duration, q int) time.Duration { return l[len(l)*q/100] }
	row := fmt.Sprintf("| %d clusters, %d proxies | %d proxies | %s | %s | %s | %s | %+.1f ms | %+.1f ms | %.1f patches/s, %.1f publications/s |",
		clustersA, proxiesA, proxiesB, ms(p(quiet, 50)), ms(p(quiet, 99)), ms(p(busy, 50)), ms(p(busy, 99)),
		float64((p(busy, 50)-p(quiet, 50)).Microseconds())/1000, float64((p(busy, 99)-p(quiet, 99)).Microseconds())/1000,
		float64(patches)/churnSeconds, published/churnSeconds)
	Record(t, "xds-noisy", strings.Join([]string{
		"| fleet A (churning) | fleet B | B push to ACK p50, A quiet | p99, A quiet | B p50, A churning | p99, A churning | delay p50 | delay p99 | A's churn |",
		"|---|---|---|---|---|---|---|---|---|",
		row,
	}, "\n")+"\n")
}
