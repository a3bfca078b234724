package envoyconfig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// recording is the fleet's history as this replica knows it after the
// record phase: what the serve and report phases work from.
type recording struct {
	// history is what is recorded; readable, whether it is what the API
	// server holds (read, or written by this reconcile).
	history  publish.History
	readable bool
	// unusable is why the history read was unusable, if it was: the leader
	// writes it afresh, and reports it in the status of the reconcile that
	// found it (once, since the next one reads what it wrote).
	unusable error
	// err is why the leader's decision could not be recorded.
	err error
	// rollout is the leader's decision on the served revision's rollout.
	rollout publish.RolloutDecision
	// published: the leader recorded a new revision to serve.
	published bool
	// again: the recorded decision changed what the history withholds,
	// which translation reads. The fleet is decided on again at once, from
	// what was recorded (its content without a change withheld now is its
	// next revision), since the leader's own write does not wake it.
	again bool
}

// stored is the recording of what was read, before any decision.
func stored(w *world) recording {
	return recording{history: w.stored.History, readable: w.stored.Readable, unusable: w.stored.Unusable}
}

// ends returns the result a reconcile ends with right after the record
// phase, before serving anything, if it does: when the cache was behind the
// history, to decide again on what is stored; when the operator's
// namespace goes, for good, since the operator goes with it.
func (rec recording) ends() (ctrl.Result, bool) {
	switch {
	case errors.Is(rec.err, store.ErrCacheBehind):
		return ctrl.Result{RequeueAfter: status.ConflictRetry}, true
	case apierrors.HasStatusCause(rec.err, corev1.NamespaceTerminatingCause):
		return ctrl.Result{}, true
	}
	return ctrl.Result{}, false
}

// clashed reports whether another's ConfigMap has the history's name.
func (rec recording) clashed() bool { return apierrors.IsAlreadyExists(rec.err) }

// record is the leader's phase: it decides what the fleet is served next
// (publish.Decide) and how far its rollout goes (publish.Roll), from the
// replicas' reports, and, when that changes the history or the stored one
// is unreadable, records it and announces it.
func (r *Reconciler) record(ctx context.Context, w *world, ir translate.IR, reports []report.Report) recording {
	rec := stored(w)
	prev := r.accepted.marked(w, rec.history)
	d := publish.Decide(prev, ir, acks(reports, w, rec.history), publish.RejectionsOf(w.configs, ir.Version))
	in := publish.RolloutInput{Policy: rolloutPolicy(w.envoy), Proxies: report.Answers(reports, w.id.String()), Now: r.now()}
	in.Promote, in.Abort = rolloutOrders(w.envoy)
	rec.rollout = publish.Roll(prev, &d, in)
	exportStep(w.id.String(), rec.rollout)
	r.accepted.note(w.id, d.History)
	if rec.readable && !changedBeyondAccepted(d, rec.history) {
		return rec
	}
	// Remembered before it is written: the write's event may come first. A
	// history written afresh over an unusable one is not: the reconcile that
	// writes it reports it unusable, and the one its event brings reports
	// it usable again.
	if rec.unusable == nil {
		r.ownHistories.remember(r.Namespace, w.id, d.History)
	} else {
		r.ownHistories.forget(w.id)
	}
	if rec.err = r.Histories.Record(ctx, w.id, w.stored, d.History); rec.err != nil {
		r.ownHistories.forget(w.id)
	} else {
		r.announce(ctx, w, rec.history, d)
		rec.published = d.History.Current != rec.history.Current
		rec.again = !maps.Equal(d.History.Withheld, rec.history.Withheld)
		rec.history, rec.readable = d.History, true
	}
	return rec
}

// rolloutPolicy is the rollout policy of the fleet of Envoy e (nil when
// there is none, or no Envoy): a rollout serves two revisions of the
// built-in xDS server, so a fleet of another server has none.
func rolloutPolicy(e *examplev1.Envoy) *publish.RolloutPolicy {
	if e == nil || e.Spec.ConfigRollout == nil || !fleet.BuiltinXDS(e) {
		return nil
	}
	p := &publish.RolloutPolicy{Bake: 60 * time.Second}
	if b := e.Spec.ConfigRollout.BakeSeconds; b != nil {
		p.Bake = time.Duration(*b) * time.Second
	}
	for _, st := range e.Spec.ConfigRollout.Steps {
		p.Steps = append(p.Steps, publish.RolloutStep{Proxies: ptr.Deref(st.Proxies, 0), Percent: ptr.Deref(st.Percent, 0)})
	}
	p.Analysis = rolloutThresholds(e.Spec.ConfigRollout.Analysis)
	// A proxy's first report of a change comes with its second flush after
	// it accepted it (the first holds the previous version's traffic too:
	// stats.Marks), and a replica figures windows once a flush interval: a
	// healthy proxy has reported within three intervals of the step's
	// start. Six leave as much again for a replica under load.
	p.Silence = 6 * proxy.StatsFlushInterval
	return p
}

