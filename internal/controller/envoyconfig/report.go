package envoyconfig

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// report is the leader's last phase: it writes every EnvoyConfig's status,
// and the status of the Gateway the fleet serves and of its routes, with
// the proxies' answers to the revision served, from the replicas' reports
// that the record phase decided on.
func (r *Reconciler) report(ctx context.Context, w *world, ir translate.IR, rec recording, reports []report.Report) (ctrl.Result, error) {
	where := fmt.Sprintf("ConfigMap %s/%s", r.Namespace, history.Name(w.id))
	base := fleetState(ir, rec, acks(reports, w, rec.history), w.envoy == nil, where)
	var errs []error
	wait := time.Duration(0)
	if plain(base, ir) {
		wait = r.awaiting.wait(w.id, rec.history, reports, time.Now())
		if wait == 0 && r.awaiting.expired(w.id, rec.history.Current) {
			// A replica has not reported the revision in answersWait: if
			// it is gone, its report is left out, and the fleet decided on
			// again without it before its status is written.
			// One that cannot be asked after is counted as it reports.
			if left, err := r.leaveOutLeftovers(ctx, w.id.String(), rec.history.Current); err != nil {
				logf.FromContext(ctx).Error(err, "asking after the replicas whose reports name another revision", "fleet", w.id.String())
			} else if left {
				return ctrl.Result{RequeueAfter: time.Millisecond}, nil
			}
		}
	}
	configs := w.configs
	if wait > 0 {
		configs = nil // written once the replicas report the proxies' answers
	}
	for _, c := range configs {
		c = r.ownStatuses.latest(c)
		s := base
		s.Config = ir.Configs[translate.FromObject(c).Name]
		after := c.DeepCopy()
		after.Status = Status(c, s)
		err := r.Status.Write(ctx, c, after)
		if err == nil && after.ResourceVersion != c.ResourceVersion {
			r.ownStatuses.remember(c, after)
		}
		if !apierrors.IsNotFound(err) { // a deleted config needs no status
			errs = append(errs, err)
		}
	}
	if w.gateway != nil {
		s := base
		s.Config = ir.Configs[w.gateway.out.Config.Name]
		errs = append(errs, r.reportGateway(ctx, w, s))
	}
	if rec.err != nil && !rec.clashed() {
		errs = append(errs, rec.err)
	}
	res, err := status.Result(errors.Join(errs...), rec.clashed())
	if wait > 0 && err == nil && !r.awaiting.wake(w.id, wait, r.queue.Load()) && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return res, err
}

// plain reports whether s, with the configs' parts of ir, tells nothing
// but a revision served and its proxies' answers: no rejection, rollback,
// withheld change, rollout, hold or failure, which a status tells as the
// decision finds it (a rollback's rejected version is the IR's only in the
// reconcile that rolls back), and at once.
func plain(s State, ir translate.IR) bool {
	if s.Rejected != "" || s.ServedRejected != "" || s.RolledBack || s.Rollout != nil || s.PublishError != nil ||
		s.HistoryUnusable != "" || len(s.Held) > 0 {
		return false
	}
	for _, c := range ir.Configs {
		if c.Withheld != nil {
			return false
		}
	}
	return true
}

// answersWait bounds how long the leader holds the status of a fleet's
// EnvoyConfigs while a replica with proxies of the fleet has not reported
// serving them the revision the history now serves (awaitingAnswers).
// A replica reports within its report interval (a second) of serving a
// revision, with its proxies' answers, or without them if they give none
// by then; a replica that never reports (one that died and left its
// report behind) holds the status this long, and no longer.
const answersWait = 10 * time.Second

// awaitingAnswers holds, by fleet, the status writes that a newly served
// revision brings until the replicas' reports tell its proxies' answers.
// The status of a change was written twice: at once, with the new
// version and none of its proxies answering (every replica still reported
// the previous version), and again when the reports came, a second later,
// with their answers. The first told nothing the second does not, and
// woke every replica. Now the status waits for the reports, at most
// answersWait: a status that does not depend on the proxies' answers to a
// new revision (no proxy connected, a decision that serves what was
// served, a failed record, a rollout's step) is written at once.
type awaitingAnswers struct{ m sync.Map }

type awaited struct {
	version string
	since   time.Time
}

// wait returns how long the status of fleet id, whose history is h, is
// held yet at now: 0 when it is written now.
func (a *awaitingAnswers) wait(id fleet.ID, h publish.History, reports []report.Report, now time.Time) time.Duration {
	if h.Current == "" || h.Rollout != nil || !report.Behind(reports, id.String(), h.Current) {
		a.m.Delete(id)
		return 0
	}
	since := now
	if v, ok := a.m.Load(id); ok && v.(awaited).version == h.Current {
		since = v.(awaited).since
	} else {
		a.m.Store(id, awaited{version: h.Current, since: now})
	}
	return max(0, since.Add(answersWait).Sub(now))
}

// wake queues fleet id on q once wait has passed, if its status is held
// still: the reports that end the wait wake the leader themselves, and a
// requeue would bring it a reconcile with nothing new. It reports whether
// it will (q is set).
func (a *awaitingAnswers) wake(id fleet.ID, wait time.Duration, q *workqueue.TypedRateLimitingInterface[reconcile.Request]) bool {
	if q == nil {
		return false
	}
	v, _ := a.m.Load(id)
	time.AfterFunc(wait, func() {
		if now, ok := a.m.Load(id); ok && now == v {
			(*q).Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		}
	})
	return true
}

