package envoyconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/resync"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// What brings a fleet back to Reconcile: its requests name fleets, so every
// watched object maps to the fleets it concerns.

// A failed read must not lose a fleet's turn (package resync). The maps
// from a Secret or an EndpointSlice to its fleets read the cache, and a
// handler cannot return an error; the fleets of an election are listed
// once. When such a List fails, the handler queues a resync of the
// namespace (resyncRequest) instead of the fleets it could not find: the
// reconcile of the resync lists them again and queues each, and a failure
// there is returned, so the workqueue retries it with its rate-limited
// backoff.

// resyncRequest stands for every fleet of namespace ns, or of every
// namespace when ns is "": it names no fleet, since no Envoy, and no
// spec.envoyRef, has an empty name.
func resyncRequest(ns string) reconcile.Request { return resync.Request(ns) }

// isResync reports whether req is a resyncRequest.
func isResync(req reconcile.Request) bool { return resync.Is(req) }

// resync queues every fleet of namespace ns (every namespace when ns is "")
// that has EnvoyConfigs, and, for every namespace, every fleet that has a
// history. A failed List is returned, for the queue to retry the resync.
func (r *Reconciler) resync(ctx context.Context, ns string) error {
	q := r.queue.Load()
	if q == nil {
		return errors.New("resyncing fleets: the controller's queue is not started")
	}
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing EnvoyConfigs to resync their fleets: %w", err)
	}
	var ids []fleet.ID
	if ns == "" {
		var err error
		if ids, err = r.Histories.Fleets(ctx); err != nil {
			return fmt.Errorf("listing the fleets' histories to resync them: %w", err)
		}
	}
	for _, req := range fleetsOf(list.Items) {
		(*q).Add(req)
	}
	for _, id := range ids {
		(*q).Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
	}
	return nil
}

// enqueueOnElection queues, once this replica is elected, every fleet that
// has EnvoyConfigs, and every fleet that has a history, as a resync of
// every namespace: its reconcile lists them, and is retried until it can.
// Until then another replica wrote their status, with the counts of its own
// proxies, and nothing else would make this one write it before the next
// change of a fleet; and a fleet deleted while no leader ran leaves a
// history that only the leader deletes (an owner reference cannot cross
// namespaces).
func (r *Reconciler) enqueueOnElection(ctx context.Context, elected <-chan struct{}, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	select {
	case <-elected:
		q.Add(resyncRequest(""))
	case <-ctx.Done():
	}
}

// fleetsOfSecret maps a Secret labelled for the control plane to the fleets
// whose EnvoyConfigs name it in spec.tlsSecrets, and to those whose
// Gateway's listeners name it as a certificate (of any namespace, under a
// ReferenceGrant); to a resync of its namespace when the EnvoyConfigs
// cannot be listed. A listener's Secret that is not labelled is not in the
// manager's cache, which holds no other Secret: it is read, uncached, at
// the fleet's next reconcile.
func (r *Reconciler) fleetsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	gateways := r.gatewayBackends.fleetsOfSecret(client.ObjectKeyFromObject(o))
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretIndex: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "listing the EnvoyConfigs of a Secret; resyncing the namespace's fleets", "secret", client.ObjectKeyFromObject(o))
		return append(gateways, resyncRequest(o.GetNamespace()))
	}
	return append(fleetsOf(list.Items), gateways...)
}

// fleetsOf returns the fleets of configs, each once.
func fleetsOf(configs []examplev1.EnvoyConfig) []reconcile.Request {
	seen := map[string]bool{}
	var out []reconcile.Request
	for _, c := range configs {
		if !seen[c.Spec.EnvoyRef] {
			seen[c.Spec.EnvoyRef] = true
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.EnvoyRef}})
		}
	}
	return out
}

