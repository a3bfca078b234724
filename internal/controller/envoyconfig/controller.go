// Package envoyconfig is the EnvoyConfig controller, the shell around the
// control plane's stages: it reads a fleet's EnvoyConfigs, EndpointSlices,
// the Secrets their tlsSecrets name, stored revision history and the replicas' proxy reports; translates them
// (xds/translate); on the leader, decides what is served (xds/publish) and
// records the decision in the API server; on every replica, serves the
// recorded revision (xds.Server); and on the leader, reports on every
// EnvoyConfig. Every replica thus serves exactly what is recorded, after a
// restart or a failover too.
package envoyconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
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
	Client client.Client
	// APIReader reads past the cache, when a create says the cache is behind.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Status    status.Writer
	Server    *xds.Server
	// IsLeader reports whether this replica decides and writes.
	IsLeader func() bool
	// Namespace is the operator's namespace, which holds the replicas' reports.
	Namespace string
	// Policy is the content policy: what is refused is never served.
	Policy translate.Policy

	mu      sync.Mutex
	reports map[string]parsedReport // by ConfigMap name
}

// parsedReport is a replica's report as read at a resourceVersion.
type parsedReport struct {
	resourceVersion string
	report          publish.Report
}

// NewReconciler returns a Reconciler for mgr that serves on server; the
// replicas' reports are in namespace. Its content policy knows the
// operator's namespace and allows nothing more; set Policy for more.
func NewReconciler(mgr ctrl.Manager, server *xds.Server, namespace string) *Reconciler {
	elected := mgr.Elected()
	recorder := mgr.GetEventRecorder(ControllerName)
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  recorder,
		Status:    status.Writer{Client: mgr.GetClient(), Recorder: recorder},
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
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Watches(&examplev1.EnvoyConfig{}, fleetsOfConfig{}).
		Watches(&examplev1.Envoy{}, &handler.EnqueueRequestForObject{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfSlice)).
		// The manager's cache holds only the Secrets labelled for the control
		// plane (objects.XDSSecretLabel): a Secret that gains or loses the
		// label comes or goes here.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfSecret)).
		// Revision histories, and the replicas' reports of their proxies.
		Watches(&corev1.ConfigMap{}, controlPlaneConfigMaps{r}).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			go r.enqueueOnElection(ctx, mgr.Elected(), q)
			return nil
		})).
		Complete(r)
}

// enqueueOnElection queues, once this replica is elected, every fleet that
// has EnvoyConfigs, and every fleet that has a history. Until then another
// replica wrote their status, with the counts of its own proxies, and
// nothing else would make this one write it before the next change of a
// fleet; and a fleet deleted while no leader ran leaves a history that only
// the leader deletes (an owner reference cannot cross namespaces).
func (r *Reconciler) enqueueOnElection(ctx context.Context, elected <-chan struct{}, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	select {
	case <-elected:
	case <-ctx.Done():
		return
	}
	log := logf.FromContext(ctx)
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list); err != nil {
		log.Error(err, "listing EnvoyConfigs after the election")
	}
	for i := range list.Items {
		q.Add(fleetRequest(&list.Items[i]))
	}
	var histories corev1.ConfigMapList
	if err := r.Client.List(ctx, &histories, client.InNamespace(r.Namespace), client.MatchingLabels{publish.ComponentLabel: publish.HistoryComponent}); err != nil {
		log.Error(err, "listing the fleets' histories after the election")
	}
	var legacy corev1.ConfigMapList
	if err := r.Client.List(ctx, &legacy, client.MatchingLabels{publish.ComponentLabel: publish.LegacyComponent}); err != nil {
		log.Error(err, "listing the previous release's histories after the election")
	}
	for _, cm := range append(histories.Items, legacy.Items...) {
		id, ok := publish.HistoryFleet(&cm, r.Namespace)
		if !ok {
			id, ok = publish.LegacyFleet(&cm)
		}
		if ok {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		}
	}
}