// rolloutThresholds are the thresholds of a rollout's analysis a (nil:
// none); a field not set, as in an object stored before the API server
// defaulted it, takes the default of analysis.DefaultThresholds, as the
// API's defaults are.
func rolloutThresholds(a *examplev1.EnvoyConfigRolloutAnalysis) *analysis.Thresholds {
	if a == nil {
		return nil
	}
	th := analysis.DefaultThresholds
	if a.MinRequests != nil {
		th.MinRequests = uint64(max(*a.MinRequests, 0))
	}
	share := func(l *analysis.Limit, in *examplev1.EnvoyRolloutShareLimit) {
		if in == nil {
			return
		}
		if in.MaxPercent != nil {
			l.Max = float64(*in.MaxPercent) / 100
		}
		if in.MaxToBaselinePercent != nil {
			l.ToBaseline = float64(*in.MaxToBaselinePercent) / 100
		}
	}
	share(&th.ErrorRatio, a.ServerErrors)
	share(&th.ResetRatio, a.Resets)
	share(&th.ConnectFailureRatio, a.ConnectFailures)
	if l := a.LatencyP99; l != nil {
		if l.MaxMilliseconds != nil {
			th.P99.Max = float64(*l.MaxMilliseconds)
		}
		if l.MaxToBaselinePercent != nil {
			th.P99.ToBaseline = float64(*l.MaxToBaselinePercent) / 100
		}
	}
	return &th
}

// rolloutOrders reads the orders to promote or abort a rollout given on
// Envoy e (examplev1.RolloutPromoteAnnotation and RolloutAbortAnnotation).
// One that does not parse is no order.
func rolloutOrders(e *examplev1.Envoy) (promote, abort *publish.RolloutOrder) {
	if e == nil {
		return nil, nil
	}
	if v, step, ok := strings.Cut(e.Annotations[examplev1.RolloutPromoteAnnotation], "/"); ok {
		if n, err := strconv.Atoi(step); err == nil && n >= 1 && v != "" {
			promote = &publish.RolloutOrder{Revision: v, Step: n - 1}
		}
	}
	if v := strings.TrimSpace(e.Annotations[examplev1.RolloutAbortAnnotation]); v != "" {
		abort = &publish.RolloutOrder{Revision: v}
	}
	return promote, abort
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// acks counts the fleet's proxies, on every replica (reports), with
// respect to h's served revision.
func acks(reports []report.Report, w *world, h publish.History) publish.Acks {
	return report.Sum(reports, w.id.String(), h.Current)
}

// announce logs a recorded decision and records its events, once, on the
// fleet's Envoy (or, without one, on its first EnvoyConfig).
func (r *Reconciler) announce(ctx context.Context, w *world, prev publish.History, d publish.Decision) {
	log := logf.FromContext(ctx)
	if d.History.Current != prev.Current {
		log.Info("published fleet configuration", "fleet", w.id.String(), "version", d.History.Current, "action", d.Action, "previous", prev.Current)
	}
	var regarding client.Object = w.envoy
	if w.envoy == nil {
		if len(w.configs) == 0 {
			return
		}
		regarding = w.configs[0]
	}
	action := eventAction(d.History)
	for _, e := range d.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		log.Info(e.Message, "fleet", w.id.String(), "reason", e.Reason)
		r.Recorder.Eventf(regarding, nil, typ, e.Reason, action, "%s", e.Message)
	}
}

// eventAction is the action of the events of a decision that left h:
// publishing its current revision, and the step of its rollout. The
// events.k8s.io recorder folds an event into an earlier one of the same
// object, reason and action (a series, which keeps the first message
// only) for six minutes; one action for all made a rollout's second
// promotion, whose figures differ, a mere count on its first.
func eventAction(h publish.History) string {
	action := "Publish"
	if h.Current != "" {
		action += " " + h.Current
	}
	if r := h.Rollout; r != nil && r.Revision == h.Current && r.Phase == publish.RolloutProgressing {
		action += "/step-" + strconv.Itoa(r.Step+1)
	}
	return action
}

// retireLegacy is the leader's last step of storage, once the fleet is
// served: the fleet's legacy history goes when its history is in the
// operator's namespace now, or it needs none.
func (r *Reconciler) retireLegacy(ctx context.Context, w *world, rec recording) error {
	if !rec.readable && !w.unrecorded() {
		return nil
	}
	return r.Histories.RetireLegacy(ctx, w.stored)
}

