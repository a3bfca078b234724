package envoyconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// leaderPaused, while set, makes the suite's replica a follower: it serves
// what is recorded, and decides and writes nothing (see TestMain).
var leaderPaused atomic.Bool

// pauseLeader makes the suite's replica a follower until the returned
// function, which also runs when the test ends, makes it the leader again.
func pauseLeader(t *testing.T) (resume func()) {
	t.Helper()
	leaderPaused.Store(true)
	resume = func() { leaderPaused.Store(false) }
	t.Cleanup(resume)
	return resume
}

// adminConfig is the API server's admin configuration, without the
// counting of the manager's requests.
func adminConfig() *rest.Config {
	cfg := rest.CopyConfig(suite.Manager.GetConfig())
	cfg.WrapTransport = nil
	return cfg
}

// tenantClient returns a client that acts as the ServiceAccount "tenant" of
// ns, which may do anything with ConfigMaps in ns, and nothing else: the
// rights the default edit role gives on ConfigMaps.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-configmaps", Namespace: ns},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tenant", Namespace: ns}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"},
		},
	} {
		create(t, obj)
	}
	cfg := adminConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":tenant"}
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC takes effect once the API server's informers have the binding.
	testenv.Eventually(t, "the tenant to be allowed ConfigMaps", func() (bool, error) {
		err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
		return err == nil, err
	})
	return c
}

// gzipJSON is v as JSON, gzipped, as the previous release stored a history.
func gzipJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// forgedHistory is a ConfigMap in the fleet's namespace that claims to be
// the fleet's revision history, in the form the previous release kept it:
// its served version is the real one, its content the attacker's cluster.
func forgedHistory(t *testing.T, ns, name, version string) *corev1.ConfigMap {
	t.Helper()
	forged := map[string]any{
		"current": version,
		"revisions": []any{map[string]any{
			"version": version, "acked": true,
			"configs": []any{map[string]any{
				"name": ns + "/clusters", "created": "2020-01-01T00:00:00Z",
				"spec": map[string]any{"envoyRef": "edge", "resources": map[string]any{"clusters": []any{json.RawMessage(cluster("attacker", "1s").Raw)}}},
			}},
		}},
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "kube-envoy-controller", "app.kubernetes.io/component": "xds-revisions"},
			Annotations: map[string]string{"kube-envoy-controller.io/fleet": "edge", "kube-envoy-controller.io/xds-version": version},
		},
		BinaryData: map[string][]byte{"history.json.gz": gzipJSON(t, forged)},
	}
}

// A ServiceAccount that may write ConfigMaps in the fleet's namespace, as
// the default edit role may, forges the fleet's revision history: where the
// previous release kept it, and as a copy of the history as it is kept now.
// It cannot write the operator's namespace, and what it wrote changes
// nothing that is served: neither the version, nor the content, nor the
// status. The leader, which found the fleet's history recorded, does not
// look in the old place again (the legacy history is taken over once): the
// forgery there is not adopted, and stays the tenant's.
func TestForgedHistoryChangesNothing(t *testing.T) {
	ctx := context.Background()
	ns, fleetID, cfg, version := ackedFleet(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}

	tenant := tenantClient(t, ns)
	// Not in the operator's namespace.
	read := &corev1.ConfigMap{}
	err := tenant.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: history.Name(id)}, read)
	if !apierrors.IsForbidden(err) {
		t.Errorf("the tenant read the fleet's history: %v", err)
	}
	intruder := forgedHistory(t, operatorNamespace, history.Name(id), version)
	if err := tenant.Create(ctx, intruder); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant wrote the operator's namespace: %v", err)
	}

	// Where the previous release kept the history, and a copy of the
	// history in its present form, with the attacker's content.
	legacy := forgedHistory(t, ns, "edge-xds", version)
	if err := tenant.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	copied := forgedHistory(t, ns, history.Name(id), version)
	copied.Labels[names.ComponentLabel] = history.Component
	copied.Labels[history.FleetNamespaceLabel] = ns
	copied.Annotations[history.FleetAnnotation] = fleetID
	if err := tenant.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}

	suite.Touch(t, ControllerName, cfg)
	if got := served(fleetID, resourcev3.ClusterType); !slices.Equal(got, []string{"backend"}) || xdsServer.Version(fleetID) != version {
		t.Errorf("after the forgery the fleet is served %v at version %s, want [backend] at %s", got, xdsServer.Version(fleetID), version)
	}
	after := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cfg), after); err != nil {
		t.Fatal(err)
	}
	if after.Status.PublishedVersion != version || condition(after, examplev1.EnvoyConfigConditionPublished).Status != metav1.ConditionTrue {
		t.Errorf("after the forgery the status is %+v", after.Status)
	}
	for _, forged := range []*corev1.ConfigMap{legacy, copied} {
		got := &corev1.ConfigMap{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(forged), got); err != nil {
			t.Errorf("the tenant's %s, no history of the operator's, was touched: %v", forged.Name, err)
		} else if got.ResourceVersion != forged.ResourceVersion {
			t.Errorf("the tenant's %s was written by the operator (resourceVersion %s, was %s)", forged.Name, got.ResourceVersion, forged.ResourceVersion)
		}
	}
	// A proxy that connects now gets the real configuration.
	q := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-2", resourcev3.ClusterType)
	if v, names := clusterNames(t, q, ""); v != xdsServer.TypeVersion(fleetID, resourcev3.ClusterType) || !slices.Equal(names, []string{"backend"}) {
		t.Errorf("a new proxy got %v at %s", names, v)
	}
}

