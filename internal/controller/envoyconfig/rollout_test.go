package envoyconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// sentClusters returns the version of clusters the server last sent each
// proxy of fleetID, by node id, as its tracker saw the responses go.
func sentClusters(fleetID string) map[string]string {
	out := map[string]string{}
	for _, p := range xdsServer.Tracker().Proxies() {
		if p.Fleet == fleetID {
			out[p.Node] = p.Types[resourcev3.ClusterType].Sent
		}
	}
	return out
}

// rolloutEnvoy creates the fleet edge in ns, with a rollout policy of
// steps baking bake seconds each; none without steps.
func rolloutEnvoy(t *testing.T, ns string, bake int32, steps ...examplev1.EnvoyConfigRolloutStep) *examplev1.Envoy {
	t.Helper()
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}}
	if len(steps) > 0 {
		e.Spec.ConfigRollout = &examplev1.EnvoyConfigRollout{Steps: steps, BakeSeconds: ptr.To(bake)}
	}
	create(t, e)
	return e
}

// connectProxies connects n proxies of fleetID, edge-0 and on, each
// through the client dial gives it, subscribed to every cluster.
func connectProxies(t *testing.T, fleetID string, n int, dial func(i int) discoveryv3.AggregatedDiscoveryServiceClient) ([]string, map[string]*xdstest.Proxy) {
	t.Helper()
	var nodes []string
	proxies := map[string]*xdstest.Proxy{}
	for i := range n {
		node := fmt.Sprintf("edge-%d", i)
		nodes = append(nodes, node)
		proxies[node] = xdstest.Connect(t, dial(i), fleetID, node, resourcev3.ClusterType)
	}
	return nodes, proxies
}

// overTLS dials the suite's replica as a proxy of fleetID.
func overTLS(t *testing.T, fleetID string) func(int) discoveryv3.AggregatedDiscoveryServiceClient {
	return func(int) discoveryv3.AggregatedDiscoveryServiceClient { return dialFleet(t, xdsClient(t), fleetID) }
}

// A fleet of 20 proxies with a rollout policy (one proxy, then a quarter
// of them, then all, no bake) is served a change step by step, through its
// own replica's report of each proxy's answer: the first step's proxy
// alone, then a quarter of the fleet, then all of it. A change that the first step's proxy rejects is aborted:
// that proxy is served the previous version again, and no other proxy is
// ever sent the change. The EnvoyConfig's status and the Envoy's events say
// where the rollout stands.
func TestRolloutStepByStep(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	rolloutEnvoy(t, ns, 0, examplev1.EnvoyConfigRolloutStep{Proxies: ptr.To[int32](1)},
		examplev1.EnvoyConfigRolloutStep{Percent: ptr.To[int32](25)}, examplev1.EnvoyConfigRolloutStep{Percent: ptr.To[int32](100)})
	fleetID := ns + "/edge"
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	nodes, proxies := connectProxies(t, fleetID, 20, overTLS(t, fleetID))
	var v1 string
	for _, node := range nodes {
		v1, _ = firstClusters(t, proxies[node])
	}
	waitStatus(t, cfg, "every proxy to ACK", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 20 && condition(c, examplev1.EnvoyConfigConditionPublished).Reason == examplev1.EnvoyConfigReasonPublished
	})

	edit := func(clusters ...string) {
		t.Helper()
		patch := client.MergeFrom(cfg.DeepCopy())
		cfg.Spec.Resources.Clusters = cfg.Spec.Resources.Clusters[:1]
		for _, c := range clusters {
			cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster(c, "2s"))
		}
		if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
			t.Fatal(err)
		}
	}
	// receive has each of nodes take its next response, and answers it.
	receive := func(nodes []string, nack string) string {
		t.Helper()
		var version string
		for _, node := range nodes {
			v, names := clusterNames(t, proxies[node], nack)
			if version != "" && v != version {
				t.Fatalf("%s was sent %s %v, another proxy %s", node, v, names, version)
			}
			version = v
		}
		return version
	}
	// onlyLead checks that no proxy but those of lead was sent version v.
	onlyLead := func(lead []string, v string) {
		t.Helper()
		for node, sent := range sentClusters(fleetID) {
			if sent == v && !slices.Contains(lead, node) {
				t.Fatalf("proxy %s, not in the step's %v, was sent %s", node, lead, v)
			}
		}
	}
	policy := []publish.RolloutStep{{Proxies: 1}, {Percent: 25}, {Percent: 100}}

	// Step 1: one proxy.
	edit("canary")
	first := publish.SelectProxies(policy, 0, nodes)
	v2 := receive(first, "")
	if v2 == v1 {
		t.Fatalf("the first step's proxy was sent %s again", v1)
	}
	onlyLead(first, v2)
	// Step 2: a quarter of them, the first one among them.
	second := publish.SelectProxies(policy, 1, nodes)
	if len(second) != 5 || second[0] != first[0] {
		t.Fatalf("the second step leads %v after %v", second, first)
	}
	if got := receive(second[1:], ""); got != v2 {
		t.Fatalf("the second step's proxies were sent %s, want %s", got, v2)
	}
	onlyLead(second, v2)
	// Step 3, the last: every proxy.
	var rest []string
	for _, node := range nodes {
		if !slices.Contains(second, node) {
			rest = append(rest, node)
		}
	}
	if got := receive(rest, ""); got != v2 {
		t.Fatalf("the last proxies were sent %s, want %s", got, v2)
	}
	waitStatus(t, cfg, "the rollout to complete", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 20 && condition(c, examplev1.EnvoyConfigConditionPublished).Reason == examplev1.EnvoyConfigReasonPublished
	})
	for _, ev := range []string{"Normal RolloutStarted", "Normal RolloutPromoted", "Normal RolloutCompleted"} {
		suite.WaitEvent(t, ns, "edge", ev)
	}

	// A change the first step's proxy rejects: aborted, and served to no
	// other proxy; that proxy is sent v2 again.
	edit("canary", "bad")
	if v3 := receive(first, "cluster bad: refused"); v3 == v2 {
		t.Fatalf("the first step's proxy was sent %s again", v2)
	}
	// The rejection is the EnvoyConfig's change: withheld, the fleet is
	// served the previous version as its own again.
	got := waitStatus(t, cfg, "the change withheld", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonWithheld
	})
	for _, typ := range []string{examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigConditionDegraded} {
		if c := condition(got, typ); !strings.Contains(c.Message, first[0]) || !strings.Contains(c.Message, "cluster bad: refused") ||
			!strings.Contains(c.Message, "first proxies of its rollout") {
			t.Errorf("%s = %+v", typ, c)
		}
	}
	if again := receive(first, ""); again != v2 {
		t.Fatalf("after the abort the first step's proxy was sent %s, want %s again", again, v2)
	}
	for node, sent := range sentClusters(fleetID) {
		if sent != v2 {
			t.Errorf("after the abort, proxy %s was last sent %s, want %s", node, sent, v2)
		}
	}
	suite.WaitEvent(t, ns, "edge", "Warning RolloutAborted")
	readHistory(t, fleet.ID{Namespace: ns, Name: "edge"}, "the abort recorded", func(h publish.History) bool {
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutAborted && h.Rollout.Aborted.Proxy == first[0]
	})
}

