package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// canary is the policy of the tests: one proxy, a quarter, then all.
var canary = &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}, {Percent: 25}, {Percent: 100}}, Bake: time.Minute}

func fleetNodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("edge-5d8c7-%02d", i)
	}
	return out
}

// byHash is the order of leadership, computed independently of rank: by
// the hexadecimal SHA-256 of the node id.
func byHash(nodes []string) []string {
	out := slices.Clone(nodes)
	key := func(n string) string { s := sha256.Sum256([]byte(n)); return hex.EncodeToString(s[:]) }
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// answering has every node answer what it is served by s, accepting it.
func answering(s Rollout, nodes []string) map[string]ProxyAnswer {
	out := map[string]ProxyAnswer{}
	for _, n := range nodes {
		out[n] = ProxyAnswer{Acked: s.Serves(n)}
	}
	return out
}

func acking(version string, nodes []string) map[string]ProxyAnswer {
	out := map[string]ProxyAnswer{}
	for _, n := range nodes {
		out[n] = ProxyAnswer{Acked: version}
	}
	return out
}

// servedNew lists, in the order of leadership, the nodes served version.
func servedNew(serve map[string]string, version string) []string {
	var out []string
	for n, v := range serve {
		if v == version {
			out = append(out, n)
		}
	}
	return byHash(out)
}

// progressing is a rollout of v2 over v1 at step, begun at started, whose
// step's proxies are the first k of nodes in the order of leadership.
func progressing(step int, started time.Time, nodes []string, k int) Rollout {
	r := Rollout{Revision: "v2", Previous: "v1", Phase: RolloutProgressing, Step: step, StepStarted: started}
	if k > 0 {
		r.Cut = cutOf(rank(byHash(nodes)[k-1]))
	}
	return r
}

func reasons(events []Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return strings.Join(out, ",")
}

func TestRolloutStepSize(t *testing.T) {
	tests := []struct {
		steps []RolloutStep
		i, n  int
		want  int
	}{
		{[]RolloutStep{{Percent: 25}}, 0, 20, 5},
		{[]RolloutStep{{Percent: 25}}, 0, 21, 6},                      // 5.25 rounds up
		{[]RolloutStep{{Percent: 25}}, 0, 3, 1},                       // 0.75 rounds up
		{[]RolloutStep{{Percent: 1}}, 0, 1000, 10},                    //
		{[]RolloutStep{{Percent: 1}}, 0, 101, 2},                      // 1.01 rounds up
		{[]RolloutStep{{Percent: 1}}, 0, 1, 1},                        // at least one
		{[]RolloutStep{{Percent: 100}}, 0, 7, 7},                      // all
		{[]RolloutStep{{Percent: 250}}, 0, 7, 7},                      // never more than the fleet
		{[]RolloutStep{{Proxies: 1}}, 0, 0, 0},                        // no proxy
		{[]RolloutStep{{Percent: 50}}, 0, 0, 0},                       //
		{[]RolloutStep{{Proxies: 3}}, 0, 2, 2},                        // capped at the fleet
		{[]RolloutStep{{}}, 0, 5, 1},                                  // an empty step serves one
		{[]RolloutStep{{Percent: 50}, {Proxies: 1}}, 1, 10, 5},        // never fewer than an earlier step
		{[]RolloutStep{{Proxies: 1}, {Percent: 25}}, 5, 20, 5},        // past the last step: the last
		{[]RolloutStep{{Proxies: 2147483647}, {Percent: 1}}, 1, 3, 3}, //
	}
	for _, tt := range tests {
		nodes := fleetNodes(tt.n)
		got := SelectProxies(tt.steps, tt.i, nodes)
		if len(got) != tt.want {
			t.Errorf("steps %+v, step %d of %d proxies: %d selected, want %d", tt.steps, tt.i, tt.n, len(got), tt.want)
		}
		if want := byHash(nodes)[:tt.want]; !slices.Equal(got, want) {
			t.Errorf("steps %+v, step %d of %d proxies: selected %v, want the first by hash %v", tt.steps, tt.i, tt.n, got, want)
		}
	}
}

// Over random fleets, selection depends only on the set of node ids, each
// step's proxies include the previous step's, and a step's recorded Cut
// leads exactly the proxies selected.
func TestRolloutSelectionStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 26))
	steps := []RolloutStep{{Proxies: 1}, {Percent: 10}, {Proxies: 3}, {Percent: 25}, {Percent: 60}, {Percent: 100}}
	for range 300 {
		nodes := make([]string, rng.IntN(60))
		for i := range nodes {
			nodes[i] = fmt.Sprintf("%x.%d", rng.Uint64(), rng.IntN(1000))
		}
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, nodes[:len(nodes)/3]...) // a node id twice counts once
		var before []string
		for i := range steps {
			got := SelectProxies(steps, i, nodes)
			if again := SelectProxies(steps, i, shuffled); !slices.Equal(got, again) {
				t.Fatalf("step %d over %d nodes: %v, in another order %v", i, len(nodes), got, again)
			}
			if len(got) < len(before) || !slices.Equal(got[:len(before)], before) {
				t.Fatalf("step %d: %v does not lead with step %d's %v", i, got, i-1, before)
			}
			r := Rollout{Revision: "v2", Previous: "v1", Phase: RolloutProgressing, Cut: cutFor(steps, i, nodes)}
			var led []string
			for _, n := range byHash(nodes) {
				if r.Serves(n) == "v2" {
					led = append(led, n)
				}
			}
			if k := len(got); !slices.Equal(got, byHash(slices.Compact(slices.Sorted(slices.Values(nodes))))[:k]) {
				t.Fatalf("step %d: selected %v, not the first %d by hash", i, got, k)
			}
			if !slices.Equal(led, got) {
				t.Fatalf("step %d: cut %s leads %v, selected %v", i, r.Cut, led, got)
			}
			before = got
		}
		if len(nodes) > 0 && len(before) != len(nodes) {
			t.Fatalf("the last step (100%%) selected %d of %d", len(before), len(nodes))
		}
	}
}

