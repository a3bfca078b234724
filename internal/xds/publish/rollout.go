package publish

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
)

// A progressive rollout serves a fleet's new revision to a few of its
// proxies first, then to more, step by step, and to all of them last; one
// rejection sends every proxy back to the revision they ran before.
//
// The invariant: every replica serves each proxy the revision its step
// says, and that is decided only from what is recorded. The revision a proxy
// is served is a function of the recorded Rollout and the proxy's node id
// alone (Rollout.Serves): no replica keeps anything of a rollout in memory,
// so a replica that restarts, or a standby that takes over from the leader,
// serves what the others serve. Only the leader moves a rollout on, with
// StepRollout: the recorded Rollout, the policy, the proxies' answers (as
// every replica reported them) and the time go in; the next Rollout, to be
// recorded, comes out. Time is an input like the others, so the same inputs
// give the same decision on any replica.
//
// Which proxies lead is decided by a hash of their node id: the proxies are
// ordered by it, and a step takes the first ones in that order, so the same
// proxies lead every rollout and each step's proxies include the previous
// step's. A step records where its proxies end in that order (Rollout.Cut),
// not who they were: a proxy that joins during a step leads when its hash
// falls within the step, and is served the previous revision otherwise; a
// proxy that leaves takes nothing with it.

// RolloutStep is one step of a rollout: how many of the fleet's connected
// proxies are served the new revision, as a number (Proxies) or a share
// (Percent). A share is rounded up; a step serves at least one proxy when
// the fleet has any, and never more than the fleet has.
type RolloutStep struct {
	Proxies int32
	Percent int32
}

// RolloutPolicy is a fleet's rollout policy. After its last step, every
// proxy is served the new revision: a last step of 100 percent bakes that
// too before the rollout completes.
type RolloutPolicy struct {
	Steps []RolloutStep
	// Bake is how long a step's proxies run the new revision, all of them
	// having accepted it, before the next step.
	Bake time.Duration
	// Analysis, when set, are the thresholds a step's proxies are held to
	// once they all accepted the revision: the step is judged by what they
	// served against what the baseline served (analysis.Judge). Nil: the
	// step is judged by its proxies' acceptance and its bake alone.
	Analysis *analysis.Thresholds
	// Silence is how long since a judged step began its proxies may have
	// reported no stats before that aborts the step, however short the
	// bake (analysis.Input): a few of the proxies' flush intervals.
	Silence time.Duration
}

// RolloutPhase is where a rollout stands.
type RolloutPhase string

const (
	// RolloutProgressing: the proxies of the step under way are served the
	// new revision, the others the previous one.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutComplete: every proxy is served the revision.
	RolloutComplete RolloutPhase = "Complete"
	// RolloutAborted: the revision was rejected or aborted by hand; every
	// proxy is served the previous revision, and the revision is not rolled
	// out again until the content changes.
	RolloutAborted RolloutPhase = "Aborted"
)

// Rollout is the recorded state of a fleet's rollout, kept in the fleet's
// history: small, and the same on every replica that reads it.
type Rollout struct {
	// Revision is the version rolled out, or, once complete, served to all.
	Revision string `json:"revision"`
	// Previous is the version every proxy outside the step is served: the
	// last one rolled out to all. Empty once complete.
	Previous string       `json:"previous,omitempty"`
	Phase    RolloutPhase `json:"phase"`
	// Step is the index of the step under way in the policy's steps (0 is
	// the first).
	Step int `json:"step,omitempty"`
	// StepStarted is when the step under way began; its bake counts from
	// then.
	StepStarted time.Time `json:"stepStarted,omitzero"`
	// Cut is the step's end in the proxies' hash order (16 hexadecimal
	// digits): a proxy whose hash is at most Cut leads. Empty: none leads.
	Cut string `json:"cut,omitempty"`
	// PromotedByHand: the step under way was promoted by hand and does not
	// bake; it still waits for its proxies to accept the revision.
	PromotedByHand bool `json:"promotedByHand,omitempty"`
	// Aborted says why an aborted rollout was aborted.
	Aborted *RolloutAbort `json:"aborted,omitempty"`
	// Verdicts are the verdicts of the steps judged by their proxies'
	// figures (RolloutPolicy.Analysis) that passed or aborted, in order;
	// at most one for each of the policy's steps.
	Verdicts []StepVerdict `json:"verdicts,omitempty"`
}