// fleetsOfSlice maps an EndpointSlice to the fleets whose EnvoyConfigs use
// its Service; to a resync of its namespace when they cannot be listed.
func (r *Reconciler) fleetsOfSlice(ctx context.Context, o client.Object) []reconcile.Request {
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	gateways := r.gatewayBackends.fleetsOf(types.NamespacedName{Namespace: o.GetNamespace(), Name: svc})
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{serviceIndex: svc}); err != nil {
		logf.FromContext(ctx).Error(err, "listing the EnvoyConfigs of an EndpointSlice; resyncing the namespace's fleets", "endpointSlice", client.ObjectKeyFromObject(o))
		return append(gateways, resyncRequest(o.GetNamespace()))
	}
	return append(fleetsOf(list.Items), gateways...)
}

// fleetsOfConfig enqueues the fleet an EnvoyConfig belongs to, and on an
// update that moves it to another fleet, the old fleet too. It notes when
// a write queued each fleet in queued, if set: the push's queue stage.
type fleetsOfConfig struct{ queued *queuedAt }

func fleetRequest(o client.Object) reconcile.Request {
	c := o.(*examplev1.EnvoyConfig)
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.EnvoyRef}}
}

// add queues req for a write the informer saw now.
func (h fleetsOfConfig) add(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	if h.queued != nil {
		h.queued.note(req.NamespacedName, time.Now())
	}
	q.Add(req)
}

func (h fleetsOfConfig) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.add(q, fleetRequest(e.Object))
}
func (h fleetsOfConfig) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if statusOnly(e.ObjectOld, e.ObjectNew) {
		return
	}
	h.add(q, fleetRequest(e.ObjectOld))
	h.add(q, fleetRequest(e.ObjectNew))
}

// statusOnly reports whether an update of an EnvoyConfig from old to new
// changed nothing any replica's reconcile reads: not its spec (the
// generation), not its metadata, and of its status, which the leader
// writes, nothing but what no reconcile reads. A reconcile reads four
// things of the status: status.publishedVersion (Vouched, for a legacy
// history), status.rejectedVersions and status.contentHash, and the
// Published condition's rejection at the current generation (RejectionsOf,
// for the leader's decision); everything else in it (the proxies' counts,
// the other conditions, observedGeneration) is the leader's report of what
// it decided, and a change of that alone brings no replica anything new to
// serve or decide. The leader's status writes are most of an EnvoyConfig's
// updates: three or more per change, on every replica.
func statusOnly(old, new client.Object) bool {
	o, ok1 := old.(*examplev1.EnvoyConfig)
	n, ok2 := new.(*examplev1.EnvoyConfig)
	if !ok1 || !ok2 || o.Generation != n.Generation {
		return false
	}
	read := func(c *examplev1.EnvoyConfig) examplev1.EnvoyConfig {
		out := *c // a shallow copy: only its own fields are set below
		out.ResourceVersion, out.ManagedFields = "", nil
		out.Spec = examplev1.EnvoyConfigSpec{} // the same at the same generation
		out.Status = examplev1.EnvoyConfigStatus{
			PublishedVersion: c.Status.PublishedVersion,
			RejectedVersions: c.Status.RejectedVersions,
			ContentHash:      c.Status.ContentHash,
		}
		p := meta.FindStatusCondition(c.Status.Conditions, examplev1.EnvoyConfigConditionPublished)
		if p != nil && p.ObservedGeneration == c.Generation &&
			(p.Reason == examplev1.EnvoyConfigReasonRolledBack || p.Reason == examplev1.EnvoyConfigReasonRejected) {
			out.Status.Conditions = []metav1.Condition{{Type: p.Type, Reason: p.Reason}}
		}
		return out
	}
	return equality.Semantic.DeepEqual(read(o), read(n))
}

func (h fleetsOfConfig) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.add(q, fleetRequest(e.Object))
}
func (fleetsOfConfig) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(fleetRequest(e.Object))
}