// +kubebuilder:rbac:groups=example.com,resources=envoyconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=envoyconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile serves one fleet's recorded revision and, on the leader, decides
// what it is and reports on the fleet's EnvoyConfigs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	id := fleet.ID{Namespace: req.Namespace, Name: req.Name}
	fleetID := id.String()
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(req.Namespace), client.MatchingFields{envoyRefIndex: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	configs := make([]*examplev1.EnvoyConfig, 0, len(list.Items))
	current := make([]translate.Config, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			configs = append(configs, &list.Items[i])
			current = append(current, translate.FromObject(&list.Items[i]))
		}
	}
	envoy := &examplev1.Envoy{}
	envoyMissing := false
	if err := r.Client.Get(ctx, req.NamespacedName, envoy); apierrors.IsNotFound(err) {
		envoyMissing = true
	} else if err != nil {
		return ctrl.Result{}, err
	}
	st, err := r.loadHistory(ctx, id, configs)
	if err != nil {
		return ctrl.Result{}, err
	}
	hist := st.history
	leader := r.IsLeader()

	if len(configs) == 0 && envoyMissing {
		// The fleet is really gone: nothing to serve, and no history to keep.
		r.Server.ClearFleet(fleetID)
		if leader {
			return ctrl.Result{}, r.forget(ctx, st)
		}
		return ctrl.Result{}, nil
	}

	var published []translate.Config
	if rev := hist.Served(); rev != nil {
		published = rev.Configs
	}
	slices, err := r.slices(ctx, req.Namespace, current, published)
	if err != nil {
		return ctrl.Result{}, err
	}
	secrets, err := r.secrets(ctx, req.Namespace, current, published)
	if err != nil {
		return ctrl.Result{}, err
	}
	ir := translate.Translate(translate.Input{Configs: current, Published: published, Slices: slices, Secrets: secrets, Policy: r.Policy})

	var (
		publishErr error
		clashed    bool
	)
	// A fleet that never had an EnvoyConfig is served empty, and nothing is
	// recorded for it.
	unrecorded := len(configs) == 0 && st.object == nil
	if leader && !unrecorded {
		d := publish.Decide(hist, ir, publish.Sum(r.readReports(ctx), fleetID, hist.Current), publish.RejectionsOf(configs, ir.Version))
		if !st.readable || d.Changed(hist) {
			publishErr = r.record(ctx, id, st.object, d.History)
			switch {
			case publishErr == nil:
				r.announce(ctx, fleetID, hist, d, envoy, envoyMissing, configs)
				hist, st.readable = d.History, true
			case apierrors.IsConflict(publishErr) || r.isOurHistory(ctx, id, publishErr):
				// The cache was behind the history: decide again on what is stored.
				return ctrl.Result{RequeueAfter: status.ConflictRetry}, nil
			case apierrors.HasStatusCause(publishErr, corev1.NamespaceTerminatingCause):
				return ctrl.Result{}, nil // the operator's namespace goes: so does the operator
			default:
				clashed = apierrors.IsAlreadyExists(publishErr)
			}
		}
	}

	// Serve what is recorded: its served revision, or nothing when it
	// records that nothing is; for a fleet never configured, its (empty) IR.
	// A history missing or unreadable changes nothing served until the
	// leader records it again.
	switch served := hist.Served(); {
	case served != nil || unrecorded:
		version, resources := ir.Version, ir.Resources
		if served != nil {
			version = hist.Current
			resources, _ = translate.Render(r.Policy, served.Configs, current, slices, secrets)
		}
		if err := r.Server.SetFleet(ctx, fleetID, version, resources); err != nil {
			return ctrl.Result{}, fmt.Errorf("serving %s: %w", fleetID, err)
		}
	case st.readable && hist.Current == "":
		r.Server.ClearFleet(fleetID)
	}
	if leader && st.legacy != nil && (st.readable || unrecorded) {
		// The fleet's history is in the operator's namespace now, or needs none.
		if err := r.Client.Delete(ctx, st.legacy, client.Preconditions{UID: &st.legacy.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	if !leader {
		return ctrl.Result{}, nil
	}

	acks := publish.Sum(r.readReports(ctx), fleetID, hist.Current)
	base := State{Held: ir.Held, EnvoyMissing: envoyMissing, PublishedVersion: hist.Current, Proxies: acks}
	if rev := hist.Find(ir.Version); rev != nil && rev.Rejected != "" {
		base.Rejected, base.RejectedVersion = rev.Rejected, rev.Version
		base.RolledBack = hist.Current != "" && hist.Current != ir.Version
	}
	if rev := hist.Served(); rev != nil && rev.Rejected != "" && base.Rejected == "" {
		base.ServedRejected = rev.Rejected
	}
	if publishErr != nil {
		p := conditions.FromError(publishErr)
		if clashed {
			p.Reason = conditions.ResourceExists // another's ConfigMap has the name
		}
		p.Message = fmt.Sprintf("recording the fleet's revision in ConfigMap %s/%s: %s", r.Namespace, publish.HistoryName(id), p.Message)
		base.PublishError = p
	}
	var errs []error
	for _, c := range configs {
		s := base
		s.Config = ir.Configs[translate.FromObject(c).Name]
		after := c.DeepCopy()
		after.Status = Status(c, s)
		if err := r.Status.Write(ctx, c, after); !apierrors.IsNotFound(err) { // a deleted config needs no status
			errs = append(errs, err)
		}
	}
	if publishErr != nil && !clashed {
		errs = append(errs, publishErr)
	}
	return status.Result(errors.Join(errs...), clashed)
}

// storedHistory is what the API server holds of a fleet's history.
type storedHistory struct {
	// object is the fleet's history in the operator's namespace, if there
	// is one (publish.IsHistoryOf): an object of that name that is not is
	// someone else's, and creating the history will clash with it.
	object *corev1.ConfigMap
	// history is what object records, when it passed publish.ReadHistory
	// (readable), or else what the previous release's history may give
	// (publish.AdoptLegacy); empty otherwise.
	history  publish.History
	readable bool
	// legacy is the fleet's history as the previous release kept it, in the
	// fleet's namespace, if there is one.
	legacy *corev1.ConfigMap
}

// loadHistory reads the fleet's history. Only what passes publish's checks
// is used: a copy anywhere else, one for another fleet, or one whose
// content is not consistent is ignored, and the leader writes it afresh.
func (r *Reconciler) loadHistory(ctx context.Context, id fleet.ID, configs []*examplev1.EnvoyConfig) (storedHistory, error) {
	var st storedHistory
	cm := &corev1.ConfigMap{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: publish.HistoryName(id)}, cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, err
	case publish.IsHistoryOf(cm, r.Namespace, id):
		st.object = cm
		if h, err := publish.ReadHistory(cm, r.Namespace, id); err != nil {
			logf.FromContext(ctx).Error(err, "the fleet's revision history is unusable; the leader writes it afresh", "fleet", id.String())
		} else {
			st.history, st.readable = h, true
		}
	}
	legacy := &corev1.ConfigMap{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: publish.LegacyHistoryName(id.Name)}, legacy); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, err
	case publish.IsLegacyHistoryOf(legacy, id):
		st.legacy = legacy
		if !st.readable {
			st.history, _ = publish.AdoptLegacy(legacy, id, Vouched(configs))
		}
	}
	return st, nil
}

