package envoyconfig

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
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
	mgr := suite.Manager
	r := NewReporter(mgr.GetClient(), mgr.GetAPIReader(), operatorNamespace, "replica-paced", "")
	r.Interval = time.Hour
	waits := make(chan time.Duration, 1)
	release := make(chan time.Time)
	r.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		return release
	}
	// The xDS server's notify function is the reporter's.
	srv := xds.NewServer("127.0.0.1:0", logr.Discard(), r.Notify)
	r.Server = srv
	if err := srv.SetFleet(ctx, fleet, "v1", nil); err != nil {
		t.Fatal(err)
	}

	stopped := make(chan struct{})
	go func() { _ = r.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	name := publish.ReportName("replica-paced")
	report := func() publish.Report {
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, cm); err != nil {
			return nil
		}
		rep, err := publish.ReportFromConfigMap(cm)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	testenv.Eventually(t, "the report written at start", func() (bool, error) { return report() != nil, nil })
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
	if got := report()[fleet].Connected; got != 0 {
		t.Fatalf("before the interval passed, the report says %d proxies are connected", got)
	}
	release <- time.Now()
	testenv.Eventually(t, "the report to count every proxy", func() (bool, error) { return report()[fleet].Connected == proxies, nil })
	if w := suite.Counter.WritesTo("/namespaces/" + operatorNamespace + "/configmaps/" + name); len(w) != 1 {
		t.Errorf("the report was written %d times after the start, want once, after the wait: %v", len(w), w)
	}
}