func TestStepRollout(t *testing.T) {
	twenty := fleetNodes(20)
	order := byHash(twenty)
	lead := order[0]
	// A proxy that joins and leads step 2 of the twenty, and one that does not.
	var joinsIn, joinsOut string
	cut2 := rank(order[4])
	for i := 0; joinsIn == "" || joinsOut == ""; i++ {
		n := fmt.Sprintf("edge-5d8c7-new%d", i)
		if rank(n) < cut2 && joinsIn == "" {
			joinsIn = n
		} else if rank(n) > cut2 && joinsOut == "" {
			joinsOut = n
		}
	}
	atStep2 := progressing(1, t0, twenty, 5)
	nackAt := func(node, detail string) map[string]ProxyAnswer {
		p := acking("v1", twenty)
		p[node] = ProxyAnswer{Acked: "v1", Nacked: "v2", Detail: detail}
		return p
	}
	aborted := func(proxy, detail string, byHand bool) Rollout {
		return Rollout{Revision: "v2", Previous: "v1", Phase: RolloutAborted, Step: 0, StepStarted: t0,
			Aborted: &RolloutAbort{Proxy: proxy, Detail: detail, ByHand: byHand}}
	}
	complete := func(v string) Rollout { return Rollout{Revision: v, Phase: RolloutComplete} }

	tests := []struct {
		name     string
		policy   *RolloutPolicy
		state    Rollout
		target   string
		rollback bool
		proxies  map[string]ProxyAnswer
		now      time.Time
		promote  *RolloutOrder
		abort    *RolloutOrder

		action  RolloutAction
		want    Rollout
		leading []string // served want.Revision, in the order of leadership
		waiting string   // a part of Waiting
		events  string
	}{
		{name: "no policy: a new revision is served to all at once",
			state: complete("v1"), target: "v2", proxies: acking("v1", twenty), now: t0,
			action: RolloutCompletes, want: complete("v2"), leading: order},
		{name: "the first revision is served to all at once: there is nothing to keep",
			policy: canary, target: "v1", proxies: map[string]ProxyAnswer{"a": {}, "b": {}}, now: t0,
			action: RolloutCompletes, want: complete("v1"), leading: byHash([]string{"a", "b"})},
		{name: "a new revision starts at the first step",
			policy: canary, state: complete("v1"), target: "v2", proxies: acking("v1", twenty), now: t0,
			action: RolloutStarts, want: progressing(0, t0, twenty, 1), leading: order[:1], events: "RolloutStarted"},
		{name: "nothing new: nothing happens",
			policy: canary, state: complete("v1"), target: "v1", proxies: acking("v1", twenty), now: t0,
			action: RolloutIdle, want: complete("v1"), leading: order},
		{name: "a step waits for its proxies to accept",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2", proxies: acking("v1", twenty), now: t0.Add(time.Hour),
			action: RolloutWaits, want: progressing(0, t0, twenty, 1), leading: order[:1],
			waiting: "step 1 of 3: 1 of 1 proxies have not accepted version v2 yet: " + lead},
		{name: "bake not yet passed",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2",
			proxies: answering(progressing(0, t0, twenty, 1), twenty), now: t0.Add(20 * time.Second),
			action: RolloutWaits, want: progressing(0, t0, twenty, 1), leading: order[:1], waiting: "step 1 of 3: baking, 40s left"},
		{name: "accepted and baked: promoted",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2",
			proxies: answering(progressing(0, t0, twenty, 1), twenty), now: t0.Add(time.Minute),
			action: RolloutPromotes, want: progressing(1, t0.Add(time.Minute), twenty, 5), leading: order[:5], events: "RolloutPromoted"},
		{name: "promoted by hand: the bake is skipped",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2",
			proxies: answering(progressing(0, t0, twenty, 1), twenty), now: t0.Add(time.Second), promote: &RolloutOrder{Revision: "v2", Step: 0},
			action: RolloutPromotes, want: progressing(1, t0.Add(time.Second), twenty, 5), leading: order[:5], events: "RolloutPromoted"},
		{name: "promoted by hand: the proxies must still accept, and the order is recorded",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2", proxies: acking("v1", twenty), now: t0.Add(time.Second),
			promote: &RolloutOrder{Revision: "v2", Step: 0},
			action:  RolloutWaits, want: func() Rollout { r := progressing(0, t0, twenty, 1); r.PromotedByHand = true; return r }(),
			leading: order[:1], waiting: "have not accepted"},
		{name: "an order to promote another step is stale",
			policy: canary, state: atStep2, target: "v2", proxies: answering(atStep2, twenty), now: t0.Add(time.Second),
			promote: &RolloutOrder{Revision: "v2", Step: 0},
			action:  RolloutWaits, want: atStep2, leading: order[:5], waiting: "step 2 of 3: baking, 59s left"},
		{name: "an order to promote another revision is stale",
			policy: canary, state: atStep2, target: "v2", proxies: answering(atStep2, twenty), now: t0.Add(time.Second),
			promote: &RolloutOrder{Revision: "v0", Step: 1},
			action:  RolloutWaits, want: atStep2, leading: order[:5], waiting: "baking"},
		{name: "the last step is promoted: complete",
			policy: canary, state: progressing(2, t0, twenty, 20), target: "v2", proxies: acking("v2", twenty), now: t0.Add(time.Minute),
			action: RolloutCompletes, want: complete("v2"), leading: order, events: "RolloutCompleted"},
		{name: "after a last step below 100%, every proxy is served",
			policy: &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}, {Percent: 25}}}, state: atStep2, target: "v2",
			proxies: answering(atStep2, twenty), now: t0,
			action: RolloutCompletes, want: complete("v2"), leading: order, events: "RolloutCompleted"},
		{name: "a step that adds no proxy is passed over",
			policy: &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}, {Percent: 5}, {Proxies: 2}}, Bake: time.Minute},
			state:  progressing(0, t0, twenty, 1), target: "v2", proxies: answering(progressing(0, t0, twenty, 1), twenty), now: t0.Add(time.Minute),
			action: RolloutPromotes, want: progressing(2, t0.Add(time.Minute), twenty, 2), leading: order[:2], events: "RolloutPromoted"},
		{name: "one NACK aborts: every proxy back to the previous revision",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2", proxies: nackAt(lead, "route web: unknown cluster"), now: t0.Add(time.Second),
			action: RolloutAborts, want: aborted(lead, "route web: unknown cluster", false), events: "RolloutAborted"},
		{name: "a NACK without error_detail aborts too",
			policy: canary, state: atStep2, target: "v2", proxies: nackAt(order[3], ""), now: t0.Add(time.Hour),
			action: RolloutAborts,
			want:   func() Rollout { r := aborted(order[3], "no error_detail given", false); r.Step = 1; return r }(), events: "RolloutAborted"},
		{name: "a NACK of another version does not abort",
			policy: canary, state: atStep2, target: "v2",
			proxies: func() map[string]ProxyAnswer {
				p := answering(atStep2, twenty)
				p[order[9]] = ProxyAnswer{Acked: "v1", Nacked: "v0"}
				return p
			}(),
			now: t0.Add(time.Second), action: RolloutWaits, want: atStep2, leading: order[:5], waiting: "baking"},
		{name: "aborted by hand",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2", proxies: acking("v1", twenty), now: t0,
			abort:  &RolloutOrder{Revision: "v2"},
			action: RolloutAborts, want: aborted("", "aborted by hand", true), events: "RolloutAborted"},
		{name: "an order to abort another revision is stale",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2", proxies: acking("v1", twenty), now: t0,
			abort:  &RolloutOrder{Revision: "v0"},
			action: RolloutWaits, want: progressing(0, t0, twenty, 1), leading: order[:1], waiting: "have not accepted"},
		{name: "an aborted revision stays aborted",
			policy: canary, state: aborted(lead, "bad", false), target: "v2", proxies: acking("v1", twenty), now: t0.Add(time.Hour),
			action: RolloutIdle, want: aborted(lead, "bad", false)},
		{name: "an aborted revision's content reverted: still aborted, every proxy on the previous revision",
			policy: canary, state: aborted(lead, "bad", false), target: "v1", proxies: acking("v1", twenty), now: t0.Add(time.Hour),
			action: RolloutIdle, want: aborted(lead, "bad", false)},
		{name: "a new revision after an abort rolls out over the previous one",
			policy: canary, state: aborted(lead, "bad", false), target: "v3", proxies: acking("v1", twenty), now: t0.Add(time.Hour),
			action: RolloutStarts, events: "RolloutStarted",
			want: Rollout{Revision: "v3", Previous: "v1", Phase: RolloutProgressing, StepStarted: t0.Add(time.Hour), Cut: cutOf(rank(lead))}, leading: order[:1]},
		{name: "a new revision after a complete one rolls out over it",
			policy: canary, state: complete("v2"), target: "v3", proxies: acking("v2", twenty), now: t0,
			action: RolloutStarts, events: "RolloutStarted",
			want: Rollout{Revision: "v3", Previous: "v2", Phase: RolloutProgressing, StepStarted: t0, Cut: cutOf(rank(lead))}, leading: order[:1]},
		{name: "a new revision supersedes a rollout from the first step, over the previous revision",
			policy: canary, state: atStep2, target: "v3", proxies: answering(atStep2, twenty), now: t0.Add(time.Hour),
			action: RolloutStarts, events: "RolloutSuperseded,RolloutStarted",
			want: Rollout{Revision: "v3", Previous: "v1", Phase: RolloutProgressing, StepStarted: t0.Add(time.Hour), Cut: cutOf(rank(lead))}, leading: order[:1]},
		{name: "a rollback is served to all at once",
			policy: canary, state: complete("v2"), target: "v1", rollback: true, proxies: acking("v1", twenty), now: t0,
			action: RolloutCompletes, want: complete("v1"), leading: order},
		{name: "going back to the previous revision ends the rollout",
			policy: canary, state: atStep2, target: "v1", proxies: answering(atStep2, twenty), now: t0.Add(time.Hour),
			action: RolloutCompletes, want: complete("v1"), leading: order, events: "RolloutSuperseded"},
		{name: "a new revision without policy supersedes at once",
			state: atStep2, target: "v3", proxies: answering(atStep2, twenty), now: t0.Add(time.Hour),
			action: RolloutCompletes, want: complete("v3"), leading: order, events: "RolloutSuperseded"},
		{name: "the policy removed during a rollout: every proxy at once",
			state: atStep2, target: "v2", proxies: answering(atStep2, twenty), now: t0,
			action: RolloutCompletes, want: complete("v2"), leading: order, events: "RolloutCompleted"},
		{name: "the policy cut short during a rollout: its last step",
			policy: &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}}, Bake: time.Minute},
			state:  progressing(2, t0, twenty, 20), target: "v2", proxies: acking("v2", twenty), now: t0.Add(time.Second),
			action: RolloutWaits, want: progressing(2, t0, twenty, 20), leading: order, waiting: "step 1 of 1: baking, 59s left"},
		{name: "a proxy that joins within the step leads, and is waited for",
			policy: canary, state: atStep2, target: "v2",
			proxies: func() map[string]ProxyAnswer {
				p := answering(atStep2, twenty)
				p[joinsIn], p[joinsOut] = ProxyAnswer{}, ProxyAnswer{}
				return p
			}(),
			now: t0.Add(time.Hour), action: RolloutWaits, want: atStep2, leading: byHash(append(slices.Clone(order[:5]), joinsIn)),
			waiting: "1 of 6 proxies have not accepted version v2 yet: " + joinsIn},
		{name: "a proxy that joins outside the step is served the previous revision, and not waited for",
			policy: canary, state: atStep2, target: "v2",
			proxies: func() map[string]ProxyAnswer { p := answering(atStep2, twenty); p[joinsOut] = ProxyAnswer{}; return p }(),
			now:     t0.Add(time.Minute), action: RolloutPromotes, events: "RolloutPromoted",
			want: Rollout{Revision: "v2", Previous: "v1", Phase: RolloutProgressing, Step: 2, StepStarted: t0.Add(time.Minute),
				Cut: cutOf(rank(byHash(append(slices.Clone(twenty), joinsOut))[20]))},
			leading: byHash(append(slices.Clone(twenty), joinsOut))},
		{name: "a proxy of the step that leaves is not waited for",
			policy: canary, state: atStep2, target: "v2",
			proxies: func() map[string]ProxyAnswer { p := acking("v1", twenty); delete(p, order[2]); return p }(),
			now:     t0.Add(time.Minute), action: RolloutWaits, want: atStep2, leading: slices.Delete(slices.Clone(order[:5]), 2, 3),
			waiting: "4 of 4 proxies have not accepted"},
		{name: "every proxy of the step left: its proxies are chosen again, and bake again",
			policy: canary, state: progressing(0, t0, twenty, 1), target: "v2", proxies: acking("v1", order[1:]), now: t0.Add(time.Hour),
			action: RolloutWaits, want: progressing(0, t0.Add(time.Hour), order[1:], 1), leading: order[1:2],
			waiting: "step 1 of 3: its proxies left; version v2 is served to 1 of 19 proxies: " + order[1] + " instead"},
		{name: "no proxy: a rollout starts with none leading, and says so once it has some",
			policy: canary, state: complete("v1"), target: "v2", now: t0,
			action: RolloutStarts, want: progressing(0, t0, nil, 0)},
		{name: "proxies known at last: the first step's are chosen, and the start is told",
			policy: canary, state: progressing(0, t0, nil, 0), target: "v2", proxies: acking("v1", twenty), now: t0.Add(time.Minute),
			action: RolloutWaits, want: progressing(0, t0.Add(time.Minute), twenty, 1), leading: order[:1], events: "RolloutStarted",
			waiting: "step 1 of 3: version v2 is served to 1 of 20 proxies"},
		{name: "no proxy: the step waits",
			policy: canary, state: progressing(0, t0, nil, 0), target: "v2", now: t0.Add(time.Hour),
			action: RolloutWaits, want: progressing(0, t0, nil, 0), waiting: "step 1 of 3: no proxy of the fleet is known to be connected yet"},
		{name: "one proxy leads the first step",
			policy: canary, state: complete("v1"), target: "v2", proxies: acking("v1", twenty[:1]), now: t0,
			action: RolloutStarts, want: progressing(0, t0, twenty[:1], 1), leading: twenty[:1], events: "RolloutStarted"},
		{name: "one proxy: once it accepted and baked, the later steps add nobody and the rollout completes",
			policy: canary, state: progressing(0, t0, twenty[:1], 1), target: "v2", proxies: acking("v2", twenty[:1]), now: t0.Add(time.Minute),
			action: RolloutCompletes, want: complete("v2"), leading: twenty[:1], events: "RolloutCompleted"},
		{name: "a recorded step below the first is the first",
			policy: canary, state: func() Rollout { r := progressing(0, t0, twenty, 1); r.Step = -3; return r }(), target: "v2",
			proxies: acking("v1", twenty), now: t0.Add(time.Hour),
			action: RolloutWaits, want: func() Rollout { r := progressing(0, t0, twenty, 1); r.Step = -3; return r }(), leading: order[:1],
			waiting: "step 1 of 3: 1 of 1 proxies have not accepted"},
		{name: "a recorded cut that does not parse leads nobody, and is chosen again",
			policy: canary, state: Rollout{Revision: "v2", Previous: "v1", Phase: RolloutProgressing, StepStarted: t0, Cut: "zz"},
			target: "v2", proxies: acking("v1", twenty), now: t0.Add(time.Hour),
			action: RolloutWaits, want: progressing(0, t0.Add(time.Hour), twenty, 1), leading: order[:1], waiting: "its proxies left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := json.Marshal(tt.state)
			in := RolloutInput{Policy: tt.policy, State: tt.state, Target: tt.target, Rollback: tt.rollback, Proxies: tt.proxies, Now: tt.now, Promote: tt.promote, Abort: tt.abort}
			d := StepRollout(in)
			if d.Action != tt.action {
				t.Errorf("action %s, want %s (waiting %q)", d.Action, tt.action, d.Waiting)
			}
			if !d.Rollout.equal(tt.want) {
				got, _ := json.Marshal(d.Rollout)
				want, _ := json.Marshal(tt.want)
				t.Errorf("rollout\n  %s\nwant\n  %s", got, want)
			}
			if d.Changed(tt.state) != !tt.state.equal(tt.want) {
				t.Errorf("Changed = %v", d.Changed(tt.state))
			}
			if after, _ := json.Marshal(tt.state); string(after) != string(before) {
				t.Errorf("StepRollout changed its input: %s, was %s", after, before)
			}
			if got := servedNew(d.Serve, tt.want.Revision); !slices.Equal(got, tt.leading) {
				t.Errorf("served %s: %v, want %v", tt.want.Revision, got, tt.leading)
			}
			for n, v := range d.Serve {
				if v != tt.want.Revision && v != tt.want.Previous {
					t.Errorf("%s is served %q", n, v)
				}
				if v != d.Rollout.Serves(n) {
					t.Errorf("%s is served %s, its recorded step says %s", n, v, d.Rollout.Serves(n))
				}
			}
			if len(d.Serve) != len(tt.proxies) {
				t.Errorf("%d proxies served, %d connected", len(d.Serve), len(tt.proxies))
			}
			if !strings.Contains(d.Waiting, tt.waiting) || (tt.waiting == "") != (d.Waiting == "") {
				t.Errorf("waiting %q, want %q", d.Waiting, tt.waiting)
			}
			if got := reasons(d.Events); got != tt.events {
				t.Errorf("events %q, want %q", got, tt.events)
			}
			for _, e := range d.Events {
				if e.Warning != (e.Reason == ReasonRolloutAborted) {
					t.Errorf("event %s: warning %v", e.Reason, e.Warning)
				}
			}
		})
	}
}

