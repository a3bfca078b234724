package envoyconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "envoyconfig"

// Cache indexes of EnvoyConfigs.
const (
	envoyRefIndex = "spec.envoyRef"
	serviceIndex  = "spec.serviceEndpoints.service"
)

// Reconciler keeps each fleet's configuration on the xDS server. Its requests
// name fleets (the namespace and name of an Envoy), not EnvoyConfigs: every
// EnvoyConfig of a fleet is merged into one configuration. It runs on every
// replica, since every replica serves xDS; only the leader writes status.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Status   status.Writer
	Server   *xds.Server
	// IsLeader reports whether this replica may write status.
	IsLeader func() bool

	mu     sync.Mutex
	fleets map[string]*fleetState
}

// fleetState is what the controller remembers of a fleet between reconciles.
type fleetState struct {
	// lastGood holds, by EnvoyConfig, its last accepted version.
	lastGood map[string]xds.Config
	current  published
	// acked is the last version every connected proxy accepted.
	acked *published
	// rolledBackFrom is the version that every proxy rejected; it is not
	// published again until the configuration changes. rollbackDetail is a
	// proxy's error_detail for it.
	rolledBackFrom, rollbackDetail string
}

type published struct {
	version   string
	resources map[string][]cachetypes.Resource
}

// NewReconciler returns a Reconciler for mgr that publishes on server.
func NewReconciler(mgr ctrl.Manager, server *xds.Server) *Reconciler {
	elected := mgr.Elected()
	recorder := mgr.GetEventRecorder(ControllerName)
	return &Reconciler{
		Client:   mgr.GetClient(),
		Recorder: recorder,
		Status:   status.Writer{Client: mgr.GetClient(), Recorder: recorder},
		Server:   server,
		IsLeader: func() bool {
			select {
			case <-elected:
				return true
			default:
				return false
			}
		},
		fleets: map[string]*fleetState{},
	}
}

// ProxyEvents returns a notify function for xds.NewServer that wakes the
// controller when a fleet's proxies change, and the channel it feeds.
func ProxyEvents() (func(fleet string), chan event.GenericEvent) {
	ch := make(chan event.GenericEvent, 4096)
	return func(fleetID string) {
		id, err := fleet.Parse(fleetID)
		if err != nil {
			return // not a fleet any Envoy could have
		}
		select {
		case ch <- event.GenericEvent{Object: &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name}}}:
		default: // the controller is behind; a later event or reconcile catches up
		}
	}, ch
}

// SetupWithManager registers the controller. proxyEvents comes from ProxyEvents.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, proxyEvents <-chan event.GenericEvent) error {
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
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Watches(&examplev1.EnvoyConfig{}, fleetsOfConfig{}).
		Watches(&examplev1.Envoy{}, &handler.EnqueueRequestForObject{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfSlice)).
		WatchesRawSource(source.Channel(proxyEvents, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			go r.enqueueOnElection(ctx, mgr.Elected(), q)
			return nil
		})).
		Complete(r)
}

// enqueueOnElection queues every fleet that has EnvoyConfigs once this
// replica is elected. Until then another replica wrote their status, with
// the counts of its own proxies, and nothing else would make this one write
// it before the next change of a fleet.
func (r *Reconciler) enqueueOnElection(ctx context.Context, elected <-chan struct{}, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	select {
	case <-elected:
	case <-ctx.Done():
		return
	}
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list); err != nil {
		logf.FromContext(ctx).Error(err, "listing EnvoyConfigs after the election")
		return
	}
	for i := range list.Items {
		q.Add(fleetRequest(&list.Items[i]))
	}
}

// +kubebuilder:rbac:groups=example.com,resources=envoyconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=envoyconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile publishes one fleet's configuration and reports on its EnvoyConfigs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fleetID := fleet.ID{Namespace: req.Namespace, Name: req.Name}.String()
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(req.Namespace), client.MatchingFields{envoyRefIndex: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	configs := make([]*examplev1.EnvoyConfig, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			configs = append(configs, &list.Items[i])
		}
	}
	envoyMissing := false
	if err := r.Client.Get(ctx, req.NamespacedName, &examplev1.Envoy{}); apierrors.IsNotFound(err) {
		envoyMissing = true
	} else if err != nil {
		return ctrl.Result{}, err
	}

	r.mu.Lock()
	fs := r.fleets[fleetID]
	if fs == nil {
		fs = &fleetState{lastGood: map[string]xds.Config{}}
		r.fleets[fleetID] = fs
	}
	if len(configs) == 0 && envoyMissing {
		delete(r.fleets, fleetID)
		r.mu.Unlock()
		r.Server.ClearFleet(fleetID)
		return ctrl.Result{}, nil
	}
	states, err := r.publish(ctx, fleetID, fs, configs)
	r.mu.Unlock()
	if err != nil {
		return ctrl.Result{}, err
	}

	if !r.IsLeader() {
		return ctrl.Result{}, nil
	}
	var errs []error
	for _, c := range configs {
		s := states[key(c)]
		s.EnvoyMissing = envoyMissing
		after := c.DeepCopy()
		after.Status = Status(c, s)
		if err := r.Status.Write(ctx, c, after); !apierrors.IsNotFound(err) { // a deleted config needs no status
			errs = append(errs, err)
		}
	}
	return status.Result(errors.Join(errs...), false)
}

