// Package envoyconfig is the EnvoyConfig controller, the shell around the
// control plane's stages. Its Reconcile tells a fleet's story in phases, a
// file each: read (read.go) the fleet's EnvoyConfigs, its Envoy, its stored
// revision history, and the EndpointSlices and Secrets the content uses;
// translate them (xds/translate); on the leader, decide what is served
// (xds/publish) and record the decision in the API server (record.go); on
// every replica, serve the recorded revision (serve.go, server.Server); and on
// the leader, report on every EnvoyConfig (report.go), with the replicas'
// reports of their proxies. Every replica thus serves exactly what is
// recorded, after a restart or a failover too.
package envoyconfig

import (
	"cmp"
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "envoyconfig"

// Cache indexes of EnvoyConfigs.
const (
	envoyRefIndex = "spec.envoyRef"
	serviceIndex  = "spec.serviceEndpoints.service"
	secretIndex   = "spec.tlsSecrets.secretRef"
)

// Reconciler keeps each fleet's configuration on the xDS server. Its requests
// name fleets (the namespace and name of an Envoy), not EnvoyConfigs: every
// EnvoyConfig of a fleet is merged into one configuration. It runs on every
// replica, since every replica serves xDS; only the leader decides what is
// published, and writes.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Status   status.Writer
	Server   *server.Server
	// Histories reads and writes the fleets' revision histories.
	Histories store.Store
	// IsLeader reports whether this replica decides and writes.
	IsLeader func() bool
	// Namespace is the operator's namespace, which holds the replicas' reports.
	Namespace string
	// Policy is the content policy: what is refused is never served.
	Policy translate.Policy
	// Envoy is the real Envoy in which the leader loads content before it
	// records a revision that holds it (judge.go); nil, or without an
	// Envoy, content is recorded on the rules alone, and its status says so.
	Envoy *envoyjudge.Judge
	// Now is the clock of rollouts' bake times; nil is time.Now.
	Now func() time.Time
	// GatewayAPI is set when the Gateway API's CRDs are installed: a fleet
	// whose Envoy a Gateway controls then serves the Gateway (gateway.go).
	GatewayAPI bool
	// APIReader reads what the cache does not hold: a Gateway's backend
	// Services and its listeners' Secrets.
	APIReader client.Reader
	// Name, when set, names the controller instead of ControllerName, in
	// its metrics too: a test that runs more than one replica in a process
	// tells their queues apart by it.
	Name string

	mu      sync.Mutex
	reports map[string]parsedReport // by ConfigMap name
	// leftovers are the reports of replicas that are gone (read.go).
	leftovers leftoverReports
	// ownHistories and ownStatuses are the leader's last writes of each
	// fleet's history and each EnvoyConfig's status, which its cache may not
	// have seen yet (record.go, report.go).
	ownHistories ownHistories
	ownStatuses  ownStatuses
	// accepted are the revisions found accepted and not yet written so
	// (record.go); awaiting, the fleets whose status waits for their
	// proxies' answers to a new revision (report.go).
	accepted acceptedMarks
	awaiting awaitingAnswers
	// gatewayBackends are the backend Services of the fleets' Gateways.
	gatewayBackends gatewayBackends
	// queued holds, by fleet, when an EnvoyConfig's write last queued it,
	// until a reconcile of the fleet starts (watches.go).
	queued queuedAt
	// queue is the controller's queue, once its sources have started: a
	// resync queues the fleets it finds on it (watches.go).
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// NewReconciler returns a Reconciler for mgr that serves on server; the
// replicas' reports are in namespace. Its content policy knows the
// operator's namespace and allows nothing more; set Policy for more.
func NewReconciler(mgr ctrl.Manager, server *server.Server, namespace string) *Reconciler {
	elected := mgr.Elected()
	recorder := mgr.GetEventRecorder(ControllerName)
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  recorder,
		Histories: store.Store{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: namespace},
		Status:    status.Writer{Client: mgr.GetClient(), Recorder: recorder, Transitions: transitions},
		Server:    server,
		Namespace: namespace,
		Policy:    translate.Policy{Namespace: namespace},
		IsLeader: func() bool {
			select {
			case <-elected:
				return true
			default:
				return false
			}
		},
		reports: map[string]parsedReport{},
	}
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &examplev1.EnvoyConfig{}, envoyRefIndex, func(o client.Object) []string {
		return []string{o.(*examplev1.EnvoyConfig).Spec.EnvoyRef}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &examplev1.EnvoyConfig{}, serviceIndex, func(o client.Object) []string {
		var out []string
		for _, se := range o.(*examplev1.EnvoyConfig).Spec.ServiceEndpoints {
			out = append(out, se.Service)
		}
		return out
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &examplev1.EnvoyConfig{}, secretIndex, func(o client.Object) []string {
		var out []string
		for _, ts := range o.(*examplev1.EnvoyConfig).Spec.TLSSecrets {
			out = append(out, ts.SecretRef)
		}
		return out
	}); err != nil {
		return err
	}
	return r.watchGateways(ctrl.NewControllerManagedBy(mgr)).
		Named(cmp.Or(r.Name, ControllerName)).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Watches(&examplev1.EnvoyConfig{}, fleetsOfConfig{queued: &r.queued}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !r.readsNothingNew(e.ObjectOld, e.ObjectNew) && !r.servedAsRecorded(e.ObjectOld, e.ObjectNew)
			},
		})).
		Watches(&examplev1.Envoy{}, &handler.EnqueueRequestForObject{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfSlice)).
		// The manager's cache holds only the Secrets labelled for the control
		// plane (names.XDSSecretLabel): a Secret that gains or loses the
		// label comes or goes here.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfSecret)).
		// Revision histories, and the replicas' reports of their proxies.
		Watches(&corev1.ConfigMap{}, controlPlaneConfigMaps{r}).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.queue.Store(&q)
			go r.enqueueOnElection(ctx, mgr.Elected(), q)
			return nil
		})).
		Complete(r)
}