// forget deletes the history of a fleet that is gone, and its legacy one.
func (r *Reconciler) forget(ctx context.Context, st storedHistory) error {
	var errs []error
	for _, cm := range []*corev1.ConfigMap{st.object, st.legacy} {
		if cm != nil {
			errs = append(errs, client.IgnoreNotFound(r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})))
		}
	}
	return errors.Join(errs...)
}

// record stores the fleet's history: the leader's decision. stored is the
// fleet's history as it is, nil when there is none.
func (r *Reconciler) record(ctx context.Context, id fleet.ID, stored *corev1.ConfigMap, h publish.History) error {
	want, err := publish.HistoryConfigMap(r.Namespace, id, h)
	if err != nil {
		return err
	}
	if stored == nil {
		return r.Client.Create(ctx, want)
	}
	updated := stored.DeepCopy()
	updated.BinaryData, updated.Data = want.BinaryData, nil
	updated.Labels, updated.Annotations = want.Labels, want.Annotations
	return r.Client.Update(ctx, updated) // a conflict means another leader wrote it: read again
}

// isOurHistory reports whether err is the refused create of a history that
// exists and is the fleet's: the cache had not seen it yet.
func (r *Reconciler) isOurHistory(ctx context.Context, id fleet.ID, err error) bool {
	if !apierrors.IsAlreadyExists(err) {
		return false
	}
	cm := &corev1.ConfigMap{}
	if r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: publish.HistoryName(id)}, cm) != nil {
		return false
	}
	return publish.IsHistoryOf(cm, r.Namespace, id)
}

// announce logs a recorded decision and records its events, once, on the
// fleet's Envoy (or, without one, on its first EnvoyConfig).
func (r *Reconciler) announce(ctx context.Context, fleetID string, prev publish.History, d publish.Decision, envoy *examplev1.Envoy, envoyMissing bool, configs []*examplev1.EnvoyConfig) {
	log := logf.FromContext(ctx)
	if d.History.Current != prev.Current {
		log.Info("published fleet configuration", "fleet", fleetID, "version", d.History.Current, "action", d.Action, "previous", prev.Current)
	}
	var regarding client.Object = envoy
	if envoyMissing {
		if len(configs) == 0 {
			return
		}
		regarding = configs[0]
	}
	for _, e := range d.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		log.Info(e.Message, "fleet", fleetID, "reason", e.Reason)
		r.Recorder.Eventf(regarding, nil, typ, e.Reason, "Publish", "%s", e.Message)
	}
}

// readReports returns every replica's report, parsing each only when it changed.
func (r *Reconciler) readReports(ctx context.Context) []publish.Report {
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{publish.ComponentLabel: publish.ReportComponent}); err != nil {
		logf.FromContext(ctx).Error(err, "listing the replicas' proxy reports")
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	out := make([]publish.Report, 0, len(list.Items))
	for i := range list.Items {
		cm := &list.Items[i]
		seen[cm.Name] = true
		p, ok := r.reports[cm.Name]
		if !ok || p.resourceVersion != cm.ResourceVersion {
			rep, err := publish.ReportFromConfigMap(cm)
			if err != nil {
				logf.FromContext(ctx).Error(err, "reading a replica's proxy report")
				continue
			}
			p = parsedReport{resourceVersion: cm.ResourceVersion, report: rep}
			r.reports[cm.Name] = p
		}
		out = append(out, p.report)
	}
	for name := range r.reports {
		if !seen[name] {
			delete(r.reports, name)
		}
	}
	return out
}

