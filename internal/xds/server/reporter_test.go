package server

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// However many proxies connect while the report waits for its interval to
// pass, one write carries them all: after the report written when the
// replica starts, it is written once more, when the wait ends, with every
// change since.
func TestReportWritesArePaced(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := suite.Namespace(t)
	fleet := ns + "/paced"
	// The reporter reports a server's proxies.
	srv := New("127.0.0.1:0", logr.Discard())
	r := NewReporter(suite.Manager, srv, operatorNamespace, "replica-paced", "")
	r.Interval = time.Hour
	waits := make(chan time.Duration, 1)
	release := make(chan time.Time)
	r.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		return release
	}
	if err := srv.SetFleet(ctx, fleet, "v1", nil); err != nil {
		t.Fatal(err)
	}

	stopped := make(chan struct{})
	go func() { _ = r.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	name := report.ShardName("replica-paced", 0)
	written := func() report.Report {
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, cm); err != nil {
			return nil
		}
		rep, err := report.Read(cm)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	testenv.Eventually(t, "the report written at start", func() (bool, error) { return written() != nil, nil })
	suite.Counter.Reset()

	const proxies = 20
	tr := srv.Tracker()
	for id := range int64(proxies) {
		_ = tr.OnStreamOpen(ctx, id, "")
		_ = tr.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprint("p", id), Cluster: fleet}, TypeUrl: resourcev3.ClusterType})
	}
	select {
	case d := <-waits:
		if d <= 0 || d > time.Hour {
			t.Fatalf("the reporter waits %v, want at most its interval", d)
		}
	case <-time.After(testenv.Timeout):
		t.Fatal("the reporter never waited for its interval to pass")
	}
	if got := written()[fleet].Connected; got != 0 {
		t.Fatalf("before the interval passed, the report says %d proxies are connected", got)
	}
	release <- time.Now()
	testenv.Eventually(t, "the report to count every proxy", func() (bool, error) { return written()[fleet].Connected == proxies, nil })
	if w := suite.Counter.WritesTo("/namespaces/" + operatorNamespace + "/configmaps/" + name); len(w) != 1 {
		t.Errorf("the report was written %d times after the start, want once, after the wait: %v", len(w), w)
	}
}

// stubProxies are a Reporter's Proxies that report what report returns.
type stubProxies struct {
	report  func() report.Report
	changed chan struct{}
}

func (p stubProxies) ProxyReport() report.Report      { return p.report() }
func (p stubProxies) ProxiesChanged() <-chan struct{} { return p.changed }

// change signals that the report may have changed, as a Server does.
func (p stubProxies) change() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// reportOf is stubProxies that always report rep.
func reportOf(rep report.Report) stubProxies {
	return stubProxies{report: func() report.Report { return rep }, changed: make(chan struct{}, 1)}
}

// readReports reads every replica's report, as the leader does.
func readReports(t *testing.T) []report.Report {
	t.Helper()
	var list corev1.ConfigMapList
	if err := suite.Client.List(context.Background(), &list, client.InNamespace(operatorNamespace),
		client.MatchingLabels{names.ComponentLabel: report.Component}); err != nil {
		t.Fatal(err)
	}
	out := make([]report.Report, 0, len(list.Items))
	for i := range list.Items {
		rep, err := report.Read(&list.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rep)
	}
	return out
}

// shards returns the ConfigMaps of replica's report, by name.
func shards(t *testing.T, replica string) map[string]*corev1.ConfigMap {
	t.Helper()
	var list corev1.ConfigMapList
	if err := suite.Client.List(context.Background(), &list, client.InNamespace(operatorNamespace),
		client.MatchingLabels{names.ComponentLabel: report.Component}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		if cm := &list.Items[i]; cm.Annotations[report.ReplicaAnnotation] == replica {
			out[cm.Name] = cm
		}
	}
	return out
}

// manyFleets is the report of n fleets whose names are as long as they may
// be, every tenth with its proxies rejecting a version, error_detail and the
// proxy's node id at their longest.
func manyFleets(n int) report.Report {
	r := report.Report{}
	for i := range n {
		id := fmt.Sprintf("%s-%05d/%s", strings.Repeat("n", 57), i, strings.Repeat("e", 253))
		f := report.FleetProxies{Version: "0123456789abcdef", Connected: 2, Acked: 2}
		if i%10 == 0 {
			f.Acked, f.Nacked, f.LastNACK = 0, 2, strings.Repeat("x", publish.MaxDetail)
			f.LastNACKType, f.LastNACKNode = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", strings.Repeat("p", maxNodeID)
		}
		r[id] = f
	}
	return r
}

