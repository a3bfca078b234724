package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// rolloutProxy is one proxy of a rollout test, over either protocol: it
// receives the next response of clusters, answers it, and returns the
// type's version it was sent.
type rolloutProxy interface {
	next(nackDetail string) (string, error)
}

type sotwRolloutProxy struct{ p *xdstest.Proxy }

func (p sotwRolloutProxy) next(nackDetail string) (string, error) {
	resp, err := p.p.Next(nackDetail)
	return resp.GetVersionInfo(), err
}

type deltaRolloutProxy struct {
	st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

func (p deltaRolloutProxy) next(nackDetail string) (string, error) {
	resp, err := p.st.Recv()
	if err != nil {
		return "", err
	}
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
	if nackDetail != "" {
		req.ErrorDetail = &statuspb.Status{Code: 3, Message: nackDetail}
	}
	return resp.GetSystemVersionInfo(), p.st.Send(req)
}

// sentClusters returns, by node id, the version of clusters the cache last
// sent each stream of the test fleet. A publication answers every stream it
// can before it returns, so this is what each proxy was sent by then.
func sentClusters(s *Server) map[string]string {
	return s.cache.Sent(fleet, resourcev3.ClusterType)
}

// waitAnswers waits until the tracker's answers of the test fleet are want.
func waitAnswers(t *testing.T, s *Server, want map[string]publish.ProxyAnswer) {
	t.Helper()
	// No speed goal: the bound only ends a test that will not pass.
	testenv.Poll(t, 5*time.Millisecond, time.Minute, "the proxies' answers", func() (bool, error) {
		got := s.Tracker().Answers(fleet)
		return maps.Equal(got, want), fmt.Errorf("answers %v, want %v", got, want)
	})
}

// A fleet whose revision rolls out serves each proxy the revision of its
// step (publish.Rollout.Serves): the new revision to the step's proxies
// alone, then to more; a rejection by one of them sends the step's proxies
// back to the previous revision, and the others never see the new one. The
// tracker's answers, which the leader's decisions come from, say what each
// proxy accepted or rejected. Over both protocols.
func TestRolloutServesEachProxyItsStep(t *testing.T) {
	for _, protocol := range []string{"sotw", "delta"} {
		t.Run(protocol, func(t *testing.T) { testRollout(t, protocol) })
	}
}

func testRollout(t *testing.T, protocol string) {
	s, addr := startServer(t)
	c := xdstest.Dial(t, addr)
	v1 := clusters("a")
	mustPublish(t, s, "v1", v1)
	at1 := s.TypeVersion(fleet, resourcev3.ClusterType)

	var nodes []string
	proxies := map[string]rolloutProxy{}
	for i := range 8 {
		node := fmt.Sprintf("pod-%d", i)
		nodes = append(nodes, node)
		if protocol == "sotw" {
			proxies[node] = sotwRolloutProxy{xdstest.Connect(t, c, fleet, node, resourcev3.ClusterType)}
		} else {
			proxies[node] = deltaRolloutProxy{xdstest.ConnectDelta(t, c, fleet, node, resourcev3.ClusterType)}
		}
	}
	answers := map[string]publish.ProxyAnswer{}
	for _, node := range nodes {
		if v, err := proxies[node].next(""); err != nil || v != at1 {
			t.Fatalf("%s: first response at %q (%v), want %s", node, v, err, at1)
		}
		answers[node] = publish.ProxyAnswer{Acked: "v1"}
	}
	waitAnswers(t, s, answers)

	policy := &publish.RolloutPolicy{Steps: []publish.RolloutStep{{Proxies: 2}, {Percent: 50}}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	state := publish.Rollout{Revision: "v1", Phase: publish.RolloutComplete}
	// step decides as the leader does, and serves what it decided.
	step := func(target string, resources map[string][]types.Resource, previous map[string][]types.Resource, want publish.RolloutAction) publish.RolloutDecision {
		t.Helper()
		d := publish.StepRollout(publish.RolloutInput{Policy: policy, State: state, Target: target, Proxies: s.Tracker().Answers(fleet), Now: now})
		if d.Action != want {
			t.Fatalf("rollout of %s: %s (%s), want %s", target, d.Action, d.Waiting, want)
		}
		state = d.Rollout
		if err := s.SetFleetRollout(context.Background(), fleet, target, resources,
			&Staged{Rollout: state, Version: state.Previous, Resources: previous}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// expect waits until each proxy was sent the new revision's clusters
	// at atNew if it is of lead, atOld if not. A proxy's next watch opens
	// a moment after its ACK: it is answered then.
	expect := func(lead []string, atNew, atOld string) {
		t.Helper()
		want := map[string]string{}
		for _, node := range nodes {
			want[node] = atOld
			if slices.Contains(lead, node) {
				want[node] = atNew
			}
		}
		testenv.Poll(t, 5*time.Millisecond, time.Minute, "the clusters sent to each proxy", func() (bool, error) {
			got := sentClusters(s)
			return maps.Equal(got, want), fmt.Errorf("clusters sent, by proxy: %v, want %v", got, want)
		})
	}

	// Step 1: two proxies are served v2.
	v2 := clusters("a", "b")
	step("v2", v2, v1, publish.RolloutStarts)
	at2 := s.TypeVersion(fleet, resourcev3.ClusterType)
	first := publish.SelectProxies(policy.Steps, 0, nodes)
	if len(first) != 2 {
		t.Fatalf("the first step leads %v", first)
	}
	expect(first, at2, at1)
	for _, node := range first {
		if v, err := proxies[node].next(""); err != nil || v != at2 {
			t.Fatalf("%s: sent %q (%v), want %s", node, v, err, at2)
		}
		answers[node] = publish.ProxyAnswer{Acked: "v2"}
	}
	waitAnswers(t, s, answers)

	// While it rolls out, the replica's report says what each proxy answered.
	if got := s.ProxyReport()[fleet].Proxies; !maps.Equal(got, answers) {
		t.Fatalf("the report's answers during the rollout: %v, want %v", got, answers)
	}

	// Step 2: half of them, the first two among them.
	step("v2", v2, v1, publish.RolloutPromotes)
	second := publish.SelectProxies(policy.Steps, 1, nodes)
	if len(second) != 4 || !slices.Equal(second[:2], first) {
		t.Fatalf("the second step leads %v, after %v", second, first)
	}
	expect(second, at2, at1)
	for _, node := range second[2:] {
		if v, err := proxies[node].next(""); err != nil || v != at2 {
			t.Fatalf("%s: sent %q (%v), want %s", node, v, err, at2)
		}
		answers[node] = publish.ProxyAnswer{Acked: "v2"}
	}
	waitAnswers(t, s, answers)

	// Complete: every proxy.
	step("v2", v2, v1, publish.RolloutCompletes)
	expect(nodes, at2, at2)
	for _, node := range nodes {
		if slices.Contains(second, node) {
			continue
		}
		if v, err := proxies[node].next(""); err != nil || v != at2 {
			t.Fatalf("%s: sent %q (%v), want %s", node, v, err, at2)
		}
		answers[node] = publish.ProxyAnswer{Acked: "v2"}
	}
	waitAnswers(t, s, answers)

	// Once it is complete, the report counts them, and lists none.
	if got := s.ProxyReport()[fleet]; got.Proxies != nil || got.Acked != len(nodes) {
		t.Fatalf("the report once the rollout is complete: %+v", got)
	}

	// v3 starts with the same first proxies; one rejects it, and the step's
	// proxies are sent v2 again, the only response they get after v3.
	v3 := clusters("a", "b", "c")
	step("v3", v3, v2, publish.RolloutStarts)
	at3 := s.TypeVersion(fleet, resourcev3.ClusterType)
	expect(first, at3, at2)
	if v, err := proxies[first[0]].next("cluster c: refused"); err != nil || v != at3 {
		t.Fatalf("%s: sent %q (%v), want %s", first[0], v, err, at3)
	}
	if v, err := proxies[first[1]].next(""); err != nil || v != at3 {
		t.Fatalf("%s: sent %q (%v), want %s", first[1], v, err, at3)
	}
	// It runs v2 still, as Envoy does when it rejects an update.
	answers[first[0]] = publish.ProxyAnswer{Acked: "v2", Nacked: "v3", Detail: "cluster c: refused", Type: resourcev3.ClusterType}
	answers[first[1]] = publish.ProxyAnswer{Acked: "v3"}
	waitAnswers(t, s, answers)
	d := step("v3", v3, v2, publish.RolloutAborts)
	if d.Rollout.Aborted == nil || d.Rollout.Aborted.Proxy != first[0] {
		t.Fatalf("aborted: %+v, want by %s", d.Rollout.Aborted, first[0])
	}
	expect(nil, "", at2)
	for _, node := range first {
		if v, err := proxies[node].next(""); err != nil || v != at2 {
			t.Fatalf("%s: sent %q (%v) after the abort, want %s again", node, v, err, at2)
		}
	}
}