// StepVerdict is the verdict of a step judged by its proxies' figures.
type StepVerdict struct {
	// Step is the index of the step in the policy's steps.
	Step    int              `json:"step"`
	Outcome analysis.Outcome `json:"outcome"`
	// Proxies are the figures of the step's proxies together, Baseline
	// those of the proxies on the previous revision, in the scopes judged.
	Proxies  StepFigures `json:"proxies"`
	Baseline StepFigures `json:"baseline"`
	// Finding is what decided an abort, or why a step waits, as a
	// sentence; empty for a pass, and for a step that waits only for its
	// bake.
	Finding string `json:"finding,omitempty"`
}

// StepFigures are a set of proxies' figures together, in the scopes
// judged: the number of requests, and the share of them with a 5xx status,
// reset, or whose upstream connection failed (0 to 1), and the 99th
// percentile of their duration in milliseconds (0 when there was none).
type StepFigures struct {
	Proxies             int     `json:"proxies"`
	Requests            uint64  `json:"requests"`
	ErrorRatio          float64 `json:"5xxRatio,omitempty"`
	ResetRatio          float64 `json:"resetRatio,omitempty"`
	ConnectFailureRatio float64 `json:"connectFailureRatio,omitempty"`
	P99                 float64 `json:"p99Ms,omitempty"`
}

// String reads "12 requests of 3 proxies, 0.50% 5xx, p99 3.2ms".
func (f StepFigures) String() string {
	proxies := "proxies"
	if f.Proxies == 1 {
		proxies = "proxy"
	}
	s := fmt.Sprintf("%d requests of %d %s, %.2f%% 5xx", f.Requests, f.Proxies, proxies, 100*f.ErrorRatio)
	if f.ResetRatio > 0 {
		s += fmt.Sprintf(", %.2f%% reset", 100*f.ResetRatio)
	}
	if f.ConnectFailureRatio > 0 {
		s += fmt.Sprintf(", %.2f%% failed connections", 100*f.ConnectFailureRatio)
	}
	if f.Requests > 0 {
		s += fmt.Sprintf(", p99 %.1fms", f.P99)
	}
	return s
}

// RolloutAbort is why a rollout was aborted.
type RolloutAbort struct {
	// Proxy is the node id of the proxy that rejected the revision, or
	// whose figures aborted the step.
	Proxy string `json:"proxy,omitempty"`
	// Detail is its error_detail, cut to MaxDetail, and Type the type URL
	// it rejected. For an abort on the proxy's figures, Detail says them
	// as a sentence.
	Detail string `json:"detail"`
	Type   string `json:"type,omitempty"`
	// ByHand: aborted by a person, not by a rejection.
	ByHand bool `json:"byHand,omitempty"`
	// Scope, Metric, Value, Threshold and Baseline are set for an abort on
	// the proxy's figures (analysis.Finding): the scope ("" for all those
	// judged), the metric, its value, the threshold it passed, and the
	// baseline's value when the threshold is relative to it.
	Scope     string  `json:"scope,omitempty"`
	Metric    string  `json:"metric,omitempty"`
	Value     float64 `json:"value,omitempty"`
	Threshold float64 `json:"threshold,omitempty"`
	Baseline  float64 `json:"baseline,omitempty"`
}

// Serves returns the version served to the proxy of node id node; empty
// when nothing was ever rolled out.
func (r Rollout) Serves(node string) string {
	switch r.Phase {
	case RolloutProgressing:
		if r.leads(node) {
			return r.Revision
		}
		return r.Previous
	case RolloutAborted:
		return r.Previous
	}
	return r.Revision
}

// Key is what Serves depends on, as one string: two rollouts of one key
// serve every proxy alike.
func (r Rollout) Key() string {
	return strings.Join([]string{r.Revision, r.Previous, string(r.Phase), r.Cut}, "/")
}

// leads reports whether node is among the proxies of the step under way. A Cut
// that does not parse leads nobody: every proxy keeps the previous revision
// until the leader chooses the step's proxies again.
func (r Rollout) leads(node string) bool {
	cut, err := strconv.ParseUint(r.Cut, 16, 64)
	return r.Phase == RolloutProgressing && err == nil && rank(node) <= cut
}

// settled is the version every proxy outside a rollout runs.
func (r Rollout) settled() string {
	if r.Phase == RolloutComplete {
		return r.Revision
	}
	return r.Previous
}

func (r Rollout) clone() Rollout {
	if r.Aborted != nil {
		a := *r.Aborted
		r.Aborted = &a
	}
	r.Verdicts = slices.Clone(r.Verdicts)
	return r
}

