package envoyconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// figuresOf are n requests, e of them 5xx, each of about ms.
func figuresOf(n, e uint64, ms float64) analysis.Figures {
	f := analysis.Figures{Requests: n, Errors5xx: e}
	i, _ := slices.BinarySearch(analysis.Bounds[:], ms)
	f.Duration.Counts[min(i, analysis.NumBuckets-1)] = n
	return f
}

// fakeReplica writes, as a replica of its own name would, its report of
// proxies of one fleet: what each answered, with the figures it served.
type fakeReplica struct {
	t       *testing.T
	name    string
	fleetID string
}

func (r fakeReplica) report(version string, answers map[string]publish.ProxyAnswer) {
	r.t.Helper()
	ctx := context.Background()
	entry := report.FleetProxies{Version: version, Connected: len(answers), Proxies: answers}
	for _, a := range answers {
		if a.Acked == version {
			entry.Acked++
		}
	}
	shards, err := report.Shards(operatorNamespace, r.name, report.Report{r.fleetID: entry}, 1)
	if err != nil {
		r.t.Fatal(err)
	}
	want := shards[0]
	got := &corev1.ConfigMap{}
	switch err := suite.Client.Get(ctx, client.ObjectKeyFromObject(want), got); {
	case apierrors.IsNotFound(err):
		create(r.t, want)
		r.t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), want) })
	case err != nil:
		r.t.Fatal(err)
	default:
		got.Data, got.Annotations, got.Labels = want.Data, want.Annotations, want.Labels
		if err := suite.Client.Update(ctx, got); err != nil {
			r.t.Fatal(err)
		}
	}
}

// stepSeries returns the fleet's series of
// kube_envoy_controller_rollout_step_requests, by their proxies label.
func stepSeries(t *testing.T, fleetID string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() { metricStepRequests.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["fleet"] == fleetID {
			out[labels["proxies"]] = pb.GetGauge().GetValue()
		}
	}
	return out
}

// clustersOf returns the names of the clusters of each EnvoyConfig of a
// revision, by EnvoyConfig.
func clustersOf(t *testing.T, rev *publish.Revision) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, c := range rev.Configs {
		for _, raw := range c.Spec.Resources.Clusters {
			var named struct{ Name string }
			if err := json.Unmarshal(raw.Raw, &named); err != nil {
				t.Fatal(err)
			}
			out[c.Name] = append(out[c.Name], named.Name)
		}
	}
	return out
}