// controlPlaneConfigMaps enqueues the fleet of a revision history (in the
// operator's namespace; or as the previous release kept it, for the leader
// to take it over and delete it), and, on the leader, the fleets whose
// entries changed in a shard of a replica's report.
//
// Only the leader reads the reports: a follower is not woken by them, its
// own included. Should it be elected, it queues every fleet then
// (enqueueOnElection), and reads them all. Nor is a follower woken by an
// update of a history that leaves what it serves as it is: one whose
// served version, as the history's metadata names it, was and is the
// version this replica serves the fleet, and whose rollout, if any, serves
// the same proxies, such as the leader's mark that
// the proxies accepted it. The served revision's content is the content
// that hashes to its version, and a follower serves nothing else of the
// history. The leader is woken by every change of a history but its own
// writes (ownHistories): what it wrote, it decided, served and reported on
// in the reconcile that wrote it; someone else's write may be anything. A
// deleted history wakes every replica.
type controlPlaneConfigMaps struct{ r *Reconciler }

func (h controlPlaneConfigMaps) enqueue(o client.Object, old client.Object, deleted bool, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if id, ok := history.Fleet(o, h.r.Namespace); ok {
		if leader := h.r.IsLeader(); !deleted && (leader && h.r.ownHistories.isOwn(id, o) || !leader && h.servesAsIs(id, old, o)) {
			return
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		return
	}
	if id, ok := history.LegacyFleet(o); ok {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		return
	}
	if !report.Is(o) || o.GetNamespace() != h.r.Namespace || !h.r.IsLeader() {
		return
	}
	reportOf := func(o client.Object) report.Report {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			return nil
		}
		rep, _ := report.Read(cm)
		return rep
	}
	var before report.Report
	if old != nil {
		before = reportOf(old)
	}
	for _, fleetID := range report.Changed(before, reportOf(o)) {
		if id, err := fleet.Parse(fleetID); err == nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		}
	}
}

func (h controlPlaneConfigMaps) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, nil, false, q)
}
func (h controlPlaneConfigMaps) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.ObjectNew, e.ObjectOld, false, q)
}
func (h controlPlaneConfigMaps) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, nil, true, q)
}
func (h controlPlaneConfigMaps) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, nil, false, q)
}

// servesAsIs reports whether the update of fleet id's history from old to
// o leaves this replica serving what it serves: both name, in their
// metadata, the same fleet and served version, and this replica serves the
// fleet that version.
func (h controlPlaneConfigMaps) servesAsIs(id fleet.ID, old, o client.Object) bool {
	if old == nil || h.r.Server == nil {
		return false
	}
	if was, ok := history.Fleet(old, h.r.Namespace); !ok || was != id {
		return false
	}
	v, ok := o.GetAnnotations()[history.VersionAnnotation]
	w, wok := old.GetAnnotations()[history.VersionAnnotation]
	rolling := o.GetAnnotations()[history.RolloutAnnotation] != old.GetAnnotations()[history.RolloutAnnotation]
	return ok && wok && v == w && !rolling && h.r.Server.Version(id.String()) == v
}

// queuedAt remembers, by fleet, when the informer last saw a write of one
// of its EnvoyConfigs that queued it, until a reconcile of the fleet starts
// and takes it: the queue stage of a push is from then to that start. The
// clock is this replica's alone, so a queue's time is never skewed by
// another's; the time from the API server's write to the informer's event
// is not in it. A later write before the reconcile starts replaces an
// earlier one: the queue is the last write's.
type queuedAt struct{ m sync.Map }

func (q *queuedAt) note(fleet types.NamespacedName, at time.Time) { q.m.Store(fleet, at) }

// take returns when a write last queued fleet, and forgets it.
func (q *queuedAt) take(fleet types.NamespacedName) (time.Time, bool) {
	v, ok := q.m.LoadAndDelete(fleet)
	if !ok {
		return time.Time{}, false
	}
	return v.(time.Time), true
}