// Staged returns the previous revision, which the proxies outside h's
// rollout are served, and whether there is one: while a rollout of Current
// is under way or aborted, and the history keeps that revision's content.
// (Its name is older than the glossary's word, previous.)
func (h History) Staged() (*Revision, bool) {
	if h.Rollout == nil || h.Rollout.Phase == RolloutComplete || h.Rollout.Revision != h.Current {
		return nil, false
	}
	r := h.Find(h.Rollout.Previous)
	return r, r != nil && r.Rejected == ""
}

// Roll steps the rollout of d's served revision on, from the rollout
// recorded in prev (StepRollout), and records it
// in d's history: nil once every proxy is served the revision. Its events
// join d's. A history of an earlier release, which records no rollout,
// counts as one complete at its served revision. When the history does not
// keep the content of the revision every proxy ran before (it was rejected,
// or pruned), there is nothing to serve the other proxies, and the
// revision is served to all at once.
// The input's Policy, Proxies, Now and orders are the caller's; its
// State, Target and Rollback are set here.
func Roll(prev History, d *Decision, in RolloutInput) RolloutDecision {
	state := Rollout{}
	switch {
	case prev.Rollout != nil:
		state = prev.Rollout.clone()
	case prev.Current != "":
		state = Rollout{Revision: prev.Current, Phase: RolloutComplete}
	}
	if r := d.History.Find(state.settled()); r == nil || r.Rejected != "" {
		in.Policy = nil
	}
	in.State, in.Target, in.Rollback = state, d.History.Current, d.Action == RollBack
	if in.Policy != nil && in.Policy.Analysis != nil && state.Phase == RolloutProgressing && state.Revision == in.Target {
		if before, after := d.History.Find(state.Previous), d.History.Find(state.Revision); before != nil && after != nil {
			in.Touched = TouchedScopes(before.Configs, after.Configs)
		}
	}
	rd := StepRollout(in)
	d.History.Rollout = nil
	if rd.Rollout.Phase != RolloutComplete && d.History.Current != "" {
		r := rd.Rollout
		d.History.Rollout = &r
	}
	d.Events = append(d.Events, rd.Events...)
	if a := rd.Rollout.Aborted; rd.Action == RolloutAborts && !a.ByHand {
		d.withholdAborted(rd.Rollout, in.Touched)
	}
	return rd
}

// withholdAborted attributes the rejection that aborted r, the rollout of
// the served revision, to the EnvoyConfigs whose change it refused since
// the revision every proxy runs (r.Previous), and withholds their change,
// as Decide does when every proxy rejects a revision: the fleet's next
// revision leaves it out, and rolls out the other EnvoyConfigs' changes.
// An abort on a proxy's figures in a scope the change touched is
// attributed to the EnvoyConfigs whose change touched it (touched).
func (d *Decision) withholdAborted(r Rollout, touched Touched) {
	cur := d.History.Served()
	if cur == nil || cur.Version != r.Revision {
		return
	}
	rejected := *cur
	rejected.Rejected = r.Aborted.Detail
	acks := Acks{LastNACK: r.Aborted.Detail, LastNACKType: r.Aborted.Type, LastNACKNode: r.Aborted.Proxy}
	var names []string
	if by := touched[r.Aborted.Scope]; r.Aborted.Scope != "" && len(by) > 0 {
		names = d.History.withholdNamed(rejected, d.History.Find(r.Previous), acks, by)
	} else {
		names = d.History.withhold(rejected, d.History.Find(r.Previous), acks)
	}
	for _, name := range names {
		w := d.History.Withheld[name]
		w.Rollout, w.Analysis = true, r.Aborted.Metric != ""
		d.History.Withheld[name] = w
	}
	d.Withheld = append(d.Withheld, names...)
}

func (r Rollout) equal(o Rollout) bool {
	return r.Revision == o.Revision && r.Previous == o.Previous && r.Phase == o.Phase && r.Step == o.Step &&
		r.StepStarted.Equal(o.StepStarted) && r.Cut == o.Cut && r.PromotedByHand == o.PromotedByHand &&
		(r.Aborted == nil) == (o.Aborted == nil) && (r.Aborted == nil || *r.Aborted == *o.Aborted) &&
		slices.Equal(r.Verdicts, o.Verdicts)
}

// rank is a node id's place in the order of leadership.
func rank(node string) uint64 {
	sum := sha256.Sum256([]byte(node))
	return binary.BigEndian.Uint64(sum[:8])
}

func cutOf(rank uint64) string { return fmt.Sprintf("%016x", rank) }