// The events and messages of a rollout name the proxies, the step and, on
// an abort, the proxy and its error_detail.
func TestRolloutMessages(t *testing.T) {
	nodes := fleetNodes(20)
	order := byHash(nodes)
	d := StepRollout(RolloutInput{Policy: canary, State: progressing(0, t0, nodes, 1), Target: "v2",
		Proxies: acking("v2", nodes), Now: t0.Add(time.Minute)})
	leading := slices.Sorted(slices.Values(order[:5])) // named in the order of their node ids
	if want := fmt.Sprintf("version v2 is served to 5 of 20 proxies (25%%): %s, %s, %s and 2 more (step 2 of 3)",
		leading[0], leading[1], leading[2]); d.Events[0].Message != want {
		t.Errorf("promotion event %q, want %q", d.Events[0].Message, want)
	}
	p := acking("v1", nodes)
	p[order[0]] = ProxyAnswer{Nacked: "v2", Detail: strings.Repeat("x", 3*MaxDetail)}
	d = StepRollout(RolloutInput{Policy: canary, State: progressing(0, t0, nodes, 1), Target: "v2", Proxies: p, Now: t0})
	if len(d.Rollout.Aborted.Detail) > MaxDetail {
		t.Errorf("a NACK's detail is recorded whole: %d bytes", len(d.Rollout.Aborted.Detail))
	}
	p[order[0]] = ProxyAnswer{Nacked: "v2", Detail: "route web: unknown cluster web-v2"}
	d = StepRollout(RolloutInput{Policy: canary, State: progressing(0, t0, nodes, 1), Target: "v2", Proxies: p, Now: t0})
	if want := "proxy " + order[0] + " rejected version v2 at step 1 (route web: unknown cluster web-v2): every proxy is served version v1 again"; d.Events[0].Message != want {
		t.Errorf("abort event %q, want %q", d.Events[0].Message, want)
	}
}