// follower starts a second replica beside the suite's: its own manager, xDS
// server (plaintext: what it serves is read from it directly) and
// EnvoyConfig controller, never elected: it serves what the leader records.
func follower(t *testing.T, name string) *server.Server {
	t.Helper()
	return replica(t, name, func() bool { return false })
}

// replica starts a second replica, as follower does, that leads while
// leads says so.
func replica(t *testing.T, name string, leads func() bool) *server.Server {
	t.Helper()
	srv, _ := startReplicaWith(t, name, adminConfig(), leads, nil)
	return srv
}

// replicaRuns numbers the replicas started in this process.
var replicaRuns atomic.Int64

// startReplicaWith starts a replica beside the suite's, until the test
// ends: its own manager over cfg, xDS server (plaintext: what it serves is
// read from it directly) and EnvoyConfig controller, which leads while
// leads says so, changed by configure when set. It returns the server and
// the controller's name.
func startReplicaWith(t *testing.T, name string, cfg *rest.Config, leads func() bool, configure func(*Reconciler)) (*server.Server, string) {
	t.Helper()
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", PanicOnReconcilePanic: true, SkipControllerNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Add(mgr, server.Options{BindAddress: "127.0.0.1:0", Namespace: operatorNamespace, Replica: name})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(mgr, srv, operatorNamespace)
	r.IsLeader = leads
	if configure != nil {
		configure(r)
	}
	// A name of its own: the workqueue and reconcile metrics are the
	// process's, and the suite waits on those of ControllerName (Idle).
	// Unique too across runs in one process (-count): a stopped replica's
	// metrics stay.
	r.Name = fmt.Sprintf("%s-%s-%d", ControllerName, name, replicaRuns.Add(1))
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica %s: %v", name, err)
		}
	})
	return srv, r.Name
}

// deleteHistory deletes the fleet's history, as an admin or an accident may.
func deleteHistory(t *testing.T, id fleet.ID) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: history.Name(id)}}
	if err := suite.Client.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

// readHistory returns the fleet's history as recorded, once it is.
func readHistory(t *testing.T, id fleet.ID, what string, cond func(publish.History) bool) publish.History {
	t.Helper()
	var h publish.History
	testenv.Eventually(t, what, func() (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: history.Name(id)}, cm); err != nil {
			return false, err
		}
		var err error
		h, err = history.Read(cm, operatorNamespace, id)
		if err != nil {
			return false, err
		}
		rollout := "none"
		if h.Rollout != nil {
			rollout = fmt.Sprintf("%+v", *h.Rollout)
		}
		return cond(h), fmt.Errorf("the history serves %s; its rollout: %s; withheld: %v", h.Current, rollout, h.Withheld)
	})
	return h
}