// inOrder returns nodes, without repeats, in the order of leadership.
func inOrder(nodes []string) []string {
	type ranked struct {
		rank uint64
		node string
	}
	all := make([]ranked, len(nodes))
	for i, n := range nodes {
		all[i] = ranked{rank(n), n}
	}
	slices.SortFunc(all, func(a, b ranked) int { return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.node, b.node)) })
	out := make([]string, 0, len(all))
	for i, r := range all {
		if i == 0 || r.node != all[i-1].node {
			out = append(out, r.node)
		}
	}
	return out
}

// size is how many of n proxies the step serves.
func (s RolloutStep) size(n int) int {
	k := int64(s.Proxies)
	if s.Percent > 0 {
		k = (int64(s.Percent)*int64(n) + 99) / 100
	}
	return int(min(max(k, 1), int64(n)))
}

// sizeThrough is how many of n proxies step i serves: never fewer than an
// earlier step, so that each step's proxies include the previous step's.
func sizeThrough(steps []RolloutStep, i, n int) int {
	k := 0
	for _, s := range steps[:min(max(i, 0)+1, len(steps))] {
		k = max(k, s.size(n))
	}
	return k
}

// SelectProxies returns the proxies, of the fleet's nodes, that step i of
// steps serves the new revision: the first ones in the order of a hash of
// their node id. The result is in that order, and does not depend on the
// order of nodes.
func SelectProxies(steps []RolloutStep, i int, nodes []string) []string {
	ordered := inOrder(nodes)
	return ordered[:sizeThrough(steps, i, len(ordered))]
}

// cutFor is the Cut of step i over nodes: where its proxies end.
func cutFor(steps []RolloutStep, i int, nodes []string) string {
	selected := SelectProxies(steps, i, nodes)
	if len(selected) == 0 {
		return ""
	}
	return cutOf(rank(selected[len(selected)-1]))
}

// ProxyAnswer is what one proxy of the fleet last answered, on whichever
// replica it is connected to.
type ProxyAnswer struct {
	// Acked is the version it accepted for every type it asked for.
	Acked string `json:"acked,omitempty"`
	// Nacked is the version it last rejected, Detail its error_detail, and
	// Type the type URL it rejected.
	Nacked string `json:"nacked,omitempty"`
	Detail string `json:"detail,omitempty"`
	Type   string `json:"type,omitempty"`
	// Window is what the proxy served while it ran the version it answered
	// with, as the replica that receives its stats (internal/xds/stats)
	// reports it during a rollout: the leader judges the step by it
	// (analysis). Nil when that replica received no stats of the proxy.
	Window *Window `json:"window,omitempty"`
}

// Window is a proxy's figures since the replica that reports it began
// serving it the version of its answer in the rollout under way (from the
// proxy's first stats message after it accepted that version, which alone
// may hold the version before; or since the replica began receiving its
// stats, if later): a running total of the window, by scope.
type Window struct {
	// Reports counts the stats messages the proxy sent in the window: a
	// proxy with none is silent, and cannot pass a step.
	Reports uint64 `json:"reports"`
	// Scopes are its figures by scope (analysis.ScopeHTTP, analysis.ScopeCluster);
	// a scope that served no request in the window is left out.
	Scopes map[string]analysis.Figures `json:"scopes,omitempty"`
}

// RolloutOrder is a person's order to promote or abort a rollout. It names
// the revision, and for a promotion the step, it was given for: an order
// left in place promotes one step only, and never applies to a later
// revision.
type RolloutOrder struct {
	Revision string
	Step     int
}

// RolloutInput is what StepRollout decides from.
type RolloutInput struct {
	// Policy is the fleet's; nil: every proxy is served a new revision at once.
	Policy *RolloutPolicy
	// State is the recorded rollout; the zero Rollout when there is none.
	State Rollout
	// Target is the version the fleet is to be served (the published revision).
	Target string
	// Rollback: Target is served again because every proxy rejected the
	// revision served (Decide's RollBack). It is served to all at once.
	Rollback bool
	// Proxies are the fleet's connected proxies, on every replica, by node id.
	Proxies map[string]ProxyAnswer
	// Touched are the scopes the change rolled out touched (TouchedScopes):
	// a step judged by its proxies' figures is judged in those. Empty: in
	// every scope.
	Touched Touched
	Now     time.Time
	// Promote and Abort are the orders given by hand, if any.
	Promote, Abort *RolloutOrder
}