// decideRecorded decides as a replica that knows nothing but what is
// recorded: the state is written as JSON and read back.
func decideRecorded(t *testing.T, in RolloutInput) RolloutDecision {
	t.Helper()
	b, err := json.Marshal(in.State)
	if err != nil {
		t.Fatal(err)
	}
	var fresh Rollout
	if err := json.Unmarshal(b, &fresh); err != nil {
		t.Fatal(err)
	}
	in.State = fresh
	return StepRollout(in)
}

// fleetSim is a fleet whose proxies answer what they are served: they
// accept it, except a version in rejects. seen records every version each
// proxy was ever served.
type fleetSim struct {
	nodes   []string
	rejects map[string]bool
	answers map[string]ProxyAnswer
	seen    map[string]map[string]bool
}

func newFleetSim(nodes []string, version string) *fleetSim {
	f := &fleetSim{nodes: nodes, answers: acking(version, nodes), seen: map[string]map[string]bool{}, rejects: map[string]bool{}}
	for _, n := range nodes {
		f.seen[n] = map[string]bool{version: true}
	}
	return f
}

func (f *fleetSim) serve(r Rollout) {
	for _, n := range f.nodes {
		v := r.Serves(n)
		f.seen[n][v] = true
		if f.rejects[v] {
			f.answers[n] = ProxyAnswer{Acked: f.answers[n].Acked, Nacked: v, Detail: "rejected " + v}
		} else {
			f.answers[n] = ProxyAnswer{Acked: v, Nacked: f.answers[n].Nacked, Detail: f.answers[n].Detail}
		}
	}
}