// A step that bakes for an hour is promoted by hand (the Envoy's promote
// annotation, naming the version and the step), and a later rollout is
// aborted by hand; the EnvoyConfig's status.rollout says where each stands.
func TestRolloutOrdersByHand(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := rolloutEnvoy(t, ns, 3600, examplev1.EnvoyConfigRolloutStep{Proxies: ptr.To[int32](1)})
	fleetID := ns + "/edge"
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	nodes, proxies := connectProxies(t, fleetID, 3, overTLS(t, fleetID))
	for _, node := range nodes {
		firstClusters(t, proxies[node])
	}
	waitStatus(t, cfg, "every proxy to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 3 })
	edit := func(name string) {
		t.Helper()
		patch := client.MergeFrom(cfg.DeepCopy())
		cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster(name, "2s"))
		if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
			t.Fatal(err)
		}
	}
	annotate := func(key, value string) {
		t.Helper()
		patch := client.MergeFrom(e.DeepCopy())
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, key, value)
		if err := suite.Client.Patch(ctx, e, patch); err != nil {
			t.Fatal(err)
		}
	}

	edit("canary")
	first := publish.SelectProxies([]publish.RolloutStep{{Proxies: 1}}, 0, nodes)[0]
	clusterNames(t, proxies[first], "")
	got := waitStatus(t, cfg, "the step to bake", func(c *examplev1.EnvoyConfig) bool {
		r := c.Status.Rollout
		return r != nil && r.Phase == "Progressing" && strings.Contains(r.Message, "bakes until")
	})
	r := got.Status.Rollout
	if r.Version != got.Status.PublishedVersion || r.Step != 1 || r.ServedProxies != 1 || r.ConnectedProxies != 3 || r.PreviousVersion == "" {
		t.Errorf("status.rollout = %+v", *r)
	}
	if p := condition(got, examplev1.EnvoyConfigConditionPublished); p.Reason != examplev1.EnvoyConfigReasonRollingOut || p.Status != metav1.ConditionTrue {
		t.Errorf("Published = %+v", p)
	}
	annotate(examplev1.RolloutPromoteAnnotation, fmt.Sprintf("%s/%d", r.Version, r.Step))
	for _, node := range nodes {
		if node != first {
			clusterNames(t, proxies[node], "")
		}
	}
	waitStatus(t, cfg, "the rollout to complete", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Rollout == nil && c.Status.Proxies.Acked == 3
	})
	suite.WaitEvent(t, ns, "edge", "Normal RolloutCompleted")

	// The next change is aborted by hand while its first step bakes.
	edit("second")
	clusterNames(t, proxies[first], "")
	got = waitStatus(t, cfg, "the next step to bake", func(c *examplev1.EnvoyConfig) bool {
		r := c.Status.Rollout
		return r != nil && r.Version != got.Status.PublishedVersion && strings.Contains(r.Message, "bakes until")
	})
	annotate(examplev1.RolloutAbortAnnotation, got.Status.Rollout.Version)
	got = waitStatus(t, cfg, "the rollout aborted", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Rollout != nil && c.Status.Rollout.Phase == "Aborted"
	})
	if !strings.Contains(got.Status.Rollout.Message, "aborted by hand") {
		t.Errorf("status.rollout = %+v", *got.Status.Rollout)
	}
	// The first proxy is served the previous version again.
	if v, names := clusterNames(t, proxies[first], ""); len(names) != 2 {
		t.Errorf("after the abort, the first proxy got %s %v, want the two clusters of the previous version", v, names)
	}
}