// RolloutAction is what a rollout decision does.
type RolloutAction string

const (
	// RolloutIdle: no rollout is under way, and none starts.
	RolloutIdle RolloutAction = "Idle"
	// RolloutWaits: the step waits; RolloutDecision.Waiting says why.
	RolloutWaits RolloutAction = "Wait"
	// RolloutStarts: a new revision is served to the first step's proxies.
	RolloutStarts RolloutAction = "Start"
	// RolloutPromotes: the next step's proxies are served the revision too.
	RolloutPromotes RolloutAction = "Promote"
	// RolloutCompletes: every proxy is served the revision.
	RolloutCompletes RolloutAction = "Complete"
	// RolloutAborts: every proxy is served the previous revision again.
	RolloutAborts RolloutAction = "Abort"
)

// Event reasons of rollouts.
const (
	ReasonRolloutStarted    = examplev1.EnvoyEventRolloutStarted
	ReasonRolloutSuperseded = examplev1.EnvoyEventRolloutSuperseded
	ReasonRolloutPromoted   = examplev1.EnvoyEventRolloutPromoted
	ReasonRolloutCompleted  = examplev1.EnvoyEventRolloutCompleted
	ReasonRolloutAborted    = examplev1.EnvoyEventRolloutAborted
)

// RolloutDecision is what StepRollout decided.
type RolloutDecision struct {
	Action RolloutAction
	// Rollout is the state to record.
	Rollout Rollout
	// Serve is the version served to each connected proxy, by node id.
	Serve map[string]string
	// Waiting says why a step that is under way is not promoted yet.
	Waiting string
	// RecheckAfter, when not zero, is when the step's bake ends, or a judged
	// step's silent proxies would abort it: decide again then. BakeEnds is
	// when the bake ends.
	RecheckAfter time.Duration
	BakeEnds     time.Time
	// Superseded is the revision whose rollout a new one cut short.
	Superseded string
	Events     []Event
	// Judged, when the step was judged by its proxies' figures, is its
	// verdict and the figures it was judged by.
	Judged *StepVerdict
}

// Changed reports whether the rollout must be recorded.
func (d RolloutDecision) Changed(prev Rollout) bool { return !d.Rollout.equal(prev) }