// A rollout of 20 proxies, 1 → 25% → 100% with a minute's bake, decided
// every 10 seconds, every decision also made by a replica that knows only
// what is recorded: at each step exactly the chosen proxies are served the
// new revision, no step is skipped or begun again, and each bakes a minute.
func TestRolloutWalk(t *testing.T) {
	nodes := fleetNodes(20)
	order := byHash(nodes)
	f := newFleetSim(nodes, "v1")
	state := Rollout{Revision: "v1", Phase: RolloutComplete}
	var steps []int
	var started []time.Time
	now := t0
	for tick := 0; tick < 100 && !(tick > 0 && state.Phase == RolloutComplete); tick++ {
		in := RolloutInput{Policy: canary, State: state, Target: "v2", Proxies: f.answers, Now: now}
		d := StepRollout(in)
		standby := decideRecorded(t, in)
		if !reflect.DeepEqual(d.Serve, standby.Serve) || d.Action != standby.Action || !d.Rollout.equal(standby.Rollout) || d.Waiting != standby.Waiting {
			t.Fatalf("at %s the leader decided %s %+v, a replica from the record %s %+v", now, d.Action, d.Rollout, standby.Action, standby.Rollout)
		}
		state = d.Rollout
		if state.Phase == RolloutProgressing && (len(steps) == 0 || steps[len(steps)-1] != state.Step) {
			steps = append(steps, state.Step)
			started = append(started, state.StepStarted)
			want := []int{1, 5, 20}[state.Step]
			if got := servedNew(d.Serve, "v2"); !slices.Equal(got, order[:want]) {
				t.Fatalf("step %d serves v2 to %v, want the first %d by hash", state.Step+1, got, want)
			}
		}
		f.serve(state)
		now = now.Add(10 * time.Second)
	}
	if state.Phase != RolloutComplete || state.Revision != "v2" {
		t.Fatalf("the rollout ended %+v", state)
	}
	if !slices.Equal(steps, []int{0, 1, 2}) {
		t.Errorf("steps %v, want 0 1 2", steps)
	}
	for i := 1; i < len(started); i++ {
		if bake := started[i].Sub(started[i-1]); bake < canary.Bake {
			t.Errorf("step %d baked %s", i, bake)
		}
	}
}