// expired reports whether the status of fleet id waited answersWait for
// the reports of version, and a replica still reports another.
func (a *awaitingAnswers) expired(id fleet.ID, version string) bool {
	v, ok := a.m.Load(id)
	return ok && v.(awaited).version == version
}

func (a *awaitingAnswers) forget(id fleet.ID) { a.m.Delete(id) }

// fleetState is what every EnvoyConfig of the fleet is told but its own
// part of the IR: the revision served and the proxies' answers to it (acks),
// what the proxies rejected, whether the Envoy is missing, whether the
// history read was unusable, and why the decision could not be recorded in
// the history (where names it).
func fleetState(ir translate.IR, rec recording, acks publish.Acks, envoyMissing bool, where string) State {
	h := rec.history
	s := State{Held: ir.Held, EnvoyMissing: envoyMissing, PublishedVersion: h.Current, Proxies: acks}
	if rev := h.Find(ir.Version); rev != nil && rev.Rejected != "" {
		s.Rejected, s.RejectedVersion = rev.Rejected, rev.Version
		s.RolledBack = h.Current != "" && h.Current != ir.Version
		s.Unattributed = rev.Rejected != publish.KnownRejection && !withholds(h, rev.Version)
	}
	if rev := h.Served(); rev != nil && rev.Rejected != "" && s.Rejected == "" {
		s.ServedRejected = rev.Rejected
	}
	s.Rollout = rolloutState(h, rec.rollout)
	if rec.unusable != nil {
		s.HistoryUnusable = fmt.Sprintf("the fleet's revision history in %s was unusable (%v): ", where, rec.unusable)
		if rec.readable {
			s.HistoryUnusable += "it is written afresh, without the revisions it held"
		} else {
			s.HistoryUnusable += "the leader writes it afresh"
		}
	}
	if rec.err != nil {
		p := conditions.FromError(rec.err)
		if rec.clashed() {
			p.Reason = conditions.ResourceExists // another's ConfigMap has the name
		}
		p.Message = fmt.Sprintf("recording the fleet's revision in %s: %s", where, p.Message)
		s.PublishError = p
	}
	return s
}

// rolloutState says where the rollout of h's served revision stands, as
// the leader decided it (d), for the status: nil when every proxy is
// served it. It names no time that passes: a step that bakes says until
// when, so that the status is not written again as the time passes.
func rolloutState(h publish.History, d publish.RolloutDecision) *RolloutState {
	r := h.Rollout
	if r == nil || r.Revision != h.Current {
		return nil
	}
	st := &RolloutState{Rollout: *r, Proxies: len(d.Serve)}
	for _, v := range d.Serve {
		if v == r.Revision {
			st.Served++
		}
	}
	switch {
	case r.Phase != publish.RolloutProgressing:
	case d.Judged != nil && d.Action == publish.RolloutWaits:
		// Judged by its proxies' figures: they change as the proxies
		// report, and the status tells them.
		why := d.Judged.Finding
		if !d.BakeEnds.IsZero() {
			why = strings.TrimSuffix("the step bakes until "+d.BakeEnds.UTC().Format(time.RFC3339)+"; "+why, "; ")
		}
		st.Waiting = fmt.Sprintf("its proxies accepted it and are judged by what they serve: %s (the step's %s; the baseline's %s)",
			why, d.Judged.Proxies, d.Judged.Baseline)
	case !d.BakeEnds.IsZero():
		st.Waiting = "its proxies accepted it; the step bakes until " + d.BakeEnds.UTC().Format(time.RFC3339)
	default:
		st.Waiting = d.Waiting
	}
	return st
}

// ownStatuses remembers, by EnvoyConfig (its UID), the last status write
// made by its reconciler: the resourceVersion it was made over, and the
// EnvoyConfig it made. A reconcile soon after a status write may read the
// EnvoyConfig from a cache that has not seen the write yet; it would take
// the status written for one still to write, and write it again. Until
// the cache holds a later version, the EnvoyConfig as written is the one
// to compare with, and to write over.
type ownStatuses struct{ m sync.Map }

type ownStatus struct {
	over    string
	written *examplev1.EnvoyConfig
}

func (o *ownStatuses) remember(before, written *examplev1.EnvoyConfig) {
	o.m.Store(before.UID, ownStatus{over: before.ResourceVersion, written: written.DeepCopy()})
}

// latest returns c, or, when c is the version a status write of this
// process was made over (the cache has not seen the write), the
// EnvoyConfig that write made. What it remembers of c goes once the cache
// holds a later version.
func (o *ownStatuses) latest(c *examplev1.EnvoyConfig) *examplev1.EnvoyConfig {
	v, ok := o.m.Load(c.UID)
	if !ok {
		return c
	}
	own := v.(ownStatus)
	if c.ResourceVersion == own.over && c.Generation == own.written.Generation {
		return own.written.DeepCopy()
	}
	o.m.CompareAndDelete(c.UID, v)
	return c
}