// publish builds the fleet's configuration from configs, publishes it (or
// rolls back to the last version every proxy accepted) and returns each
// config's state. r.mu is held.
func (r *Reconciler) publish(ctx context.Context, fleetID string, fs *fleetState, configs []*examplev1.EnvoyConfig) (map[string]State, error) {
	log := logf.FromContext(ctx)
	states := map[string]State{}
	var valid []xds.Config
	present := map[string]bool{}
	for _, c := range configs {
		k := key(c)
		present[k] = true
		resources, errs := xds.Parse(k, c.Spec.Resources)
		resources = append(resources, endpointResources(k, c.Spec.ServiceEndpoints, r.slicesFor(ctx, c.Namespace))...)
		if len(errs) > 0 {
			states[k] = State{Invalid: errs}
			if good, ok := fs.lastGood[k]; ok {
				valid = append(valid, good)
			}
			continue
		}
		valid = append(valid, xds.Config{Name: k, Created: c.CreationTimestamp.Time, Resources: resources})
	}
	for k := range fs.lastGood {
		if !present[k] {
			delete(fs.lastGood, k) // deleted EnvoyConfigs are no longer served
		}
	}

	fleet := xds.Build(valid, fs.lastGood)
	for _, c := range valid {
		if _, rejected := fleet.Rejected[c.Name]; !rejected && len(states[c.Name].Invalid) == 0 {
			fs.lastGood[c.Name] = c
		}
	}

	if fleet.Version != fs.rolledBackFrom {
		fs.rolledBackFrom = ""
		if err := r.Server.SetFleet(ctx, fleetID, fleet.Version, fleet.Resources); err != nil {
			return nil, fmt.Errorf("publishing %s: %w", fleetID, err)
		}
		if fs.current.version != fleet.Version {
			log.Info("published fleet configuration", "fleet", fleetID, "version", fleet.Version)
		}
		fs.current = published{version: fleet.Version, resources: fleet.Resources}
	}

	counts := r.Server.Tracker().Counts(fleetID, fs.current.version)
	if counts.Connected > 0 && counts.Acked == counts.Connected {
		fs.acked = &published{version: fs.current.version, resources: fs.current.resources}
	}
	if counts.Connected > 0 && counts.Nacked == counts.Connected && fs.acked != nil && fs.acked.version != fs.current.version {
		// Every proxy rejected the newest version: serve the last one they accepted.
		log.Info("every proxy rejected the configuration; rolling back", "fleet", fleetID,
			"rejected", fs.current.version, "restored", fs.acked.version, "detail", counts.LastNACK)
		fs.rolledBackFrom, fs.rollbackDetail = fs.current.version, counts.LastNACK
		if err := r.Server.SetFleet(ctx, fleetID, fs.acked.version, fs.acked.resources); err != nil {
			return nil, fmt.Errorf("rolling back %s: %w", fleetID, err)
		}
		fs.current = *fs.acked
		// The leader's status writer records the Warning event of the
		// configs' Degraded condition (reason RolledBack).
		counts = r.Server.Tracker().Counts(fleetID, fs.current.version)
	}

	for _, c := range configs {
		k := key(c)
		s := states[k]
		s.Rejected = fleet.Rejected[k]
		s.Clashes = fleet.Clashes[k]
		s.PublishedVersion = fs.current.version
		s.RolledBack = fs.rolledBackFrom != ""
		s.RollbackDetail = fs.rollbackDetail
		s.Proxies = counts
		states[k] = s
	}
	return states, nil
}

func (r *Reconciler) slicesFor(ctx context.Context, ns string) func(service string) []discoveryv1.EndpointSlice {
	return func(service string) []discoveryv1.EndpointSlice {
		var list discoveryv1.EndpointSliceList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
			logf.FromContext(ctx).Error(err, "listing EndpointSlices", "service", service)
			return nil
		}
		return list.Items
	}
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
	seen := map[string]bool{}
	var out []reconcile.Request
	for _, c := range list.Items {
		if !seen[c.Spec.EnvoyRef] {
			seen[c.Spec.EnvoyRef] = true
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.EnvoyRef}})
		}
	}
	return out
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