// One NACK from the proxy of the first step returns it to the old revision,
// and the others never saw the new one; the rollout is aborted.
func TestRolloutNACKWalk(t *testing.T) {
	nodes := fleetNodes(20)
	order := byHash(nodes)
	f := newFleetSim(nodes, "v1")
	f.rejects["v2"] = true
	state := Rollout{Revision: "v1", Phase: RolloutComplete}
	now := t0
	for tick := 0; tick < 10; tick++ {
		d := StepRollout(RolloutInput{Policy: canary, State: state, Target: "v2", Proxies: f.answers, Now: now})
		state = d.Rollout
		f.serve(state)
		now = now.Add(10 * time.Second)
	}
	if state.Phase != RolloutAborted || state.Aborted.Proxy != order[0] || state.Aborted.Detail != "rejected v2" {
		t.Fatalf("the rollout is %+v", state)
	}
	for _, n := range nodes {
		if got := state.Serves(n); got != "v1" {
			t.Errorf("%s is served %s after the abort", n, got)
		}
		if f.seen[n]["v2"] != (n == order[0]) {
			t.Errorf("%s saw v2: %v", n, f.seen[n]["v2"])
		}
	}
}

// A leader fails over in the middle of a baking step: the replica that
// takes over, from the recorded state, neither begins the step again nor
// skips its bake; a replica that restarts serves every proxy as before.
func TestRolloutFailover(t *testing.T) {
	nodes := fleetNodes(20)
	state := progressing(1, t0, nodes, 5)
	answers := answering(state, nodes)
	recorded, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	var restored Rollout
	if err := json.Unmarshal(recorded, &restored); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(slices.Clone(nodes), "a-proxy-not-seen-before") {
		if restored.Serves(n) != state.Serves(n) {
			t.Errorf("after a restart %s is served %s, before %s", n, restored.Serves(n), state.Serves(n))
		}
	}
	for _, tt := range []struct {
		at     time.Duration
		action RolloutAction
	}{
		{-time.Second, RolloutWaits},        // a standby whose clock is behind waits
		{30 * time.Second, RolloutWaits},    // the step is not skipped
		{time.Minute - 1, RolloutWaits},     //
		{time.Minute, RolloutPromotes},      // nor begun again: its bake counts from the recorded start
		{10 * time.Minute, RolloutPromotes}, //
	} {
		in := RolloutInput{Policy: canary, State: restored, Target: "v2", Proxies: answers, Now: t0.Add(tt.at)}
		d := StepRollout(in)
		leader := StepRollout(RolloutInput{Policy: canary, State: state, Target: "v2", Proxies: answers, Now: t0.Add(tt.at)})
		if d.Action != tt.action || !d.Rollout.equal(leader.Rollout) || !reflect.DeepEqual(d.Serve, leader.Serve) {
			t.Errorf("at +%s the standby decided %s %+v, want %s, as the leader would: %+v", tt.at, d.Action, d.Rollout, tt.action, leader.Rollout)
		}
		if d.Action == RolloutWaits && d.RecheckAfter != t0.Add(time.Minute).Sub(t0.Add(tt.at)) {
			t.Errorf("at +%s recheck after %s", tt.at, d.RecheckAfter)
		}
	}
}