// ownHistories remembers, by fleet, the digest of the history its reconciler
// recorded last, as stored: the leader's own write of a history brings it
// nothing it did not know when it wrote it, and wakes it for nothing
// (watches.go). Someone else's write of other content is not its own.
type ownHistories struct{ m sync.Map }

func (o *ownHistories) remember(namespace string, id fleet.ID, h publish.History) {
	cm, err := history.ConfigMap(namespace, id, h)
	if err != nil {
		o.m.Delete(id)
		return
	}
	o.m.Store(id, historyDigest(cm))
}

func (o *ownHistories) forget(id fleet.ID) { o.m.Delete(id) }

// isOwn reports whether cm, fleet id's history, holds what its reconciler
// recorded last.
func (o *ownHistories) isOwn(id fleet.ID, cm client.Object) bool {
	v, ok := o.m.Load(id)
	return ok && v.(string) == historyDigest(cm)
}

// historyDigest is a digest of what a history's ConfigMap holds: its
// labels, annotations and data.
func historyDigest(o client.Object) string {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return ""
	}
	h := sha256.New()
	field := func(b []byte) { fmt.Fprintf(h, "%d:", len(b)); h.Write(b) }
	for _, m := range []map[string]string{cm.Labels, cm.Annotations, cm.Data} {
		fmt.Fprintf(h, "%d;", len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			field([]byte(k))
			field([]byte(m[k]))
		}
	}
	fmt.Fprintf(h, "%d;", len(cm.BinaryData))
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		field([]byte(k))
		field(cm.BinaryData[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A revision's mark that every connected proxy accepted it (Acked) is
// written lazily: a decision that changes the history in nothing else
// writes nothing, and the mark goes with the history's next write, which
// is when it matters (it makes the revision a rollback target once another
// is served). Until then the leader keeps it in memory (acceptedMarks), and
// the EnvoyConfigs' status vouches for it (acceptedOf), since the leader
// writes it once every proxy answered: a new leader finds the mark there.
// A mark is thus neither lost nor a write of its own: one change costs
// one history write.

// changedBeyondAccepted reports whether d changes the history prev in more
// than the marks that revisions were accepted.
func changedBeyondAccepted(d publish.Decision, prev publish.History) bool {
	h := d.History
	h.Revisions = slices.Clone(h.Revisions)
	for i := range h.Revisions {
		if p := prev.Find(h.Revisions[i].Version); p != nil && !p.Acked {
			h.Revisions[i].Acked = false
		}
	}
	return publish.Decision{History: h}.Changed(prev)
}

// acceptedOf returns the versions that configs, the fleet's EnvoyConfigs,
// report as accepted by every connected proxy of the fleet in their
// status, which only the operator writes: the version published, with as
// many proxies acked as connected, and at least one.
func acceptedOf(configs []*examplev1.EnvoyConfig) map[string]bool {
	out := map[string]bool{}
	for _, c := range configs {
		p := c.Status.Proxies
		if v := c.Status.PublishedVersion; v != "" && p.Connected > 0 && p.Acked == p.Connected {
			out[v] = true
		}
	}
	return out
}

// acceptedMarks remembers, by fleet, the versions of its history that the
// leader found accepted by every connected proxy and has not written so.
type acceptedMarks struct{ m sync.Map }

// marked returns h with the revisions accepted as the leader found them
// and as the fleet's EnvoyConfigs report them (acceptedOf) marked so. A
// revision rejected by every proxy is not marked: the history's mark is
// the better knowledge.
func (a *acceptedMarks) marked(w *world, h publish.History) publish.History {
	known := acceptedOf(w.configs)
	if v, ok := a.m.Load(w.id); ok {
		for version := range v.(map[string]bool) {
			known[version] = true
		}
	}
	out := h
	out.Revisions = slices.Clone(h.Revisions)
	for i := range out.Revisions {
		if rev := &out.Revisions[i]; known[rev.Version] && !rev.Acked && rev.Rejected == "" {
			rev.Acked = true
		}
	}
	return out
}

// note remembers the revisions that h, decided on, marks accepted.
func (a *acceptedMarks) note(id fleet.ID, h publish.History) {
	m := map[string]bool{}
	for _, rev := range h.Revisions {
		if rev.Acked {
			m[rev.Version] = true
		}
	}
	if len(m) == 0 {
		a.m.Delete(id)
		return
	}
	a.m.Store(id, m)
}

func (a *acceptedMarks) forget(id fleet.ID) { a.m.Delete(id) }
