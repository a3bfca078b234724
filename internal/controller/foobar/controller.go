package foobar

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "foobar"

// clashRecheck is how often a FooBar whose Job name is taken looks again: the
// foreign Job is not in the cache, so its deletion sends no event.
const clashRecheck = 30 * time.Second

// Reconciler runs each FooBar's command as a Job and reports its progress.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly. It is used only to look at
	// a Job that is not in the cache because the operator does not own it.
	APIReader client.Reader
	Recorder  events.EventRecorder
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(ControllerName),
	}
}

// SetupWithManager registers the controller: it reconciles a FooBar when the
// FooBar or a Job it controls changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), &batchv1.Job{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&k8sv1.FooBar{}).
		Owns(&batchv1.Job{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=k8s.io,resources=foobars,verbs=get;list;watch
// +kubebuilder:rbac:groups=k8s.io,resources=foobars/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=k8s.io,resources=foobars/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes sure the FooBar's current generation runs in its Job, that
// the Jobs of earlier generations are gone, and reports the run's progress.
// When everything already matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fb := &k8sv1.FooBar{}
	if err := r.Client.Get(ctx, req.NamespacedName, fb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fb.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the Jobs
	}

	desired := Job(fb)
	if err := r.deleteEarlierJobs(ctx, fb, desired.Name); err != nil {
		return ctrl.Result{}, err
	}
	job, clash, err := r.ensureJob(ctx, fb, desired)
	if err != nil {
		return ctrl.Result{}, err
	}

	if err := r.writeStatus(ctx, fb, Status(fb, Observed{Job: job, Clash: clash})); err != nil {
		if apierrors.IsConflict(err) {
			// Our copy is stale; the newer version is on its way and reconciles again.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	if clash {
		return ctrl.Result{RequeueAfter: clashRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// deleteEarlierJobs deletes the Jobs fb controls other than keep, the Job of
// its current generation. Their pods go too (background propagation).
func (r *Reconciler) deleteEarlierJobs(ctx context.Context, fb *k8sv1.FooBar, keep string) error {
	var owned batchv1.JobList
	if err := r.Client.List(ctx, &owned, client.InNamespace(fb.Namespace),
		client.MatchingFields{objects.ControllerUIDIndex: string(fb.UID)}); err != nil {
		return fmt.Errorf("listing owned Jobs: %w", err)
	}
	for i := range owned.Items {
		old := &owned.Items[i]
		if old.Name == keep || !metav1.IsControlledBy(old, fb) || old.DeletionTimestamp != nil {
			continue
		}
		err := r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("deleting Job %q of an earlier generation: %w", old.Name, err)
		}
		logf.FromContext(ctx).Info("deleted the Job of an earlier generation", "job", old.Name, "now", keep)
		r.Recorder.Eventf(fb, old, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted Job %q of an earlier generation", old.Name)
	}
	return nil
}

// ensureJob creates the Job of fb's current generation unless it exists or
// that generation already finished. It returns the Job as last seen (nil when
// there is none), or clash=true when a Job of that name exists and is not
// controlled by fb. A Job's pod template cannot change, so an existing Job is
// never updated.
func (r *Reconciler) ensureJob(ctx context.Context, fb *k8sv1.FooBar, desired *batchv1.Job) (*batchv1.Job, bool, error) {
	existing := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		if Finished(fb) {
			return nil, false, nil // it ran; its Job was deleted since
		}
		err = r.Client.Create(ctx, desired)
		if err == nil {
			logf.FromContext(ctx).Info("created Job", "job", desired.Name, "generation", fb.Generation)
			r.Recorder.Eventf(fb, desired, corev1.EventTypeNormal, "Started", "Create",
				"Created Job %q to run the command of generation %d", desired.Name, fb.Generation)
			return desired, false, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, fmt.Errorf("creating Job %q: %w", desired.Name, err)
		}
		// It exists but is not in our cache: someone else's, ours with its
		// label removed, or ours and the cache has not caught up.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), existing); err != nil {
			return nil, false, fmt.Errorf("reading Job %q: %w", desired.Name, err)
		}
	} else if err != nil {
		return nil, false, fmt.Errorf("reading Job %q: %w", desired.Name, err)
	}
	if !metav1.IsControlledBy(existing, fb) {
		return nil, true, nil
	}
	return existing, false, nil
}

// writeStatus writes status through the status subresource when it differs
// from fb's, and records the event of a run that just ended or a clash.
func (r *Reconciler) writeStatus(ctx context.Context, fb *k8sv1.FooBar, status k8sv1.FooBarStatus) error {
	if equality.Semantic.DeepEqual(fb.Status, status) {
		return nil
	}
	updated := fb.DeepCopy()
	updated.Status = status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	ended := IsFinished(status.Phase) && (fb.Status.Phase != status.Phase || fb.Status.JobName != status.JobName)
	switch {
	case ended && status.Phase == k8sv1.PhaseSucceeded:
		r.Recorder.Eventf(fb, nil, corev1.EventTypeNormal, "Succeeded", "Run", "Job %q succeeded", status.JobName)
	case ended:
		r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, "Failed", "Run", "%s",
			meta.FindStatusCondition(status.Conditions, ConditionComplete).Message)
	}
	if c := meta.FindStatusCondition(status.Conditions, ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		if old := meta.FindStatusCondition(fb.Status.Conditions, ConditionDegraded); old == nil || old.Status != metav1.ConditionTrue {
			r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", c.Message)
		}
	}
	return nil
}
