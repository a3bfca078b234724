package podset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "podset"

// BurstReplicas is the most pods one reconcile creates or deletes, as the
// ReplicaSet controller's burstReplicas: a PodSet scaled by thousands does so
// in steps, and its status reports progress in between.
const BurstReplicas = 500

// Workers is how many PodSets are reconciled at once. One PodSet is never
// reconciled by two workers at the same time.
const Workers = 5

// Reconciler keeps each PodSet's pods at spec.replicas and reports status.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client   client.Client
	Recorder events.EventRecorder
	Status   status.Writer

	exp *expectations
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return newReconciler(mgr.GetClient(), mgr.GetEventRecorder(ControllerName))
}

func newReconciler(c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{
		Client:   c,
		Recorder: recorder,
		Status:   status.Writer{Client: c, Recorder: recorder},
		exp:      newExpectations(),
	}
}

// SetupWithManager registers the controller: it reconciles a PodSet when the
// PodSet changes or when a pod it controls is created, changes or is deleted.
// The pod events also settle the PodSet's expectations.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), &corev1.Pod{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&demov1alpha1.PodSet{}).
		Watches(&corev1.Pod{}, r.podHandler()).
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(r)
}

// owner returns the request of the PodSet that controls pod, and that
// PodSet's UID, if one does. The UID tells a PodSet from an earlier one of
// the same name.
func owner(pod client.Object) (reconcile.Request, types.UID, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "PodSet" || ref.APIVersion != demov1alpha1.GroupVersion.String() {
		return reconcile.Request{}, "", false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.GetNamespace(), Name: ref.Name}}, ref.UID, true
}

func podKey(pod client.Object) string { return pod.GetNamespace() + "/" + pod.GetName() }

// podHandler turns pod events into expectations observed and reconciles of the
// owning PodSet.
func (r *Reconciler) podHandler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			req, uid, ok := owner(e.Object)
			if !ok {
				return
			}
			r.exp.CreationObserved(req.String(), uid)
			if e.Object.GetDeletionTimestamp() != nil {
				// Seen for the first time already being deleted (after a restart, say).
				r.exp.DeletionObserved(req.String(), uid, podKey(e.Object))
			}
			q.Add(req)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if old, _, ok := owner(e.ObjectOld); ok {
				if cur, _, ok := owner(e.ObjectNew); !ok || cur != old {
					q.Add(old) // the pod was released or moved to another owner
				}
			}
			req, uid, ok := owner(e.ObjectNew)
			if !ok {
				return
			}
			if e.ObjectNew.GetDeletionTimestamp() != nil && e.ObjectOld.GetDeletionTimestamp() == nil {
				// A graceful deletion: the pod stops counting now, not when it is gone.
				r.exp.DeletionObserved(req.String(), uid, podKey(e.ObjectNew))
			}
			q.Add(req)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			req, uid, ok := owner(e.Object)
			if !ok {
				return
			}
			r.exp.DeletionObserved(req.String(), uid, podKey(e.Object))
			q.Add(req)
		},
	}
}

// +kubebuilder:rbac:groups=demo.k8s.io,resources=podsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=demo.k8s.io,resources=podsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=demo.k8s.io,resources=podsets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one PodSet's pods to spec.replicas. When everything already
// matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.String()
	ps := &demov1alpha1.PodSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ps); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.Forget(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ps.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the pods
	}

	// Whether the cache holds every pod we created and none we deleted must be
	// known before the pods are listed: an event observed in between would
	// otherwise satisfy the expectations for a list that misses its pod.
	satisfied := r.exp.Satisfied(key, ps.UID)
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(ps.Namespace),
		client.MatchingFields{objects.ControllerUIDIndex: string(ps.UID)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], ps) {
			pods = append(pods, &list.Items[i])
		}
	}
	active, finished := Partition(pods)

	obs := Observed{Active: active, Managed: satisfied}
	var manageErr error
	if satisfied {
		obs.Failure, manageErr = r.manage(ctx, ps, key, active, finished)
	}

	after := ps.DeepCopy()
	after.Status = Status(ps, obs)
	if res, err := status.Result(errors.Join(manageErr, r.Status.Write(ctx, ps, after)), false); err != nil || res.RequeueAfter > 0 {
		return res, err // a failed create or delete is retried with backoff
	}
	if !r.exp.Satisfied(key, ps.UID) {
		// The pod events normally settle the expectations first; this is the
		// safety net for events that never come.
		return ctrl.Result{RequeueAfter: ExpectationsTimeout}, nil
	}
	return ctrl.Result{}, nil
}