// Two tenants in a fleet with a rollout policy: the first proxy of tenant
// A's change rejects it. The rollout is aborted, the rejection attributed
// to A, and A's change withheld; tenant B's next change rolls out to every
// proxy, which never sees A's.
func TestRolloutRejectionStaysWithItsAuthor(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	// The policy comes once the fleet settled, as on a fleet that runs.
	e := rolloutEnvoy(t, ns, 0)
	fleetID := ns + "/edge"
	a, b := newConfig(ns, "tenant-a", cluster("a", "1s")), newConfig(ns, "tenant-b", cluster("b", "1s"))
	create(t, a)
	create(t, b)
	nodes, proxies := connectProxies(t, fleetID, 4, overTLS(t, fleetID))
	// A fleet whose Envoy existed before its EnvoyConfigs may be served
	// empty, then one of them, first.
	for _, node := range nodes {
		for i := 0; ; i++ {
			if _, names := clusterNames(t, proxies[node], ""); sameNames(names, "a", "b") {
				break
			} else if i == 5 {
				t.Fatalf("%s: no response with both tenants' clusters", node)
			}
		}
	}
	waitStatus(t, b, "every proxy to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 4 })
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.ConfigRollout = &examplev1.EnvoyConfigRollout{Steps: []examplev1.EnvoyConfigRolloutStep{{Proxies: ptr.To[int32](1)}}, BakeSeconds: ptr.To[int32](0)}
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	edit := func(c *examplev1.EnvoyConfig, name string) {
		t.Helper()
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Resources.Clusters = append(c.Spec.Resources.Clusters, cluster(name, "2s"))
		if err := suite.Client.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
	}

	edit(a, "a-bad")
	first := publish.SelectProxies([]publish.RolloutStep{{Proxies: 1}}, 0, nodes)[0]
	if _, names := clusterNames(t, proxies[first], "cluster a-bad: refused"); !sameNames(names, "a", "a-bad", "b") {
		t.Fatalf("the first proxy was sent %v", names)
	}
	got := waitStatus(t, a, "A's change withheld", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonWithheld
	})
	if msg := condition(got, examplev1.EnvoyConfigConditionAccepted).Message; !strings.Contains(msg, "cluster a-bad: refused") ||
		!strings.Contains(msg, first) || !strings.Contains(msg, "first proxies of its rollout") {
		t.Errorf("A's Accepted: %s", msg)
	}
	suite.WaitEvent(t, ns, "edge", "Warning RolloutAborted")
	// The first proxy is sent the previous version again.
	if _, names := clusterNames(t, proxies[first], ""); !sameNames(names, "a", "b") {
		t.Fatalf("after the abort the first proxy was sent %v", names)
	}

	// B's change rolls out to every proxy, without A's.
	edit(b, "b2")
	if _, names := clusterNames(t, proxies[first], ""); !sameNames(names, "a", "b", "b2") {
		t.Fatalf("B's change reached the first proxy as %v", names)
	}
	for _, node := range nodes {
		if node == first {
			continue
		}
		if _, names := clusterNames(t, proxies[node], ""); !sameNames(names, "a", "b", "b2") {
			t.Fatalf("B's change reached %s as %v", node, names)
		}
	}
	waitStatus(t, b, "B's change served to all", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 4 && condition(c, examplev1.EnvoyConfigConditionPublished).Reason == examplev1.EnvoyConfigReasonPublished
	})
}