// After every proxy rejected a version and the fleet rolled back, the
// fleet's history is deleted: the rejected version is not served again, by
// the leader or by another replica, since the EnvoyConfig's status keeps
// the rejection. With no accepted revision known, nothing is served until
// the content changes; a change is published again.
func TestDeletedHistoryBringsNoRejectedVersionBack(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	other := follower(t, "replica-follower")
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	proxies, _, accepted, rejected := rejectNewVersion(t, cfg, fleetID)
	rolledBack := waitStatus(t, cfg, "a rollback, and the change withheld, recorded in status", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonWithheld && len(c.Status.RejectedVersions) == 1
	})
	rejectedVersion := rolledBack.Status.RejectedVersions[0]
	if rolledBack.Status.PublishedVersion != accepted || rejectedVersion == accepted {
		t.Fatalf("status after the rollback: %+v", rolledBack.Status)
	}
	testenv.Eventually(t, "the follower to serve the accepted version again", func() (bool, error) {
		return other.Version(fleetID) == accepted, nil
	})
	for _, p := range proxies {
		if v, names := clusterNames(t, p, ""); v == rejected || len(names) != 1 {
			t.Fatalf("after the rollback a proxy got %v at %s", names, v)
		}
	}

	// The history goes. The leader records it again, with the rejection it
	// finds in status, and nothing served.
	deleteHistory(t, id)
	h := readHistory(t, id, "the history recorded again", func(h publish.History) bool { return h.Find(rejectedVersion) != nil })
	if h.Current != "" || h.Find(rejectedVersion).Rejected == "" {
		t.Errorf("the history recorded again: current %q, revisions %+v", h.Current, h.Revisions)
	}
	testenv.Eventually(t, "no replica to serve the fleet", func() (bool, error) {
		return xdsServer.Version(fleetID) == "" && other.Version(fleetID) == "", nil
	})
	got := waitStatus(t, cfg, "the rejection reported", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Reason == examplev1.EnvoyConfigReasonRejected
	})
	if c := condition(got, examplev1.EnvoyConfigConditionPublished); !strings.Contains(c.Message, "nothing is served until the content changes") ||
		!slices.Equal(got.Status.RejectedVersions, []string{rejectedVersion}) || condition(got, examplev1.EnvoyConfigConditionDegraded).Status != metav1.ConditionTrue {
		t.Errorf("status with the history lost: %+v", got.Status)
	}
	suite.Touch(t, ControllerName, cfg)
	for what, s := range map[string]*server.Server{"the leader": xdsServer, "the follower": other} {
		if v, n := s.Version(fleetID), len(s.Resources(fleetID)[resourcev3.ClusterType]); v != "" || n != 0 {
			t.Errorf("%s serves version %q with %d clusters, want nothing", what, v, n)
		}
	}

	// New content is published, to every replica.
	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = []runtime.RawExtension{cluster("backend", "3s")}
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	fixed := waitStatus(t, cfg, "the new content published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
	})
	testenv.Eventually(t, "both replicas to serve it", func() (bool, error) {
		return xdsServer.Version(fleetID) == fixed.Status.PublishedVersion && other.Version(fleetID) == fixed.Status.PublishedVersion, nil
	})
	if len(fixed.Status.RejectedVersions) != 0 {
		t.Errorf("the changed EnvoyConfig still records rejections: %v", fixed.Status.RejectedVersions)
	}
}

// A fleet that is gone (its Envoy and EnvoyConfigs deleted) loses its
// history, and so does one deleted while no leader ran, whose history the
// leader finds when it starts (the cache's first list brings every history,
// as a create here). A fleet whose Envoy alone is gone keeps it.
func TestGoneFleetsHistoryIsDeleted(t *testing.T) {
	ctx := context.Background()
	ns, _ := newFleet(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	waitStatus(t, cfg, "published", func(c *examplev1.EnvoyConfig) bool { return c.Status.PublishedVersion != "" })
	readHistory(t, id, "the history", func(publish.History) bool { return true })

	// The Envoy goes: its EnvoyConfig is still served, to proxies of that
	// identity, and the history stays.
	if err := suite.Client.Delete(ctx, &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cfg, "the Envoy reported missing", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonEnvoyNotFound
	})
	readHistory(t, id, "the history kept", func(publish.History) bool { return true })

	// The EnvoyConfig goes too: so does the history.
	if err := suite.Client.Delete(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, suite.Client, operatorNamespace, history.Name(id), &corev1.ConfigMap{})

	// A history left by a fleet deleted while no leader ran.
	ghost := fleet.ID{Namespace: ns, Name: "ghost"}
	cm, err := history.ConfigMap(operatorNamespace, ghost, publish.History{})
	if err != nil {
		t.Fatal(err)
	}
	create(t, cm)
	testenv.WaitGone(t, suite.Client, operatorNamespace, cm.Name, &corev1.ConfigMap{})
}

// An upgrade from the release that kept histories in the fleets'
// namespaces. Its history is adopted as far as the EnvoyConfigs' status
// vouches for it: a replica serves the published revision from it while the
// previous release still leads, and the leader records it in the operator's
// namespace and deletes the old one. Here the EnvoyConfig's content is
// invalid (admitted while the webhook was down): only the adopted revision
// keeps its cluster served.
func TestLegacyHistoryIsAdopted(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	published := waitStatus(t, cfg, "published", func(c *examplev1.EnvoyConfig) bool { return c.Status.PublishedVersion != "" })
	version := published.Status.PublishedVersion
	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = []runtime.RawExtension{cluster("backend", "-5s")}
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cfg, "the invalid change refused", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonInvalidResources && c.Status.PublishedVersion == version
	})
	recorded := readHistory(t, id, "the history", func(h publish.History) bool { return h.Current == version })

	// What the previous release left: its history in the fleet's
	// namespace, none in the operator's; it leads, this replica follows.
	resume := pauseLeader(t)
	deleteHistory(t, id)
	legacy := forgedHistory(t, ns, history.LegacyName("edge"), version)
	legacy.BinaryData["history.json.gz"] = gzipJSON(t, publish.History{Current: version, Revisions: []publish.Revision{*recorded.Served()}})
	create(t, legacy)
	xdsServer.ClearFleet(fleetID) // as a replica of the new release that starts
	suite.Touch(t, ControllerName, cfg)
	if got := xdsServer.Version(fleetID); got != version {
		t.Errorf("the follower serves %q, want %s from the legacy history", got, version)
	}

	// This replica leads: it records the history and deletes the old one.
	resume()
	suite.Touch(t, ControllerName, cfg)
	testenv.WaitGone(t, suite.Client, ns, legacy.Name, &corev1.ConfigMap{})
	h := readHistory(t, id, "the adopted history recorded", func(publish.History) bool { return true })
	if h.Current != version {
		t.Errorf("recorded version %q, want %s", h.Current, version)
	}
	if got := served(fleetID, resourcev3.ClusterType); xdsServer.Version(fleetID) != version || !slices.Equal(got, []string{"backend"}) {
		t.Errorf("the fleet is served %v at %s, want [backend] at %s", got, xdsServer.Version(fleetID), version)
	}
}

