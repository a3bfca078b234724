package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// Reporter writes what this replica's proxies answered into the replica's
// report (report.Report), for the leader to add up. It runs on every
// replica. The report is split into shards (report.Shards), so that
// it fits however many fleets the replica serves, and only the shards that
// changed are written. Proxy events only mark the report dirty: however
// many arrive, a write carries them all, and none is lost. Writes are at
// least Interval apart: a push to a thousand proxies brings thousands of
// ACKs in a second, and each write of a shard makes the leader reconcile
// its fleets and write their EnvoyConfigs' status. For the same reason a
// change that leaves some of a fleet's proxies answering neither way, as a
// new version does until they ACK it, waits for their answers, at most
// Interval (unanswered). While a fleet rolls out, its proxies' answers
// carry their stats windows (ProxyStats), which change with every flush:
// a fleet's are figured again, and so change the report, at most once a
// flush interval, and a settled fleet's report holds none. A shard that someone
// else deletes or changes is written again; a write that fails is logged,
// reported as a Warning event (ReasonReportFailed) on the replica's pod,
// and retried with backoff.
type Reporter struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Informers, when set, tell the reporter that someone else changed one
	// of its shards.
	Informers cache.Informers
	// proxies are what it reports: this replica's server.
	proxies Proxies
	// Namespace is the operator's namespace; Replica names this replica.
	Namespace, Replica string
	// Pod is this replica's pod, if it runs in one: the report is deleted
	// with it, and its failures are reported on it.
	Pod string
	// Interval is the least time between two writes of a shard.
	Interval time.Duration

	// after is time.After; tests decide when a wait ends.
	after func(time.Duration) <-chan time.Time

	dirty chan struct{}
	// written is each shard as last written, by name: the report is this
	// replica's alone, so it is updated from what it wrote, not from the
	// cache. count is the number of shards.
	written map[string]*corev1.ConfigMap
	count   int

	mu sync.Mutex
	// pending are the shards being written, by name.
	pending map[string]*corev1.ConfigMap
	// tampered are the shards someone else changed or deleted since this
	// replica wrote them.
	tampered map[string]bool
}

// DefaultReportInterval is the least time between two writes of a
// replica's report: the status of a fleet's EnvoyConfigs follows its
// proxies at most once a second.
const DefaultReportInterval = time.Second

// ReasonReportFailed is the reason of the Warning event of a replica that
// could not write its report: until it can, the leader counts the fleets'
// proxies on that replica as the report last said.
const ReasonReportFailed = "ReportFailed"

// Proxies is what a Reporter reports: the proxies of a replica's Server.
type Proxies interface {
	// ProxyReport is what the proxies answered, by fleet.
	ProxyReport() report.Report
	// ProxiesChanged is signalled when the report may have changed.
	ProxiesChanged() <-chan struct{}
}

// NewReporter returns the Reporter of proxies, those of replica, running in
// pod (if any), whose report goes to namespace.
func NewReporter(mgr ctrl.Manager, proxies Proxies, namespace, replica, pod string) *Reporter {
	return &Reporter{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("xds-report"),
		Informers: mgr.GetCache(), proxies: proxies, Namespace: namespace, Replica: replica, Pod: pod,
		Interval: DefaultReportInterval, dirty: make(chan struct{}, 1), after: time.After,
		written: map[string]*corev1.ConfigMap{}, pending: map[string]*corev1.ConfigMap{}, tampered: map[string]bool{}}
}

// unanswered reports whether latest changed, from written, a fleet some of
// whose proxies have answered its version neither way: most often the
// moment a replica serves a fleet a new version, before its proxies ACK
// it, which they do within milliseconds. A report written then would tell
// the leader nothing it does not know (a replica's proxies count as
// connected, neither accepting nor rejecting, for a version it does not
// report), cost a write, and wake the leader to write the fleet's status;
// written once they answered, or once Interval passed if some never do,
// it tells their answers.
func unanswered(latest, written report.Report) bool {
	for id, f := range latest {
		if f.Connected > f.Acked+f.Nacked && !f.Equal(written[id]) {
			return true
		}
	}
	return false
}