// StepRollout decides how a fleet's rollout goes on.
//
//  1. A new target starts a rollout at the first step, served to that
//     step's proxies; every other proxy keeps the version it runs, the last
//     one rolled out to all (Previous). A rollout under way is superseded:
//     its proxies go back to Previous, or on to the new revision when they
//     lead the first step. A target that is Previous ends the rollout with
//     every proxy on it. With no policy, nothing rolled out before, or a
//     rollback, the target is served to every proxy at once.
//  2. A rollout is aborted, every proxy back on Previous, when a person
//     aborts it or when any proxy rejects its revision; the revision, the
//     proxy and its error_detail are recorded, and the revision is not
//     rolled out again until the target changes.
//  3. A step is promoted when every connected proxy of the step accepted
//     the revision and its bake time passed since it began. With analysis
//     in the policy, a step whose proxies all accepted is judged instead by
//     what they served (analysis.Judge; see judgeStep): the step's proxies'
//     windows against the baseline's (the connected proxies that answer
//     Previous), in the scopes the change touched (Touched), over the time
//     since the step began, with the policy's bake. A Pass promotes it; an
//     Abort aborts the rollout as a rejection does, recording the finding
//     that decided it; a Wait waits, and Waiting says why, with the
//     figures. A step that passed or aborted records its verdict
//     (Rollout.Verdicts); one that waits records nothing new. A promotion
//     by hand skips the bake and the analysis, never the proxies'
//     acceptance. A step that would add no proxy is passed over; after the
//     last step the rollout completes.
//  4. When every proxy of a step has left while others are connected, the
//     step's proxies are chosen again among them, and its bake starts again.
func StepRollout(in RolloutInput) RolloutDecision {
	s := in.State
	if s.Aborted != nil {
		a := *s.Aborted
		s.Aborted = &a
	}
	nodes := make([]string, 0, len(in.Proxies))
	for node := range in.Proxies {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes)
	var steps []RolloutStep
	if in.Policy != nil {
		steps = in.Policy.Steps
	}
	now := in.Now.UTC()

	d := RolloutDecision{Action: RolloutIdle}
	switch {
	case in.Target == "" || in.Target == s.Revision || s.Phase == RolloutAborted && in.Target == s.Previous:
		// The same target: the rollout under way, if any, goes on.
	case in.Target == s.settled() || len(steps) == 0 || s.settled() == "" || in.Rollback:
		// Nothing to roll out step by step: the target is served to all.
		if s.Phase == RolloutProgressing {
			d.Superseded = s.Revision
			d.Events = append(d.Events, Event{Reason: ReasonRolloutSuperseded, Message: fmt.Sprintf(
				"the rollout of version %s is superseded by version %s, which every proxy is served", s.Revision, in.Target)})
		}
		s = Rollout{Revision: in.Target, Phase: RolloutComplete}
		d.Action = RolloutCompletes
		return d.finish(s, nodes)
	default:
		prev := s.settled()
		if s.Phase == RolloutProgressing {
			d.Superseded = s.Revision
			d.Events = append(d.Events, Event{Reason: ReasonRolloutSuperseded, Message: fmt.Sprintf(
				"the rollout of version %s is superseded by version %s, from the first step", s.Revision, in.Target)})
		}
		s = Rollout{Revision: in.Target, Previous: prev, Phase: RolloutProgressing, StepStarted: now, Cut: cutFor(steps, 0, nodes)}
		d.Action = RolloutStarts
		if s.Cut != "" { // else its event comes once its proxies are chosen (below)
			d.Events = append(d.Events, Event{Reason: ReasonRolloutStarted, Message: fmt.Sprintf(
				"version %s is served to %s; the other proxies keep version %s", s.Revision, stepProxies(s, 0, steps, nodes), prev)})
		}
		return d.finish(s, nodes)
	}
	if s.Phase != RolloutProgressing {
		return d.finish(s, nodes)
	}
	if len(steps) == 0 {
		s = Rollout{Revision: s.Revision, Phase: RolloutComplete}
		d.Action = RolloutCompletes
		d.Events = append(d.Events, Event{Reason: ReasonRolloutCompleted, Message: fmt.Sprintf(
			"the fleet has no rollout policy any more: version %s is served to every proxy", s.Revision)})
		return d.finish(s, nodes)
	}
	// A policy edited during a rollout keeps its step, or its last one.
	step := max(min(s.Step, len(steps)-1), 0)

	// Aborted, by hand or by a rejection.
	var abort *RolloutAbort
	if o := in.Abort; o != nil && o.Revision == s.Revision {
		abort = &RolloutAbort{Detail: "aborted by hand", ByHand: true}
	} else {
		for _, node := range nodes {
			if a := in.Proxies[node]; a.Nacked == s.Revision {
				abort = &RolloutAbort{Proxy: node, Detail: Truncate(cmp.Or(a.Detail, "no error_detail given")), Type: a.Type}
				break
			}
		}
	}
	aborts := func(abort *RolloutAbort, msg string) RolloutDecision {
		s.Phase, s.Aborted, s.Cut, s.PromotedByHand = RolloutAborted, abort, "", false
		d.Action = RolloutAborts
		d.Events = append(d.Events, Event{Warning: true, Reason: ReasonRolloutAborted, Message: fmt.Sprintf(
			"%s: every proxy is served version %s again", msg, s.Previous)})
		return d.finish(s, nodes)
	}
	if abort != nil {
		msg := fmt.Sprintf("the rollout of version %s was aborted by hand at step %d", s.Revision, step+1)
		if !abort.ByHand {
			msg = fmt.Sprintf("proxy %s rejected version %s at step %d (%s)", abort.Proxy, s.Revision, step+1, abort.Detail)
		}
		return aborts(abort, msg)
	}

	if o := in.Promote; o != nil && o.Revision == s.Revision && o.Step == s.Step {
		s.PromotedByHand = true
	}

	var leading, pending []string
	for _, node := range nodes {
		if s.leads(node) {
			leading = append(leading, node)
			if in.Proxies[node].Acked != s.Revision {
				pending = append(pending, node)
			}
		}
	}
	switch {
	case len(nodes) == 0:
		d.Action, d.Waiting = RolloutWaits, fmt.Sprintf("step %d of %d: no proxy of the fleet is known to be connected yet", step+1, len(steps))
		return d.finish(s, nodes)
	case len(leading) == 0 && s.Cut == "" && step == 0:
		// Started before any proxy was known: its proxies are chosen now.
		s.Cut, s.StepStarted = cutFor(steps, step, nodes), now
		who := stepProxies(s, step, steps, nodes)
		d.Action, d.Waiting = RolloutWaits, fmt.Sprintf("step %d of %d: version %s is served to %s", step+1, len(steps), s.Revision, who)
		d.Events = append(d.Events, Event{Reason: ReasonRolloutStarted, Message: fmt.Sprintf(
			"version %s is served to %s; the other proxies keep version %s", s.Revision, who, s.Previous)})
		return d.finish(s, nodes)
	case len(leading) == 0:
		s.Cut, s.StepStarted = cutFor(steps, step, nodes), now
		d.Action, d.Waiting = RolloutWaits, fmt.Sprintf("step %d of %d: its proxies left; version %s is served to %s instead",
			step+1, len(steps), s.Revision, stepProxies(s, step, steps, nodes))
		return d.finish(s, nodes)
	case len(pending) > 0:
		d.Action, d.Waiting = RolloutWaits, fmt.Sprintf("step %d of %d: %d of %d proxies have not accepted version %s yet: %s",
			step+1, len(steps), len(pending), len(leading), s.Revision, names(pending))
		return d.finish(s, nodes)
	}
	left := s.StepStarted.Add(in.Policy.Bake).Sub(now)
	var passed string // the judged step's figures, for the promotion's event
	switch {
	case s.PromotedByHand:
	case in.Policy.Analysis != nil:
		v := judgeStep(in, s, step, leading, nodes, now)
		d.Judged = &v.StepVerdict
		switch v.Outcome {
		case analysis.Abort:
			f := v.finding
			s.Verdicts = keepVerdicts(s.Verdicts, v.StepVerdict, len(steps))
			d.Judged = &s.Verdicts[len(s.Verdicts)-1]
			return aborts(&RolloutAbort{Proxy: f.Proxy, Detail: v.Finding, Scope: f.Scope, Metric: string(f.Metric),
				Value: f.Value, Threshold: f.Threshold, Baseline: f.Baseline},
				fmt.Sprintf("version %s failed its analysis at step %d: %s (the step's %s; the baseline's %s)",
					s.Revision, step+1, v.Finding, v.Proxies, v.Baseline))
		case analysis.Wait:
			why := cmp.Or(v.Finding, fmt.Sprintf("baking, %s left", left.Round(time.Second)))
			d.Action, d.Waiting = RolloutWaits, fmt.Sprintf("step %d of %d: %s (the step's %s; the baseline's %s)",
				step+1, len(steps), why, v.Proxies, v.Baseline)
			if left > 0 {
				d.RecheckAfter, d.BakeEnds = left, s.StepStarted.Add(in.Policy.Bake)
			} else if silence := s.StepStarted.Add(in.Policy.Silence).Sub(now); silence > 0 {
				d.RecheckAfter = silence
			}
			return d.finish(s, nodes)
		}
		s.Verdicts = keepVerdicts(s.Verdicts, v.StepVerdict, len(steps))
		d.Judged = &s.Verdicts[len(s.Verdicts)-1]
		passed = fmt.Sprintf("; step %d passed its analysis: the step's %s, the baseline's %s", step+1, v.Proxies, v.Baseline)
	case left > 0:
		d.Action, d.Waiting = RolloutWaits, fmt.Sprintf("step %d of %d: baking, %s left", step+1, len(steps), left.Round(time.Second))
		d.RecheckAfter, d.BakeEnds = left, s.StepStarted.Add(in.Policy.Bake)
		return d.finish(s, nodes)
	}

	// Promoted: on to the first later step that adds a proxy, or complete.
	for i := step + 1; i < len(steps); i++ {
		// The step's proxies are the first in the order of leadership, as
		// those of the step under way are: more of them include all of those.
		if len(SelectProxies(steps, i, nodes)) > len(leading) {
			s.Step, s.Cut, s.StepStarted, s.PromotedByHand = i, cutFor(steps, i, nodes), now, false
			d.Action = RolloutPromotes
			d.Events = append(d.Events, Event{Reason: ReasonRolloutPromoted, Message: fmt.Sprintf(
				"version %s is served to %s (step %d of %d)%s", s.Revision, stepProxies(s, i, steps, nodes), i+1, len(steps), passed)})
			return d.finish(s, nodes)
		}
	}
	s = Rollout{Revision: s.Revision, Phase: RolloutComplete}
	d.Action = RolloutCompletes
	d.Events = append(d.Events, Event{Reason: ReasonRolloutCompleted, Message: fmt.Sprintf(
		"version %s is served to every proxy%s", s.Revision, passed)})
	return d.finish(s, nodes)
}