// A fleet of four proxies (a replica's report) with a rollout of one proxy,
// then all, judged by the default analysis ({}). Tenants A and B change at
// once; the first proxy serves A's new cluster with 62% of 5xx: the
// rollout aborts at step 1, A's status and the Envoy's event tell the
// proxy, the metric, its value and the threshold, and A's change alone is
// withheld. B's change rolls out: with too little traffic its first step
// waits and says so; with enough, good traffic, it passes, and the fleet
// is served it.
func TestRolloutAnalysis(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	fleetID := id.String()
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}}
	create(t, e)
	a, b := newConfig(ns, "tenant-a", cluster("a", "1s")), newConfig(ns, "tenant-b", cluster("b", "1s"))
	create(t, a)
	create(t, b)
	nodes := []string{"edge-0", "edge-1", "edge-2", "edge-3"}
	replica := fakeReplica{t: t, name: "replica-analysis-" + ns, fleetID: fleetID}
	answering := func(serves func(node string) string, windows func(node string) *publish.Window) map[string]publish.ProxyAnswer {
		out := map[string]publish.ProxyAnswer{}
		for _, n := range nodes {
			out[n] = publish.ProxyAnswer{Acked: serves(n), Window: windows(n)}
		}
		return out
	}
	healthy := func(scopes ...string) func(string) *publish.Window {
		return func(string) *publish.Window {
			w := &publish.Window{Reports: 6, Scopes: map[string]analysis.Figures{}}
			for _, s := range scopes {
				w.Scopes[s] = figuresOf(1000, 0, 3)
			}
			return w
		}
	}
	settled := readHistory(t, id, "both tenants published", func(h publish.History) bool {
		r := h.Served()
		return r != nil && len(r.Configs) == 2
	})
	v1 := settled.Current
	replica.report(v1, answering(func(string) string { return v1 }, healthy()))
	waitStatus(t, b, "every proxy to ACK", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion == v1 && c.Status.Proxies.Acked == 4
	})

	// The policy, with analysis {}: the API server's defaults are the
	// analysis' own.
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.ConfigRollout = &examplev1.EnvoyConfigRollout{BakeSeconds: ptr.To[int32](0), Analysis: &examplev1.EnvoyConfigRolloutAnalysis{},
		Steps: []examplev1.EnvoyConfigRolloutStep{{Proxies: ptr.To[int32](1)}, {Percent: ptr.To[int32](100)}}}
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	if p := rolloutPolicy(e); p == nil || p.Analysis == nil || !reflect.DeepEqual(*p.Analysis, analysis.DefaultThresholds) {
		t.Fatalf("the policy of analysis {} as the API server stores it: %+v, want the thresholds %+v", p, analysis.DefaultThresholds)
	} else if p.Silence != time.Minute {
		t.Fatalf("a judged step's proxies may be silent for %s, want a minute, however short the bake", p.Silence)
	}
	first := publish.SelectProxies([]publish.RolloutStep{{Proxies: 1}}, 0, nodes)[0]

	// A and B change at once: each a new cluster, and a route to it (a
	// cluster that nothing sends to is not judged).
	for c, name := range map[*examplev1.EnvoyConfig]string{a: "a2", b: "b2"} {
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Resources.Clusters = append(c.Spec.Resources.Clusters, cluster(name, "1s"))
		c.Spec.Resources.Routes = append(c.Spec.Resources.Routes, raw(`{"name": "to-`+name+`", "virtual_hosts": [{"name": "all", "domains": ["*"],
			"routes": [{"match": {"prefix": "/"}, "route": {"cluster": "`+name+`"}}]}]}`))
		if err := suite.Client.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
	}
	rolling := readHistory(t, id, "a rollout of both changes", func(h publish.History) bool {
		r := h.Served()
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutProgressing && h.Rollout.Cut != "" && r != nil &&
			reflect.DeepEqual(clustersOf(t, r), map[string][]string{ns + "/tenant-a": {"a", "a2"}, ns + "/tenant-b": {"b", "b2"}})
	})
	v2 := rolling.Current
	if rolling.Rollout.Previous != v1 || rolling.Rollout.Serves(first) != v2 {
		t.Fatalf("the rollout %+v does not serve %s first", *rolling.Rollout, first)
	}
	// The first proxy serves A's new cluster with 5xx, B's well.
	replica.report(v2, answering(rolling.Rollout.Serves, func(node string) *publish.Window {
		if node == first {
			return &publish.Window{Reports: 3, Scopes: map[string]analysis.Figures{
				"cluster:a2": figuresOf(200, 124, 3), "cluster:b2": figuresOf(200, 0, 3), "http:unrelated": figuresOf(200, 200, 3)}}
		}
		return healthy("cluster:a2", "cluster:b2")(node)
	}))
	detail := "proxy " + first + " cluster:a2: 5xx-ratio 62.00%, above the ceiling of 5.00%"
	aborted := readHistory(t, id, "the rollout aborted by its analysis", func(h publish.History) bool {
		return h.Withheld[ns+"/tenant-a"].Analysis
	})
	if w := aborted.Withheld[ns+"/tenant-a"]; w.Detail != detail || w.Node != first || w.Version != v2 {
		t.Errorf("A's change withheld as %+v, want %q", w, detail)
	}
	if _, ok := aborted.Withheld[ns+"/tenant-b"]; ok {
		t.Errorf("B's change is withheld too: %+v", aborted.Withheld)
	}
	got := waitStatus(t, a, "A's change withheld, with the figures", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonWithheld
	})
	for _, typ := range []string{examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigConditionDegraded} {
		if c := condition(got, typ); c.Reason != examplev1.EnvoyConfigReasonWithheld || !strings.Contains(c.Message, "failed its analysis") ||
			!strings.Contains(c.Message, detail) {
			t.Errorf("A's %s = %+v", typ, c)
		}
	}
	suite.WaitEvent(t, ns, "edge", fmt.Sprintf("Warning RolloutAborted version %s failed its analysis at step 1: %s (the step's 400 requests of 1 proxy", v2, detail))

	// B's change rolls out, without A's: the next revision.
	next := readHistory(t, id, "B's change rolling out alone", func(h publish.History) bool {
		r := h.Served()
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutProgressing && r != nil && h.Current != v2 &&
			reflect.DeepEqual(clustersOf(t, r), map[string][]string{ns + "/tenant-a": {"a"}, ns + "/tenant-b": {"b", "b2"}})
	})
	v3 := next.Current
	// Too little traffic: the step waits, and says so.
	replica.report(v3, answering(next.Rollout.Serves, func(node string) *publish.Window {
		if node == first {
			return &publish.Window{Reports: 1, Scopes: map[string]analysis.Figures{"cluster:b2": figuresOf(10, 0, 3)}}
		}
		return healthy("cluster:b2")(node)
	}))
	got = waitStatus(t, b, "B's step waiting for traffic", func(c *examplev1.EnvoyConfig) bool {
		r := c.Status.Rollout
		return r != nil && r.Version == v3 && strings.Contains(r.Message, "too little traffic")
	})
	if want := "proxy " + first + ": requests 10, want at least 50: too little traffic to judge (the step's 10 requests of 1 proxy, 0.00% 5xx"; !strings.Contains(got.Status.Rollout.Message, want) {
		t.Errorf("status.rollout.message = %q, want it to say %q", got.Status.Rollout.Message, want)
	}
	if p := condition(got, examplev1.EnvoyConfigConditionPublished); p.Reason != examplev1.EnvoyConfigReasonRollingOut || !strings.Contains(p.Message, "too little traffic") {
		t.Errorf("B's Published = %+v", p)
	}
	// The leader exports the step's figures and the baseline's.
	if got := stepSeries(t, fleetID); got["step"] != 10 || got["baseline"] != 3000 {
		t.Errorf("kube_envoy_controller_rollout_step_requests of the fleet: %v, want the step's 10 and the baseline's 3000", got)
	}
	// Enough good traffic: the step passes, and the fleet is served B's change.
	replica.report(v3, answering(next.Rollout.Serves, func(node string) *publish.Window {
		if node == first {
			return &publish.Window{Reports: 2, Scopes: map[string]analysis.Figures{"cluster:b2": figuresOf(300, 1, 3)}}
		}
		return healthy("cluster:b2")(node)
	}))
	promoted := readHistory(t, id, "B's first step passed", func(h publish.History) bool {
		return h.Current == v3 && (h.Rollout == nil || h.Rollout.Step == 1)
	})
	if promoted.Rollout != nil {
		v := promoted.Rollout.Verdicts
		if len(v) != 1 || v[0].Outcome != analysis.Pass || v[0].Proxies.Requests != 300 || v[0].Baseline.Requests != 3000 {
			t.Errorf("the verdicts recorded: %+v", v)
		}
	}
	suite.WaitEvent(t, ns, "edge", "Normal RolloutPromoted version "+v3)
	replica.report(v3, answering(func(string) string { return v3 }, healthy("cluster:b2")))
	readHistory(t, id, "B's change served to all", func(h publish.History) bool { return h.Current == v3 && h.Rollout == nil })
	testenv.Eventually(t, "the fleet's step series gone", func() (bool, error) {
		got := stepSeries(t, fleetID)
		return len(got) == 0, fmt.Errorf("series %v", got)
	})
}