// notify marks the report dirty; it never blocks.
func (r *Reporter) notify() {
	select {
	case r.dirty <- struct{}{}:
	default: // already dirty: the next write carries this change too
	}
}

// NeedLeaderElection is false: every replica reports its own proxies.
func (r *Reporter) NeedLeaderElection() bool { return false }

// Start writes the report whenever it is dirty, until ctx ends. It first
// writes it afresh, and deletes the shards it no longer needs: a report
// left by this replica's previous run describes proxies that are gone.
func (r *Reporter) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("xds-report")
	var (
		owner     []metav1.OwnerReference
		regarding runtime.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: report.ShardName(r.Replica, 0)}}
	)
	if r.Pod != "" {
		pod := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Pod}, pod); err != nil {
			log.Error(err, "reading this replica's pod; its report will outlive it", "pod", r.Pod)
		} else {
			owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
			regarding = pod
		}
	}
	if r.Informers != nil {
		if err := r.watchShards(ctx); err != nil {
			return err
		}
	}
	var (
		written   report.Report
		first     = true
		backoff   time.Duration
		retry     <-chan time.Time // set while a failed write waits to be tried again
		paced     <-chan time.Time // set while a change waits for Interval to pass
		delayed   <-chan time.Time // set while a change waits for its proxies' answers
		waitedOut bool             // the change waited Interval for them: it is written as it is
		lastWrite time.Time
	)
	for {
		if retry == nil && paced == nil {
			if latest := r.proxies.ProxyReport(); first || !maps.EqualFunc(latest, written, report.FleetProxies.Equal) || r.isTampered() {
				switch wait := r.Interval - time.Since(lastWrite); {
				case !first && !waitedOut && unanswered(latest, written) && !r.isTampered():
					if delayed == nil {
						delayed = r.after(r.Interval)
					}
				case !first && wait > 0:
					delayed, paced = nil, r.after(wait)
				default:
					delayed, waitedOut = nil, false
					if err := r.write(ctx, latest, owner, first); err != nil && ctx.Err() == nil {
						log.Error(err, "writing this replica's proxy report")
						r.Recorder.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonReportFailed, "Report",
							"writing the report of this replica's xDS proxies: %v", err)
						backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
						retry = r.after(backoff)
					} else {
						first, written, backoff, lastWrite = false, latest, 0, time.Now()
					}
				}
			} else {
				delayed, waitedOut = nil, false // nothing to write: no change waits
			}
		}
		select {
		case <-ctx.Done():
			r.withdraw(log)
			return nil
		case <-r.dirty:
		case <-r.proxies.ProxiesChanged():
		case <-retry:
			retry = nil
		case <-paced:
			paced, lastWrite = nil, time.Time{} // the interval has passed
		case <-delayed:
			// The interval has passed, since the last write too.
			delayed, waitedOut, lastWrite = nil, true, time.Time{}
		}
	}
}

// watchShards has the reporter told when someone else changes or deletes
// one of its shards: an update to content other than what it wrote or is
// writing, or a delete.
func (r *Reporter) watchShards(ctx context.Context) error {
	inf, err := r.Informers.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	mine := func(obj any) (*corev1.ConfigMap, bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		return cm, ok && cm.Namespace == r.Namespace && report.Is(cm) && cm.Annotations[report.ReplicaAnnotation] == r.Replica
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if cm, ok := mine(obj); ok {
				r.mu.Lock()
				w, p := r.written[cm.Name], r.pending[cm.Name]
				tampered := (w == nil || !sameShard(w, cm)) && (p == nil || !sameShard(p, cm))
				if tampered {
					r.tampered[cm.Name] = true
				}
				r.mu.Unlock()
				if tampered {
					r.notify()
				}
			}
		},
		DeleteFunc: func(obj any) {
			if cm, ok := mine(obj); ok {
				r.mu.Lock()
				r.tampered[cm.Name] = true
				r.mu.Unlock()
				r.notify()
			}
		},
	})
	return err
}

func (r *Reporter) isTampered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tampered) > 0
}