// judged is a step's verdict as StepRollout records it, and the finding
// that decided it.
type judged struct {
	StepVerdict
	finding analysis.Finding
}

// judgeStep judges step, whose proxies (leading) all accepted s.Revision,
// by their windows against the baseline's: the connected proxies outside
// the step that answer s.Previous. A proxy without a window is silent.
// Only the scopes the change touched are judged, all when it touched none.
func judgeStep(in RolloutInput, s Rollout, step int, leading, nodes []string, now time.Time) judged {
	scopes := in.Touched.Scopes()
	proxyOf := func(node string) analysis.Proxy {
		w := in.Proxies[node].Window
		p := analysis.Proxy{Node: node, Reported: w != nil && w.Reports > 0, Scopes: map[string]analysis.Figures{}}
		if w == nil {
			return p
		}
		for scope, f := range w.Scopes {
			if len(scopes) == 0 || slices.Contains(scopes, scope) {
				p.Scopes[scope] = f
			}
		}
		return p
	}
	var stepProxies, baseline []analysis.Proxy
	for _, node := range nodes {
		switch {
		case s.leads(node):
			stepProxies = append(stepProxies, proxyOf(node))
		case in.Proxies[node].Acked == s.Previous:
			baseline = append(baseline, proxyOf(node))
		}
	}
	v := analysis.Judge(analysis.Input{Step: stepProxies, Baseline: baseline, Elapsed: max(now.Sub(s.StepStarted), 0),
		Bake: in.Policy.Bake, Silence: in.Policy.Silence, Thresholds: *in.Policy.Analysis})
	out := judged{StepVerdict: StepVerdict{Step: step, Outcome: v.Outcome, Proxies: figuresOf(stepProxies), Baseline: figuresOf(baseline)}}
	// A step that waits only for its bake has no finding to tell.
	if f := v.Findings; len(f) > 0 && v.Outcome != analysis.Pass && (f[0].Proxy != "" || f[0].Metric != "") {
		out.finding = f[0]
		out.Finding = Truncate(sentence(f[0]))
	}
	return out
}