// A replica that serves proxies of 10,000 fleets with the longest names
// reports them all, in shards that each fit a ConfigMap, and the leader
// reads every fleet's count back. A change of one fleet rewrites one shard,
// once the interval has passed; a report that did not change is not written.
func TestReportOf10000Fleets(t *testing.T) {
	const replica = "replica-10000"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		latest = manyFleets(10_000)
		calls  atomic.Int64
	)
	proxies := stubProxies{changed: make(chan struct{}, 1), report: func() report.Report {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(latest)
	}}
	r := NewReporter(suite.Manager, proxies, operatorNamespace, replica, "")
	r.Interval = time.Hour
	waits := make(chan time.Duration, 1)
	release := make(chan time.Time)
	r.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		return release
	}
	stopped := make(chan struct{})
	go func() { _ = r.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	// The leader reads every fleet's count from the shards.
	counted := func(reports []report.Report, id string, want report.FleetProxies) bool {
		return report.Sum(reports, id, want.Version) == publish.Acks{Connected: want.Connected, Acked: want.Acked, Nacked: want.Nacked,
			LastNACK: want.LastNACK, LastNACKType: want.LastNACKType, LastNACKNode: want.LastNACKNode}
	}
	testenv.Eventually(t, "the leader to read every fleet's count", func() (bool, error) {
		reports := readReports(t)
		for id, f := range latest {
			if !counted(reports, id, f) {
				return false, fmt.Errorf("fleet %.20s…: %+v", id, report.Sum(reports, id, f.Version))
			}
		}
		return true, nil
	})
	written := shards(t, replica)
	total := 0
	for name, cm := range written {
		n := len(cm.Data["proxies.json"])
		total += n
		if n > report.ShardBytes || report.ShardCount(cm) != len(written) {
			t.Errorf("shard %s holds %d bytes, says it is one of %d, of %d", name, n, report.ShardCount(cm), len(written))
		}
	}
	t.Logf("10,000 fleets: %d shards, %d KiB, %d bytes a fleet", len(written), total>>10, total/10_000)

	// One fleet changes: once the interval has passed, its shard alone is written.
	suite.Counter.Reset()
	var changed string
	mu.Lock()
	for id, f := range latest {
		changed = id
		f.Acked, f.Nacked, f.LastNACK = 1, 1, "changed"
		latest[id] = f
		break
	}
	want := latest[changed]
	mu.Unlock()
	proxies.change()
	select {
	case <-waits:
	case <-time.After(testenv.Timeout):
		t.Fatal("the reporter never waited for its interval to pass")
	}
	release <- time.Now()
	testenv.Eventually(t, "the leader to read the change", func() (bool, error) { return counted(readReports(t), changed, want), nil })
	shard := report.ShardName(replica, report.ShardOf(changed, len(written)))
	if w := suite.Counter.WritesTo("/configmaps/" + report.Name(replica)); len(w) != 1 || !strings.HasSuffix(w[0], "/"+shard) {
		t.Errorf("the change wrote %v, want one write of %s", w, shard)
	}

	// Nothing changes: nothing is written. A report read after a signal
	// shows the loop is past the one before.
	suite.Counter.Reset()
	for range 2 {
		n := calls.Load()
		proxies.change()
		testenv.Eventually(t, "the reporter to look again", func() (bool, error) { return calls.Load() > n, nil })
	}
	if w := suite.Counter.WritesTo("/configmaps/" + report.Name(replica)); len(w) != 0 {
		t.Errorf("an unchanged report was written: %v", w)
	}
}

// A report the API server refuses is a Warning event, on the replica's pod
// or, running outside one, on its first shard; the write is retried, and
// succeeds once allowed.
func TestReportFailureIsAnEvent(t *testing.T) {
	const replica = "replica-refused"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lift := suite.RefuseCreates(t, testenv.ConfigMapProbe(operatorNamespace), "no ConfigMaps here")
	r := NewReporter(suite.Manager, reportOf(report.Report{"ns/edge": {Version: "v1", Connected: 1}}), operatorNamespace, replica, "")
	stopped := make(chan struct{})
	go func() { _ = r.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	suite.WaitEvent(t, operatorNamespace, report.ShardName(replica, 0), "Warning "+ReasonReportFailed+" writing the report of this replica's xDS proxies")
	lift()
	testenv.Eventually(t, "the report written once allowed", func() (bool, error) { return len(shards(t, replica)) == 1, nil })
}

// A shard that someone else deletes or edits is written again, as it was.
func TestTamperedReportIsWrittenAgain(t *testing.T) {
	const replica = "replica-tampered"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := report.Report{"ns/edge": {Version: "v1", Connected: 1, Acked: 1}}
	r := NewReporter(suite.Manager, reportOf(want), operatorNamespace, replica, "")
	stopped := make(chan struct{})
	go func() { _ = r.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	name := report.ShardName(replica, 0)
	intact := func() (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, cm); err != nil {
			return false, err
		}
		got, err := report.Read(cm)
		return err == nil && maps.EqualFunc(got, want, report.FleetProxies.Equal), err
	}
	testenv.Eventually(t, "the report written", intact)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"proxies.json":"edited"}}`))
	if err := suite.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: name}}, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the edited report written again", intact)

	if err := suite.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: name}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted report written again", intact)
}