// slices returns, by Service, the EndpointSlices of the Services that the
// fleet's EnvoyConfigs, current and published, take endpoints from.
func (r *Reconciler) slices(ctx context.Context, ns string, configs ...[]translate.Config) (map[string][]discoveryv1.EndpointSlice, error) {
	out := map[string][]discoveryv1.EndpointSlice{}
	for _, cs := range configs {
		for _, c := range cs {
			for _, se := range c.Spec.ServiceEndpoints {
				if _, done := out[se.Service]; done {
					continue
				}
				var list discoveryv1.EndpointSliceList
				if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: se.Service}); err != nil {
					return nil, err
				}
				out[se.Service] = list.Items
			}
		}
	}
	return out, nil
}

// secrets returns, by name, the Secrets that the fleet's EnvoyConfigs,
// current and published, name in spec.tlsSecrets, as the cache holds them:
// only those labelled objects.XDSSecretLabel. Translation decides which of
// them are served; their data goes to the xDS server only, never to status,
// events, logs or the revision history.
func (r *Reconciler) secrets(ctx context.Context, ns string, configs ...[]translate.Config) (map[string]corev1.Secret, error) {
	out := map[string]corev1.Secret{}
	seen := map[string]bool{}
	for _, cs := range configs {
		for _, c := range cs {
			for _, ts := range c.Spec.TLSSecrets {
				if seen[ts.SecretRef] {
					continue
				}
				seen[ts.SecretRef] = true
				s := &corev1.Secret{}
				err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ts.SecretRef}, s)
				switch {
				case apierrors.IsNotFound(err):
					continue // missing or not labelled: translation says so
				case err != nil:
					return nil, err
				}
				out[ts.SecretRef] = *s
			}
		}
	}
	return out, nil
}

// fleetsOfSecret maps a Secret labelled for the control plane to the fleets
// whose EnvoyConfigs name it in spec.tlsSecrets.
func (r *Reconciler) fleetsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretIndex: o.GetName()}); err != nil {
		return nil
	}
	return fleetsOf(list.Items)
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

// fleetsOfSlice maps an EndpointSlice to the fleets whose EnvoyConfigs use its Service.
func (r *Reconciler) fleetsOfSlice(ctx context.Context, o client.Object) []reconcile.Request {
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{serviceIndex: svc}); err != nil {
		return nil
	}
	return fleetsOf(list.Items)
}

// fleetsOfConfig enqueues the fleet an EnvoyConfig belongs to, and on an
// update that moves it to another fleet, the old fleet too.
type fleetsOfConfig struct{}

func fleetRequest(o client.Object) reconcile.Request {
	c := o.(*examplev1.EnvoyConfig)
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.EnvoyRef}}
}

func (fleetsOfConfig) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(fleetRequest(e.Object))
}
func (fleetsOfConfig) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(fleetRequest(e.ObjectOld))
	q.Add(fleetRequest(e.ObjectNew))
}
func (fleetsOfConfig) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(fleetRequest(e.Object))
}
func (fleetsOfConfig) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(fleetRequest(e.Object))
}

func key(c *examplev1.EnvoyConfig) string { return c.Namespace + "/" + c.Name }

// controlPlaneConfigMaps enqueues the fleet of a revision history (in the
// operator's namespace; or as the previous release kept it, for the leader
// to take it over and delete it), and the fleets whose entries changed in a
// shard of a replica's report.
type controlPlaneConfigMaps struct{ r *Reconciler }

func (h controlPlaneConfigMaps) enqueue(o client.Object, old client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if id, ok := publish.HistoryFleet(o, h.r.Namespace); ok {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		return
	}
	if id, ok := publish.LegacyFleet(o); ok {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		return
	}
	if !publish.IsReport(o) || o.GetNamespace() != h.r.Namespace {
		return
	}
	report := func(o client.Object) publish.Report {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			return nil
		}
		rep, _ := publish.ReportFromConfigMap(cm)
		return rep
	}
	var before publish.Report
	if old != nil {
		before = report(old)
	}
	for _, fleetID := range publish.Changed(before, report(o)) {
		if id, err := fleet.Parse(fleetID); err == nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
		}
	}
}

func (h controlPlaneConfigMaps) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, nil, q)
}
func (h controlPlaneConfigMaps) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.ObjectNew, e.ObjectOld, q)
}
func (h controlPlaneConfigMaps) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, nil, q)
}
func (h controlPlaneConfigMaps) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(e.Object, nil, q)
}