// sentence says a finding: "proxy envoy-abc-1 http:ingress: 5xx-ratio
// 62.00%, above the ceiling of 5.00%".
func sentence(f analysis.Finding) string {
	switch {
	case f.Proxy == "":
		return f.Reason
	case f.Scope != "":
		return fmt.Sprintf("proxy %s %s: %s %s", f.Proxy, f.Scope, f.Metric, f.Reason)
	}
	return fmt.Sprintf("proxy %s: %s %s", f.Proxy, f.Metric, f.Reason)
}

// figuresOf adds proxies' figures up.
func figuresOf(proxies []analysis.Proxy) StepFigures {
	var total analysis.Figures
	for _, p := range proxies {
		total = total.Add(analysis.Total(p.Scopes))
	}
	out := StepFigures{Proxies: len(proxies), Requests: total.Requests}
	if total.Requests > 0 {
		n := float64(total.Requests)
		out.ErrorRatio = float64(total.Errors5xx) / n
		out.ResetRatio = float64(total.Resets) / n
		out.ConnectFailureRatio = float64(total.ConnectFailures) / n
	}
	if p99, ok := total.Duration.Quantile(0.99); ok {
		out.P99 = p99
	}
	return out
}

// keepVerdicts appends v to verdicts, keeping the last n at most.
func keepVerdicts(verdicts []StepVerdict, v StepVerdict, n int) []StepVerdict {
	out := append(slices.Clone(verdicts), v)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func (d RolloutDecision) finish(s Rollout, nodes []string) RolloutDecision {
	d.Rollout = s
	d.Serve = make(map[string]string, len(nodes))
	for _, node := range nodes {
		d.Serve[node] = s.Serves(node)
	}
	return d
}

// stepProxies describes the proxies of step i for an event or a message.
func stepProxies(s Rollout, i int, steps []RolloutStep, nodes []string) string {
	var leading []string
	for _, node := range nodes {
		if s.leads(node) {
			leading = append(leading, node)
		}
	}
	if len(leading) == 0 {
		return "no proxy yet: its proxies are chosen once the replicas report the fleet's proxies"
	}
	what := fmt.Sprintf("%d of %d proxies", len(leading), len(nodes))
	if st := steps[i]; st.Percent > 0 {
		what += fmt.Sprintf(" (%d%%)", st.Percent)
	}
	return what + ": " + names(leading)
}

// names lists a few node ids, and says how many more there are.
func names(nodes []string) string {
	const shown = 3
	if len(nodes) <= shown {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:shown], ", "), len(nodes)-shown)
}