// Every replica serves each proxy what the recorded rollout says, and a
// new leader goes on from the recorded step: during the first step of a
// rollout whose step bakes for an hour, a proxy of the second replica is
// served what its place in the order says; the leader hands over to that
// replica, which neither starts the rollout again nor skips the step, and
// promotes it when told to.
func TestRolloutSurvivesFailover(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := rolloutEnvoy(t, ns, 0)
	fleetID, id := ns+"/edge", fleet.ID{Namespace: ns, Name: "edge"}
	cfg := newConfig(ns, "clusters", cluster("backend", "1s"))
	create(t, cfg)
	var otherLeads atomic.Bool
	other := replica(t, "replica-b", otherLeads.Load)
	otherAddr, err := other.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Six proxies: four on the suite's replica, two on the other.
	nodes, proxies := connectProxies(t, fleetID, 6, func(i int) discoveryv3.AggregatedDiscoveryServiceClient {
		if i >= 4 {
			return xdstest.Dial(t, otherAddr.String())
		}
		return dialFleet(t, xdsClient(t), fleetID)
	})
	for _, node := range nodes {
		firstClusters(t, proxies[node])
	}
	waitStatus(t, cfg, "every proxy to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 6 })
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.ConfigRollout = &examplev1.EnvoyConfigRollout{BakeSeconds: ptr.To[int32](3600),
		Steps: []examplev1.EnvoyConfigRolloutStep{{Proxies: ptr.To[int32](2)}, {Percent: ptr.To[int32](50)}}}
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}

	patch = client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster("canary", "2s"))
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	policy := []publish.RolloutStep{{Proxies: 2}, {Percent: 50}}
	first, second := publish.SelectProxies(policy, 0, nodes), publish.SelectProxies(policy, 1, nodes)
	// The first step's proxies are the other replica's, the second step's
	// third one the suite's: each replica serves a step's proxies while the
	// other leads.
	if !slices.Equal(first, []string{"edge-5", "edge-4"}) || !slices.Equal(second[2:], []string{"edge-2"}) {
		t.Fatalf("the steps lead %v, then %v: the test's proxies are not where it needs them", first, second)
	}
	for _, node := range first {
		if _, names := clusterNames(t, proxies[node], ""); !sameNames(names, "backend", "canary") {
			t.Fatalf("%s of the first step was sent %v", node, names)
		}
	}
	baking := readHistory(t, id, "the first step to bake", func(h publish.History) bool {
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutProgressing && h.Rollout.Cut != ""
	})
	waitStatus(t, cfg, "the first step to bake", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Rollout != nil && strings.Contains(c.Status.Rollout.Message, "bakes until")
	})

	// The other replica leads now. Told nothing, it goes on baking the step.
	pauseLeader(t)
	otherLeads.Store(true)
	patch = client.MergeFrom(e.DeepCopy())
	metav1.SetMetaDataAnnotation(&e.ObjectMeta, "example.com/note", "the new leader reconciles the fleet")
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	// Promoted by hand, it goes on to the second step.
	patch = client.MergeFrom(e.DeepCopy())
	metav1.SetMetaDataAnnotation(&e.ObjectMeta, examplev1.RolloutPromoteAnnotation, baking.Rollout.Revision+"/1")
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	promoted := readHistory(t, id, "the second step", func(h publish.History) bool {
		return h.Rollout != nil && h.Rollout.Step == 1
	})
	if promoted.Rollout.Revision != baking.Rollout.Revision || promoted.Rollout.Previous != baking.Rollout.Previous {
		t.Errorf("the new leader rolls out %s after %s, want %s after %s", promoted.Rollout.Revision, promoted.Rollout.Previous,
			baking.Rollout.Revision, baking.Rollout.Previous)
	}
	for _, node := range second {
		if slices.Contains(first, node) {
			continue
		}
		if _, names := clusterNames(t, proxies[node], ""); !sameNames(names, "backend", "canary") {
			t.Fatalf("%s of the second step was sent %v", node, names)
		}
	}
	// The events are recorded asynchronously: those asserted are waited for.
	suite.WaitEvent(t, ns, "edge", "Normal RolloutStarted")
	suite.WaitEvent(t, ns, "edge", "Normal RolloutPromoted")
	started := 0
	evs, err := suite.Events(ns, "edge")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.HasPrefix(ev, "Normal RolloutStarted") {
			started++
		}
	}
	if started != 1 {
		t.Errorf("the rollout started %d times: %v", started, evs)
	}
}
