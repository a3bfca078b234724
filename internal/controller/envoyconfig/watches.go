package envoyconfig

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// What brings a fleet back to Reconcile: its requests name fleets, so every
// watched object maps to the fleets it concerns.

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
	ids, err := r.Histories.Fleets(ctx)
	if err != nil {
		log.Error(err, "listing the fleets' histories after the election")
	}
	for _, id := range ids {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
	}
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