// manage creates or deletes pods so that active has spec.replicas pods, and
// removes finished pods. It is called only when the expectations are satisfied.
func (r *Reconciler) manage(ctx context.Context, ps *demov1alpha1.PodSet, key string, active, finished []*corev1.Pod) (*Failure, error) {
	log := logf.FromContext(ctx)
	for _, p := range finished {
		uid := p.UID
		if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return r.failed(ps, demov1alpha1.PodSetReasonFailedDelete, fmt.Errorf("deleting finished pod %s: %w", p.Name, err))
		}
	}

	diff := len(active) - int(ps.Spec.Replicas)
	switch {
	case diff < 0:
		n := min(-diff, BurstReplicas)
		// Expect every creation before sending the first: the informer may
		// deliver a pod before its create returns.
		r.exp.ExpectCreations(key, ps.UID, n)
		created, err := slowStartBatch(n, 1, func() error {
			return r.Client.Create(ctx, Pod(ps))
		})
		// The creations that failed or were never sent will not be observed.
		for range n - created {
			r.exp.CreationObserved(key, ps.UID)
		}
		if created > 0 {
			log.V(1).Info("created pods", "count", created, "replicas", ps.Spec.Replicas)
			r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, demov1alpha1.PodSetEventSuccessfulCreate, "Create", "Created %d pods", created)
		}
		if err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil, nil // the PodSet goes with its namespace
			}
			return r.failed(ps, demov1alpha1.PodSetReasonFailedCreate, withoutGeneratedName(fmt.Errorf("creating pods: %w", err), Pod(ps).GenerateName))
		}
	case diff > 0:
		victims := PodsToDelete(active, min(diff, BurstReplicas))
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = podKey(p)
		}
		r.exp.ExpectDeletions(key, ps.UID, keys)
		var (
			wg       sync.WaitGroup
			deleted  atomic.Int32
			errMu    sync.Mutex
			firstErr error
		)
		for _, p := range victims {
			wg.Go(func() {
				uid := p.UID
				err := r.Client.Delete(ctx, p, client.Preconditions{UID: &uid})
				if err == nil {
					deleted.Add(1)
					return
				}
				// Gone already, or not deleted: no event will come for it.
				r.exp.DeletionObserved(key, ps.UID, podKey(p))
				if !apierrors.IsNotFound(err) {
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("deleting pod %s: %w", p.Name, err)
					}
					errMu.Unlock()
				}
			})
		}
		wg.Wait()
		if n := deleted.Load(); n > 0 {
			log.V(1).Info("deleted pods", "count", n, "replicas", ps.Spec.Replicas)
			r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, demov1alpha1.PodSetEventSuccessfulDelete, "Delete", "Deleted %d pods", n)
		}
		if firstErr != nil {
			return r.failed(ps, demov1alpha1.PodSetReasonFailedDelete, firstErr)
		}
	}
	return nil, nil
}

// withoutGeneratedName returns err with the message of WithoutGeneratedName:
// the same for every refused pod, so that the status reporting it, and the
// events about the PodSet, do not change with each retry. The API server's
// status stays reachable through it.
func withoutGeneratedName(err error, prefix string) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return err
	}
	return &renamed{msg: WithoutGeneratedName(err.Error(), status.Status().Details.Name, prefix), err: err}
}

// renamed is an error with another message.
type renamed struct {
	msg string
	err error
}

func (e *renamed) Error() string { return e.msg }
func (e *renamed) Unwrap() error { return e.err }

// failed records a Warning event for a failed create or delete and returns it
// as the Failure the status reports and the error that retries the reconcile.
func (r *Reconciler) failed(ps *demov1alpha1.PodSet, reason string, err error) (*Failure, error) {
	r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, reason, "Reconcile", "%v", err)
	return &Failure{Reason: reason, Message: err.Error(), APIReason: conditions.FromError(err).Reason}, err
}