// A history in the operator's namespace with the fleet's own metadata (its
// name, labels and annotations, as only the operator and the cluster's
// admins may write them there) but content that is not what it says, is
// read through the controller and refused: a replica that only serves
// what is recorded keeps serving what it serves, and the leader records
// the history afresh. The forgeries: a served version that is not the hash
// of its content, and content, hashed right, of another namespace's
// EnvoyConfig.
func TestForgedHistoryContentIsRefused(t *testing.T) {
	ctx := context.Background()
	ns, fleetID, cfg, version := ackedFleet(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	readHistory(t, id, "the history to record the published version", func(h publish.History) bool { return h.Current == version })

	// The suite's replica serves what is recorded, and decides nothing.
	resume := pauseLeader(t)
	attacker := func(name string) []translate.Config {
		return []translate.Config{{Name: name, Created: time.Unix(0, 0).UTC(),
			Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{cluster("attacker", "1s")}}}}}
	}
	elsewhere := attacker("other/clusters")
	for _, forged := range []struct {
		what string
		h    publish.History
	}{
		{"a served version that is not its content's", publish.History{Current: "forged",
			Revisions: []publish.Revision{{Version: "forged", Acked: true, Configs: attacker(ns + "/clusters")}}}},
		{"another namespace's content", publish.History{Current: translate.VersionOf(elsewhere),
			Revisions: []publish.Revision{{Version: translate.VersionOf(elsewhere), Acked: true, Configs: elsewhere}}}},
	} {
		want, err := history.ConfigMap(operatorNamespace, id, forged.h)
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(want), cm); err != nil {
			t.Fatal(err)
		}
		cm.Labels, cm.Annotations, cm.BinaryData, cm.Data = want.Labels, want.Annotations, want.BinaryData, nil
		if err := suite.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if !history.IsOf(cm, operatorNamespace, id) {
			t.Fatalf("%s: the forgery's metadata is not the fleet's history's", forged.what)
		}
		testenv.Eventually(t, "the manager's cache to hold the forgery", func() (bool, error) {
			cached := &corev1.ConfigMap{}
			err := suite.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(cm), cached)
			return err == nil && cached.ResourceVersion == cm.ResourceVersion, err
		})
		suite.Touch(t, ControllerName, cfg)
		if got := served(fleetID, resourcev3.ClusterType); !slices.Equal(got, []string{"backend"}) || xdsServer.Version(fleetID) != version {
			t.Errorf("%s: the fleet is served %v at version %s, want [backend] at %s", forged.what, got, xdsServer.Version(fleetID), version)
		}
	}

	resume()
	suite.Touch(t, ControllerName, cfg)
	readHistory(t, id, "the leader to record the history afresh", func(h publish.History) bool { return h.Current == version })
	if got := served(fleetID, resourcev3.ClusterType); !slices.Equal(got, []string{"backend"}) || xdsServer.Version(fleetID) != version {
		t.Errorf("once the leader recorded the history again, the fleet is served %v at version %s, want [backend] at %s", got, xdsServer.Version(fleetID), version)
	}
}

// ackedFleet makes a fleet whose one EnvoyConfig serves the cluster
// backend, and waits until its proxy pod-1, connected until the test ends,
// ACKed it: the fleet's namespace and ID, the EnvoyConfig and the version
// published.
func ackedFleet(t *testing.T) (ns, fleetID string, cfg *examplev1.EnvoyConfig, version string) {
	t.Helper()
	ns, fleetID = newFleet(t)
	cfg = newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	firstClusters(t, p)
	version = waitStatus(t, cfg, "one proxy to ACK", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 1 && c.Status.PublishedVersion != ""
	}).Status.PublishedVersion
	return ns, fleetID, cfg, version
}
