package manager_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// replica is one replica of the operator with leader election: the
// production manager running the EnvoyConfig controller and its xDS server,
// wired as the binary wires them. Writes counts its manager's write requests.
type replica struct {
	Manager ctrl.Manager
	XDS     *server.Server
	CA      *authority.Store
	Writes  *testenv.RequestCounter
	stop    func()
}

// startReplica starts the replica named name, which competes for the Lease
// in leaseNS, the operator's namespace, where it reports its proxies. It is
// stopped when the test ends, unless Stop stopped it first.
func startReplica(t *testing.T, leaseNS, name string) *replica {
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
	r.CA, err = authority.Add(r.Manager, authority.Config{Namespace: leaseNS, Options: pki.DefaultOptions, Hosts: []string{"localhost", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	r.XDS, err = server.Add(r.Manager, server.Options{BindAddress: "127.0.0.1:0", Namespace: leaseNS, Replica: name, Authority: r.CA})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.Setup(r.Manager, []string{envoyconfig.ControllerName}, controller.Options{XDS: r.XDS, Namespace: leaseNS, Authority: r.CA}); err != nil {
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

// dial connects to the replica's xDS server as a proxy of fleetID: over
// mutual TLS, with the fleet's certificate from the CA the leader made.
func (r *replica) dial(t *testing.T, fleetID string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	id, err := fleet.Parse(fleetID)
	if err != nil {
		t.Fatal(err)
	}
	return xdstest.DialFleet(t, r.xdsAddr(t), r.CA, id.Namespace, id.Name, pki.DefaultOptions)
}

// statusWrites returns the EnvoyConfig status writes r sent.
func (r *replica) statusWrites() []string { return r.Writes.WritesTo("/envoyconfigs/") }

// Two replicas against one API server, with the fleet's proxies split
// between them. Every replica serves the one revision the leader recorded;
// the status counts the proxies of both; a rollback is decided and reported
// once, and survives a failover and a restart; the follower writes nothing
// but its own report.
func TestReplicasServeTheRecordedRevision(t *testing.T) {
	ctx := context.Background()
	leaseNS := suite.Namespace(t)
	leader := startReplica(t, leaseNS, "replica-a")
	waitLeader(t, leader)
	follower := startReplica(t, leaseNS, "replica-b")

	ns := suite.Namespace(t)
	envoy := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}}
	cfg := &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{cluster("backend")}}},
	}
	for _, obj := range []client.Object{envoy, cfg} {
		if err := suite.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	fleetID := fleet.Of(envoy).String()

	// Both replicas serve the recorded revision.
	var version string
	testenv.Eventually(t, "both replicas to serve the fleet", func() (bool, error) {
		version = leader.XDS.Version(fleetID)
		_, hasCluster := leader.XDS.Resources(fleetID)[resourcev3.ClusterType]
		return hasCluster && version == follower.XDS.Version(fleetID), nil
	})
	if follower.IsLeader() {
		t.Fatal("both replicas are leaders")
	}
	proxies := []*xdstest.Proxy{
		xdstest.Connect(t, follower.dial(t, fleetID), fleetID, "pod-1", resourcev3.ClusterType),
		xdstest.Connect(t, leader.dial(t, fleetID), fleetID, "pod-2", resourcev3.ClusterType),
	}
	for _, p := range proxies {
		if names := clusterNames(t, p, ""); !slices.Equal(names, []string{"backend"}) {
			t.Fatalf("a proxy got clusters %v, want backend", names)
		}
	}
	// The status counts the proxies of both replicas.
	testenv.WaitSettled(t, suite.Client, cfg, func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == version && c.Status.Proxies.Connected == 2 && c.Status.Proxies.Acked == 2
	})
	if len(leader.statusWrites()) == 0 {
		t.Error("the leader wrote no status")
	}
	// The follower, woken by its proxy's ACK, writes nothing in the fleet's namespace.
	testenv.Consistently(t, testenv.SettledWindow, func() error {
		if w := follower.Writes.WritesTo("/namespaces/" + ns + "/"); len(w) != 0 {
			return fmt.Errorf("the follower sent write requests: %v", w)
		}
		return nil
	})

	// Every proxy, on either replica, rejects the next version: the leader
	// rolls back once, the change is withheld, and both replicas serve the
	// accepted version again.
	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster("extra"))
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies {
		if names := clusterNames(t, p, "cluster extra: unsupported here"); len(names) != 2 {
			t.Fatalf("a proxy got clusters %v, want the new version's two", names)
		}
	}
	testenv.WaitSettled(t, suite.Client, cfg, func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == version && conditions.Reason(c.Status.Conditions, examplev1.EnvoyConfigConditionDegraded) == examplev1.EnvoyConfigReasonWithheld
	})
	testenv.Eventually(t, "both replicas to serve the accepted version again", func() (bool, error) {
		return leader.XDS.Version(fleetID) == version && follower.XDS.Version(fleetID) == version, nil
	})
	for _, p := range proxies {
		if names := clusterNames(t, p, ""); !slices.Equal(names, []string{"backend"}) {
			t.Errorf("after the rollback a proxy got clusters %v", names)
		}
	}
	// The event follows the status, asynchronously.
	suite.WaitEvent(t, ns, envoy.Name, "Warning RolledBack")
	if n := countEvents(t, ns, envoy.Name, "Warning RolledBack"); n != 1 {
		t.Errorf("the rollback was reported %d times on the Envoy, want once", n)
	}

	// The leader goes: the follower takes over and keeps the rollback and
	// the withheld change; the status counts the proxy left.
	leader.Stop()
	waitLeader(t, follower)
	testenv.WaitSettled(t, suite.Client, cfg, func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == version && c.Status.Proxies.Connected == 1 &&
			conditions.Reason(c.Status.Conditions, examplev1.EnvoyConfigConditionDegraded) == examplev1.EnvoyConfigReasonWithheld
	})
	if w := follower.statusWrites(); !slices.Contains(w, "PUT /apis/example.com/v1/namespaces/"+ns+"/envoyconfigs/web/status") {
		t.Errorf("the new leader's writes %v hold no status update", w)
	}
	// The old leader restarts: from the recorded history it serves the
	// accepted version, never the rejected one.
	restarted := startReplica(t, leaseNS, "replica-a")
	testenv.Eventually(t, "the restarted replica to serve the fleet", func() (bool, error) {
		return restarted.XDS.Version(fleetID) != "", nil
	})
	if got := restarted.XDS.Version(fleetID); got != version {
		t.Errorf("the restarted replica serves %s, want the accepted %s", got, version)
	}
	p := xdstest.Connect(t, restarted.dial(t, fleetID), fleetID, "pod-3", resourcev3.ClusterType)
	if names := clusterNames(t, p, ""); !slices.Equal(names, []string{"backend"}) {
		t.Errorf("a proxy of the restarted replica got clusters %v", names)
	}
	if n := countEvents(t, ns, envoy.Name, "Warning RolledBack"); n != 1 {
		t.Errorf("after the failover the rollback was reported %d times, want once", n)
	}
}

func cluster(name string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(`{"name": "` + name + `", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`)}
}

// clusterNames answers a proxy's next response, and returns its clusters.
func clusterNames(t *testing.T, p *xdstest.Proxy, nack string) []string {
	t.Helper()
	_, names, err := p.NextNames(nack)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func countEvents(t *testing.T, ns, name, prefix string) int {
	t.Helper()
	events, err := suite.Events(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}
