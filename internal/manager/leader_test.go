package manager_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// replica is one replica of the operator with leader election: the
// production manager running the EnvoyConfig controller and its xDS server,
// wired as the binary wires them. Writes counts its manager's write requests.
type replica struct {
	Manager ctrl.Manager
	XDS     *xds.Server
	Writes  *testenv.RequestCounter
	stop    func()
}

// startReplica starts a replica that competes for the Lease in leaseNS. It
// is stopped when the test ends, unless Stop stopped it first.
func startReplica(t *testing.T, leaseNS string) *replica {
	t.Helper()
	r := &replica{Writes: &testenv.RequestCounter{}}
	var err error
	r.Manager, err = manager.New(r.Writes.Wrap(suite.Manager.GetConfig()), manager.Options{
		MetricsAddr: "0", LeaderElect: true, LeaderElectionNamespace: leaseNS,
		PanicOnReconcilePanic: true, SkipControllerNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	notify, events := envoyconfig.ProxyEvents()
	r.XDS = xds.NewServer("127.0.0.1:0", logr.Discard(), notify)
	if err := r.Manager.Add(r.XDS); err != nil {
		t.Fatal(err)
	}
	if _, err := controller.Setup(r.Manager, []string{envoyconfig.ControllerName}, controller.Options{XDS: r.XDS, ProxyEvents: events}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Manager.Start(ctx) }()
	r.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica: %v", err)
		}
	})
	t.Cleanup(r.stop)
	return r
}

// Stop stops the replica; a leader releases the Lease as it goes.
func (r *replica) Stop() { r.stop() }

// IsLeader reports whether the replica has been elected.
func (r *replica) IsLeader() bool {
	select {
	case <-r.Manager.Elected():
		return true
	default:
		return false
	}
}

// waitLeader waits until r is elected.
func waitLeader(t *testing.T, r *replica) {
	t.Helper()
	testenv.Eventually(t, "a replica to be elected", func() (bool, error) { return r.IsLeader(), nil })
}

// xdsAddr returns the replica's xDS server address, once it listens.
func (r *replica) xdsAddr(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	addr, err := r.XDS.Addr(ctx)
	if err != nil {
		t.Fatalf("the xDS server does not listen: %v", err)
	}
	return addr.String()
}

// statusWrites returns the EnvoyConfig status writes r sent.
func (r *replica) statusWrites() []string { return r.Writes.WritesTo("/envoyconfigs/") }

// Two replicas against one API server: the leader alone writes EnvoyConfig
// status, with the counts of the proxies connected to it; every replica
// serves the fleets' configuration over xDS. When the leader stops, the other
// replica takes over the status.
func TestLeaderWritesStatusEveryReplicaServesXDS(t *testing.T) {
	ctx := context.Background()
	leaseNS := suite.Namespace(t)
	leader := startReplica(t, leaseNS)
	waitLeader(t, leader)
	follower := startReplica(t, leaseNS)

	ns := suite.Namespace(t)
	envoy := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}}
	cfg := &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{{Raw: []byte(
			`{"name": "backend", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`)}}}},
	}
	for _, obj := range []client.Object{envoy, cfg} {
		if err := suite.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	fleetID := fleet.Of(envoy).String()

	// Both replicas publish the fleet's configuration; a proxy connected
	// to the follower gets it.
	var version string
	testenv.Eventually(t, "both replicas to publish the fleet", func() (bool, error) {
		version = leader.XDS.Version(fleetID)
		_, hasCluster := leader.XDS.Resources(fleetID)[resourcev3.ClusterType]
		return hasCluster && version == follower.XDS.Version(fleetID), nil
	})
	if follower.IsLeader() {
		t.Fatal("both replicas are leaders")
	}
	p := xdstest.Connect(t, xdstest.Dial(t, follower.xdsAddr(t)), fleetID, "pod-1", resourcev3.ClusterType)
	resp, err := p.Next("")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResources()) != 1 || resp.GetVersionInfo() != version {
		t.Fatalf("a proxy of the follower got version %q with %d resources, want %q with the cluster", resp.GetVersionInfo(), len(resp.GetResources()), version)
	}
	c := &clusterv3.Cluster{}
	if err := resp.GetResources()[0].UnmarshalTo(c); err != nil || c.GetName() != "backend" {
		t.Fatalf("a proxy of the follower got %v (%v), want cluster backend", c, err)
	}
	testenv.Eventually(t, "the follower to record the proxy's ACK", func() (bool, error) {
		return follower.XDS.Tracker().Counts(fleetID, version).Acked == 1, nil
	})

	// The status is the leader's: its xDS server has no proxy.
	testenv.WaitSettled(t, suite.Client, cfg, func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == version && c.Status.Proxies.Connected == 0
	})
	if len(leader.statusWrites()) == 0 {
		t.Error("the leader wrote no status")
	}
	// The follower, woken by its proxy's ACK, writes nothing.
	for deadline := time.Now().Add(testenv.SettledWindow); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if w := follower.Writes.WritesTo("/namespaces/" + ns + "/"); len(w) != 0 {
			t.Fatalf("the follower sent write requests: %v", w)
		}
	}

	// The leader goes; the follower is elected and reports its own proxy.
	leader.Stop()
	waitLeader(t, follower)
	testenv.WaitSettled(t, suite.Client, cfg, func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == version && c.Status.Proxies.Connected == 1 && c.Status.Proxies.Acked == 1
	})
	if w := follower.statusWrites(); !slices.Contains(w, "PUT /apis/example.com/v1/namespaces/"+ns+"/envoyconfigs/web/status") {
		t.Errorf("the new leader's writes %v hold no status update", w)
	}
}