// withdraw deletes the report of a replica that stops: its proxies go with
// it. A replica that dies leaves its report behind; in a cluster, the report
// goes with its pod, and a replica restarted under the same name replaces it.
func (r *Reporter) withdraw(log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.deleteShards(ctx, nil); err != nil {
		log.Error(err, "deleting this replica's proxy report")
	}
}

// deleteShards deletes this replica's shards that keep does not name.
func (r *Reporter) deleteShards(ctx context.Context, keep map[string]bool) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := r.APIReader.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabels{names.ComponentLabel: report.Component}); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		m := &list.Items[i]
		if m.Annotations[report.ReplicaAnnotation] != r.Replica || keep[m.Name] {
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		errs = append(errs, client.IgnoreNotFound(r.Client.Delete(ctx, cm, client.Preconditions{UID: &m.UID})))
		r.mu.Lock()
		delete(r.written, m.Name)
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// write writes the shards of latest that changed since they were written,
// and those someone else changed; all of them, and with them deletes the
// shards no longer needed, when afresh. A report that outgrows its shards
// is split into twice as many: the new shards are written first, so that
// the leader may count a moved fleet twice for a moment (which leaves
// "every proxy accepted" and "every proxy rejected" as they are) but never
// misses one.
func (r *Reporter) write(ctx context.Context, latest report.Report, owner []metav1.OwnerReference, afresh bool) error {
	want, err := report.Shards(r.Namespace, r.Replica, latest, r.count)
	if err != nil {
		return err
	}
	r.mu.Lock()
	tampered := r.tampered
	r.tampered = map[string]bool{}
	r.mu.Unlock()
	order := append(want[r.count:len(want):len(want)], want[:min(r.count, len(want))]...)
	var errs []error
	for _, w := range order {
		w.OwnerReferences = owner
		if err := r.writeShard(ctx, w, afresh || tampered[w.Name]); err != nil {
			errs = append(errs, fmt.Errorf("ConfigMap %s: %w", w.Name, err))
			if tampered[w.Name] {
				r.mu.Lock()
				r.tampered[w.Name] = true // still to be checked
				r.mu.Unlock()
			}
		}
	}
	r.count = len(want)
	if afresh && len(errs) == 0 {
		keep := map[string]bool{}
		for _, w := range want {
			keep[w.Name] = true
		}
		errs = append(errs, r.deleteShards(ctx, keep))
	}
	return errors.Join(errs...)
}

// writeShard writes want unless it is what was written last; check: unless
// it is what the API server holds.
func (r *Reporter) writeShard(ctx context.Context, want *corev1.ConfigMap, check bool) error {
	r.mu.Lock()
	last := r.written[want.Name]
	r.pending[want.Name] = want
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, want.Name)
		r.mu.Unlock()
	}()
	if last != nil && !check && sameShard(last, want) {
		return nil
	}
	if last == nil || check {
		have := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Client.Create(ctx, want); err != nil {
				return err
			}
			r.remember(want)
			return nil
		case err != nil:
			return err
		}
		if last = have; sameShard(have, want) {
			r.remember(have)
			return nil
		}
	}
	updated := last.DeepCopy()
	updated.Data, updated.BinaryData = want.Data, nil
	updated.Labels, updated.Annotations, updated.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
	err := r.Client.Update(ctx, updated)
	switch {
	case apierrors.IsNotFound(err): // someone deleted it
		if err := r.Client.Create(ctx, want); err != nil {
			r.forgetShard(want.Name)
			return err
		}
		r.remember(want)
	case err != nil:
		r.forgetShard(want.Name) // read it again: someone else wrote it
		return err
	default:
		r.remember(updated)
	}
	return nil
}

func (r *Reporter) remember(cm *corev1.ConfigMap) {
	r.mu.Lock()
	r.written[cm.Name] = cm
	r.mu.Unlock()
}

func (r *Reporter) forgetShard(name string) {
	r.mu.Lock()
	delete(r.written, name)
	r.mu.Unlock()
}

// sameShard reports whether two ConfigMaps hold the same shard, as this
// replica writes it.
func sameShard(a, b *corev1.ConfigMap) bool {
	return maps.Equal(a.Data, b.Data) && len(a.BinaryData) == 0 && len(b.BinaryData) == 0 &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences)
}
