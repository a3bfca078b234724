package envoyconfig

import (
	"context"
	"maps"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Reporter writes what this replica's proxies answered into the replica's
// report (publish.Report), for the leader to add up. It runs on every
// replica. Proxy events only mark the report dirty: however many arrive, a
// write carries them all, and none is lost. Writes are at least Interval
// apart: a push to a thousand proxies brings thousands of ACKs in a second,
// and each write of the report makes the leader reconcile the fleet and
// write its EnvoyConfigs' status.
type Reporter struct {
	Client    client.Client
	APIReader client.Reader
	Server    *xds.Server
	// Namespace is the operator's namespace; Replica names this replica.
	Namespace, Replica string
	// Pod is this replica's pod, if it runs in one: the report is deleted with it.
	Pod string
	// Interval is the least time between two writes of the report.
	Interval time.Duration

	// after is time.After; tests decide when a wait ends.
	after func(time.Duration) <-chan time.Time

	dirty chan struct{}
	// last is the report as last written: the report is this replica's
	// alone, so it is updated from what it wrote, not from the cache.
	last *corev1.ConfigMap
}

// DefaultReportInterval is the least time between two writes of a
// replica's report: the status of a fleet's EnvoyConfigs follows its
// proxies at most once a second.
const DefaultReportInterval = time.Second

// NewReporter returns a Reporter; Notify is the xDS server's notify function.
func NewReporter(c client.Client, apiReader client.Reader, namespace, replica, pod string) *Reporter {
	return &Reporter{Client: c, APIReader: apiReader, Namespace: namespace, Replica: replica, Pod: pod,
		Interval: DefaultReportInterval, dirty: make(chan struct{}, 1), after: time.After}
}

// Notify marks the report dirty; it never blocks.
func (r *Reporter) Notify(string) {
	select {
	case r.dirty <- struct{}{}:
	default: // already dirty: the next write carries this change too
	}
}

// NeedLeaderElection is false: every replica reports its own proxies.
func (r *Reporter) NeedLeaderElection() bool { return false }

// Start writes the report whenever it is dirty, until ctx ends. It first
// writes it afresh: a report left by this replica's previous run describes
// proxies that are gone.
func (r *Reporter) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("xds-report")
	var owner []metav1.OwnerReference
	if r.Pod != "" {
		pod := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Pod}, pod); err != nil {
			log.Error(err, "reading this replica's pod; its report will outlive it", "pod", r.Pod)
		} else {
			owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
		}
	}
	var (
		written   publish.Report
		first     = true
		backoff   time.Duration
		retry     <-chan time.Time // set while a failed write waits to be tried again
		paced     <-chan time.Time // set while a change waits for Interval to pass
		lastWrite time.Time
	)
	for {
		if retry == nil && paced == nil {
			if report := r.report(); first || !maps.Equal(report, written) {
				if wait := r.Interval - time.Since(lastWrite); !first && wait > 0 {
					paced = r.after(wait)
				} else if err := r.write(ctx, report, owner); err != nil && ctx.Err() == nil {
					log.Error(err, "writing this replica's proxy report")
					backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
					retry = r.after(backoff)
				} else {
					first, written, backoff, lastWrite = false, report, 0, time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			r.withdraw(log)
			return nil
		case <-r.dirty:
		case <-retry:
			retry = nil
		case <-paced:
			paced, lastWrite = nil, time.Time{} // the interval has passed
		}
	}
}

// withdraw deletes the report of a replica that stops: its proxies go with
// it. A replica that dies leaves its report behind; in a cluster, the report
// goes with its pod, and a replica restarted under the same name replaces it.
func (r *Reporter) withdraw(log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	report := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: publish.ReportName(r.Replica)}}
	if err := r.Client.Delete(ctx, report); client.IgnoreNotFound(err) != nil {
		log.Error(err, "deleting this replica's proxy report")
	}
}

// report reads what this replica's proxies answered.
func (r *Reporter) report() publish.Report {
	out := publish.Report{}
	t := r.Server.Tracker()
	for _, id := range t.Fleets() {
		version := r.Server.Version(id)
		c := t.Counts(id, version)
		out[id] = publish.FleetProxies{Version: version, Connected: c.Connected, Acked: c.Acked, Nacked: c.Nacked, LastNACK: publish.Truncate(c.LastNACK)}
	}
	return out
}

func (r *Reporter) write(ctx context.Context, report publish.Report, owner []metav1.OwnerReference) error {
	want, err := publish.ReportConfigMap(r.Namespace, r.Replica, report)
	if err != nil {
		return err
	}
	want.OwnerReferences = owner
	if r.last == nil {
		have := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
		if apierrors.IsNotFound(err) {
			if err := r.Client.Create(ctx, want); err != nil {
				return err
			}
			r.last = want
			return nil
		}
		if err != nil {
			return err
		}
		r.last = have
	}
	updated := r.last.DeepCopy()
	updated.Data, updated.Labels, updated.Annotations, updated.OwnerReferences = want.Data, want.Labels, want.Annotations, owner
	if err := r.Client.Update(ctx, updated); err != nil {
		r.last = nil // read it again: someone else wrote it, or deleted it
		return err
	}
	r.last = updated
	return nil
}

// ServerOptions configure the xDS server of a replica.
type ServerOptions struct {
	// BindAddress is the server's host:port.
	BindAddress string
	// Namespace is the operator's namespace, where the replica's report goes.
	Namespace string
	// Replica names this replica; Pod is its pod, if any.
	Replica, Pod string
	// Limits bound the server's connections and streams; zero means xds.DefaultLimits.
	Limits xds.Limits
	// Authority, when set, has the server speak mutual TLS only, with its
	// certificate from the xDS CA; nil serves plaintext.
	Authority *authority.Store
}

// AddServer adds to mgr this replica's xDS server and the reporter of its
// proxies, a readiness check that passes once the server listens, and a
// health and a readiness check that fail when it can no longer publish.
func AddServer(mgr ctrl.Manager, o ServerOptions) (*xds.Server, error) {
	reporter := NewReporter(mgr.GetClient(), mgr.GetAPIReader(), o.Namespace, o.Replica, o.Pod)
	server := xds.NewServer(o.BindAddress, ctrl.Log.WithName("xds"), reporter.Notify)
	if o.Limits == (xds.Limits{}) {
		o.Limits = xds.DefaultLimits
	}
	if err := server.SetLimits(o.Limits); err != nil {
		return nil, err
	}
	if o.Authority != nil {
		server.SetTLS(o.Authority.ServerConfig, o.Authority.Options.TrustDomain)
	}
	reporter.Server = server
	if err := mgr.Add(server); err != nil {
		return nil, err
	}
	if err := mgr.Add(reporter); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("xds", server.Listening); err != nil {
		return nil, err
	}
	if o.Authority != nil {
		// Not ready before the leader made the CA: until then no TLS
		// handshake can succeed.
		if err := mgr.AddReadyzCheck("xds-certificate-authority", func(req *http.Request) error {
			_, err := o.Authority.Authority(req.Context())
			return err
		}); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("xds-publishing", server.Healthy); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("xds-publishing", server.Healthy); err != nil {
		return nil, err
	}
	return server, nil
}