// +kubebuilder:rbac:groups=example.com,resources=envoyconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=envoyconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile tells one fleet's story in phases. Every replica reads the
// fleet's world and serves what is recorded; the leader alone decides,
// records and reports. A fleet that is gone is forgotten. A request that
// names no fleet is a resync, which queues the fleets it stands for
// (watches.go).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if isResync(req) {
		return ctrl.Result{}, r.resync(ctx, req.Namespace)
	}
	// Each phase's wall time, observed when the leader records a new
	// revision (server.PushTimer).
	pt := server.StartPush()
	if at, ok := r.queued.take(req.NamespacedName); ok {
		pt.Queued(at)
	}
	w, err := r.read(ctx, fleet.ID{Namespace: req.Namespace, Name: req.Name})
	if err != nil {
		return ctrl.Result{}, err
	}
	pt.Mark(server.StageRead)
	leader := r.IsLeader()
	if w.gone() {
		return ctrl.Result{}, r.forget(ctx, w, leader)
	}
	in := w.input(r.Policy.ForFleet(w.envoy))
	ir := translate.Translate(in)
	pt.Mark(server.StageTranslate)
	judgeAgain := false
	if leader {
		ir, judgeAgain = r.judge(ctx, w, in, ir)
		pt.Mark(server.StageJudge)
	}
	// The leader reads the replicas' reports once: what it decides on is
	// what the status tells.
	var reports []report.Report
	if leader {
		if reports, err = r.readReports(ctx); err != nil {
			return ctrl.Result{}, err
		}
		pt.Mark(server.StageReports)
	}
	rec := stored(w)
	if leader && !w.unrecorded() {
		rec = r.record(ctx, w, ir, reports)
		pt.Mark(server.StageRecord)
	} else {
		exportStep(w.id.String(), rec.rollout) // only the leader judges a step: none here
	}
	if res, ends := rec.ends(); ends {
		return res, nil
	}
	if err := r.serve(ctx, w, ir, rec); err != nil || !leader {
		return ctrl.Result{}, err
	}
	pt.Mark(server.StageServe)
	if err := r.retireLegacy(ctx, w, rec); err != nil {
		return ctrl.Result{}, err
	}
	pt.Skip()
	res, err := r.report(ctx, w, ir, rec, reports)
	pt.Mark(server.StageStatus)
	if rec.published {
		pt.Observe()
	}
	after := rec.rollout.RecheckAfter // the step's bake ends: decide again then
	if rec.again {
		after = time.Millisecond
	}
	if judgeAgain && (after == 0 || judgeRetry < after) {
		after = judgeRetry
	}
	if err == nil && after > 0 && (res.RequeueAfter == 0 || after < res.RequeueAfter) {
		res.RequeueAfter = after
	}
	return res, err
}