// The recorded state is small, and reads back as it was written.
func TestRolloutJSON(t *testing.T) {
	r := Rollout{Revision: "e30bc96fb781677a", Previous: "6d73c0ee12345678", Phase: RolloutAborted, Step: 1,
		StepStarted: t0.Add(1500 * time.Millisecond), Cut: "0123456789abcdef", PromotedByHand: true,
		Aborted: &RolloutAbort{Proxy: "edge-5d8c7-00", Detail: "bad route"}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Rollout
	if err := json.Unmarshal(b, &back); err != nil || !back.equal(r) {
		t.Errorf("read back %+v (%v), wrote %s", back, err, b)
	}
	done, _ := json.Marshal(Rollout{Revision: "e30bc96fb781677a", Phase: RolloutComplete})
	if string(done) != `{"revision":"e30bc96fb781677a","phase":"Complete"}` {
		t.Errorf("a complete rollout is recorded as %s", done)
	}
}

// What a decision costs the leader, a step baking with every proxy of it
// accepted, and what choosing the revision of one proxy costs a replica.
func BenchmarkStepRollout(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		nodes := fleetNodes(n)
		state := progressing(1, t0, nodes, (n+3)/4)
		answers := answering(state, nodes)
		b.Run(fmt.Sprint(n, " proxies"), func(b *testing.B) {
			for range b.N {
				if d := StepRollout(RolloutInput{Policy: canary, State: state, Target: "v2", Proxies: answers, Now: t0}); d.Action != RolloutWaits {
					b.Fatal(d.Action)
				}
			}
		})
		b.Run(fmt.Sprint(n, " proxies, one proxy's revision"), func(b *testing.B) {
			for i := range b.N {
				_ = state.Serves(nodes[i%n])
			}
		})
	}
}

// Roll records in the decision's history the rollout of its served
// revision: none without a policy, or once complete; a history of an
// earlier release counts as complete at its served revision; a revision
// whose predecessor the history cannot serve goes to every proxy at once.
func TestRoll(t *testing.T) {
	policy := &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}}, Bake: time.Minute}
	proxies := map[string]ProxyAnswer{"pod-a": {Acked: "v1"}, "pod-b": {Acked: "v1"}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	settled := History{Current: "v1", Revisions: []Revision{rev("v1", true, "")}}
	tests := []struct {
		name   string
		prev   History
		policy *RolloutPolicy
		action RolloutAction
		phase  RolloutPhase // "" when the history records no rollout
	}{
		{"no policy: served to all", settled, nil, RolloutCompletes, ""},
		{"a policy: the first step", settled, policy, RolloutStarts, RolloutProgressing},
		{"nothing served before: served to all", History{}, policy, RolloutCompletes, ""},
		{"the predecessor was rejected: served to all", History{Current: "v1", Revisions: []Revision{rev("v1", false, "refused")}}, policy, RolloutCompletes, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.prev, ir("v2"), Acks{}, nil)
			rd := Roll(tc.prev, &d, RolloutInput{Policy: tc.policy, Proxies: proxies, Now: now})
			if rd.Action != tc.action {
				t.Errorf("action %s, want %s", rd.Action, tc.action)
			}
			switch r := d.History.Rollout; {
			case tc.phase == "" && r != nil:
				t.Errorf("the history records a rollout: %+v", *r)
			case tc.phase != "" && (r == nil || r.Phase != tc.phase || r.Revision != "v2" || r.Previous != "v1"):
				t.Errorf("the history records %+v, want v2 %s after v1", r, tc.phase)
			}
			if tc.phase == "" {
				return
			}
			if !d.Changed(tc.prev) || len(d.Events) == 0 {
				t.Errorf("changed %v, events %v", d.Changed(tc.prev), d.Events)
			}
			previous, ok := d.History.Staged()
			if !ok || previous.Version != "v1" {
				t.Errorf("previous %+v (%v), want v1", previous, ok)
			}
			// The next decision, with nothing new, keeps the rollout as it is.
			next := Decide(d.History, ir("v2"), Acks{Connected: 2, Acked: 0}, nil)
			Roll(d.History, &next, RolloutInput{Policy: tc.policy, Proxies: proxies, Now: now})
			if next.Changed(d.History) {
				t.Errorf("a decision on nothing new changed the history: %v", next.History)
			}
		})
	}
}

// A proxy of the first step rejects A's change: the rollout is aborted,
// the rejection attributed to A and its change withheld, so that the
// fleet's next revision leaves it out and rolls B's change out.
func TestRollWithholdsWhatAbortedIt(t *testing.T) {
	A, B := clusters("a", "a1"), clusters("b", "b1")
	A2, B2 := clusters("a", "a1", "extra"), clusters("b", "b1", "b2")
	policy := &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	roll := func(h History, ir translate.IR, proxies map[string]ProxyAnswer) (Decision, RolloutDecision) {
		d := Decide(h, ir, Acks{}, nil)
		return d, Roll(h, &d, RolloutInput{Policy: policy, Proxies: proxies, Now: now})
	}
	v1 := translated(History{}, A, B)
	h, _ := roll(History{Fleet: "ns/edge"}, v1, nil)
	on := func(v string) map[string]ProxyAnswer {
		return map[string]ProxyAnswer{"pod-1": {Acked: v}, "pod-2": {Acked: v}, "pod-3": {Acked: v}}
	}
	v2 := translated(h.History, A2, B)
	d, rd := roll(h.History, v2, on(v1.Version))
	if rd.Action != RolloutStarts {
		t.Fatalf("A's change: %s", rd.Action)
	}
	answers := on(v1.Version)
	for node, v := range rd.Serve {
		if v == v2.Version {
			answers[node] = ProxyAnswer{Acked: v1.Version, Nacked: v2.Version, Detail: "cluster extra: unsupported", Type: resourcev3.ClusterType}
		}
	}
	d, rd = roll(d.History, v2, answers)
	if rd.Action != RolloutAborts || !slices.Equal(d.Withheld, []string{"ns/a"}) {
		t.Fatalf("after the first proxy rejected A's change: %s, withheld %v", rd.Action, d.Withheld)
	}
	if w := d.History.Withheld["ns/a"]; !w.Rollout || w.Version != v2.Version || w.Detail != "cluster extra: unsupported" || w.Node == "" {
		t.Errorf("withheld %+v", w)
	}
	// B's change rolls out, without A's.
	v3 := translated(d.History, A2, B2)
	if want := translated(History{}, A, B2); v3.Version != want.Version {
		t.Fatalf("with A's change withheld, the fleet's content is %s, want A's before and B's new: %s", v3.Version, want.Version)
	}
	if _, rd = roll(d.History, v3, on(v1.Version)); rd.Action != RolloutStarts || rd.Rollout.Previous != v1.Version {
		t.Errorf("B's change: %s from %s", rd.Action, rd.Rollout.Previous)
	}
}