// readsNothingNew reports whether an update of an EnvoyConfig from old to
// new changed nothing a reconcile reads, beyond what statusOnly (the
// EnvoyConfig watch's own filter) knows: the leader's status write of a
// change moves two more fields that are read only in cases a settled fleet
// is not in. status.publishedVersion moves in the status of every
// EnvoyConfig of a fleet that serves a new revision; a reconcile reads it
// only to adopt the previous release's history of the fleet (Vouched,
// history.AdoptLegacy), so it is nothing new while the fleet has no legacy
// history. status.contentHash moves in the status of the EnvoyConfig that
// changed; it is read only to tell whether status.rejectedVersions still
// holds (publish.RejectionsOf), so it is nothing new while neither status
// names a rejected version (the previous release's rejection, which names
// none, is a Published condition that statusOnly sees).
func (r *Reconciler) readsNothingNew(old, new client.Object) bool {
	o, ok1 := old.(*examplev1.EnvoyConfig)
	n, ok2 := new.(*examplev1.EnvoyConfig)
	if !ok1 || !ok2 {
		return false
	}
	moved := *o // a shallow copy: only the status's own fields are set below
	if len(o.Status.RejectedVersions) == 0 && len(n.Status.RejectedVersions) == 0 {
		moved.Status.ContentHash = n.Status.ContentHash
	}
	moved.Status.PublishedVersion = n.Status.PublishedVersion
	same := moved.Status.ContentHash == o.Status.ContentHash && moved.Status.PublishedVersion == o.Status.PublishedVersion
	if same || !statusOnly(&moved, n) {
		return false // statusOnly alone tells, or the update is read
	}
	if o.Status.PublishedVersion == n.Status.PublishedVersion {
		return true
	}
	legacy := &corev1.ConfigMap{}
	err := r.Client.Get(context.Background(), client.ObjectKey{Namespace: n.Namespace, Name: history.LegacyName(n.Spec.EnvoyRef)}, legacy)
	return apierrors.IsNotFound(err)
}

// servedAsRecorded reports whether an update of an EnvoyConfig's spec
// brings this replica, a follower, nothing to serve: a follower serves its
// fleet's recorded revision, never the EnvoyConfigs as they are, and the
// leader's record of the change wakes it (a new revision of the history).
// So an edit that keeps the EnvoyConfig in its fleet, and its metadata as
// it is, wakes no follower of a fleet whose history is recorded. Should
// the follower be elected, it queues every fleet then (enqueueOnElection).
func (r *Reconciler) servedAsRecorded(old, new client.Object) bool {
	o, ok1 := old.(*examplev1.EnvoyConfig)
	n, ok2 := new.(*examplev1.EnvoyConfig)
	if !ok1 || !ok2 || o.Generation == n.Generation || o.Spec.EnvoyRef != n.Spec.EnvoyRef ||
		!o.DeletionTimestamp.IsZero() || !n.DeletionTimestamp.IsZero() ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) || r.IsLeader() {
		return false
	}
	id := fleet.ID{Namespace: n.Namespace, Name: n.Spec.EnvoyRef}
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(context.Background(), client.ObjectKey{Namespace: r.Namespace, Name: history.Name(id)}, cm); err != nil {
		return false
	}
	return history.IsOf(cm, r.Namespace, id)
}
