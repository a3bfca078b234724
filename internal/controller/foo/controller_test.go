package foo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
)

var (
	suite      testenv.Suite
	reconciler *Reconciler // uses the manager's counted client
)

func TestMain(m *testing.M) {
	suite.Main(m, func(mgr ctrl.Manager) error {
		reconciler = NewReconciler(mgr)
		return reconciler.SetupWithManager(mgr)
	})
}

// eventually and namespace are the suite's, under the names the tests use.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	testenv.Eventually(t, what, cond)
}
func namespace(t *testing.T) string { return suite.Namespace(t) }

func newFoo(ns, name, deployment string, replicas int32) *samplev1alpha1.Foo {
	return &samplev1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       samplev1alpha1.FooSpec{DeploymentName: deployment, Replicas: ptr.To(replicas)},
	}
}

func getDeployment(ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, suite.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d)
}

// waitDeployment waits until the Deployment exists and cond holds for it.
func waitDeployment(t *testing.T, ns, name string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, "Deployment "+name, func() (bool, error) {
		var err error
		d, err = getDeployment(ns, name)
		return err == nil && cond(d), err
	})
	return d
}

// waitSettled waits until the Foo's status describes its current generation.
func waitSettled(t *testing.T, foo *samplev1alpha1.Foo) *samplev1alpha1.Foo {
	t.Helper()
	got := &samplev1alpha1.Foo{}
	eventually(t, "Foo status", func() (bool, error) {
		err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(foo), got)
		return err == nil && got.Status.ObservedGeneration == got.Generation &&
			meta.FindStatusCondition(got.Status.Conditions, ConditionAvailable) != nil, err
	})
	return got
}

func TestCreatesDeployment(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "example-foo", "example-foo", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := waitDeployment(t, ns, "example-foo", func(*appsv1.Deployment) bool { return true })
	if !metav1.IsControlledBy(d, foo) {
		t.Errorf("Deployment is not controlled by the Foo: %+v", d.OwnerReferences)
	}
	if d.Labels["app"] != "nginx" || d.Labels["controller"] != "example-foo" {
		t.Errorf("labels = %v", d.Labels)
	}
	if *d.Spec.Replicas != 1 || d.Spec.Template.Spec.Containers[0].Image != "nginx:latest" {
		t.Errorf("spec = replicas %d image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	got := waitSettled(t, foo)
	if c := meta.FindStatusCondition(got.Status.Conditions, ConditionAvailable); c.Status != metav1.ConditionFalse {
		t.Errorf("Available = %+v before any pod is available", c)
	}
	suite.WaitEvent(t, ns, "example-foo", "Normal Synced")

	// Envtest runs no Deployment controller: play its part, and the Foo follows.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := suite.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "availableReplicas 1", func() (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(foo), got)
		c := meta.FindStatusCondition(got.Status.Conditions, ConditionAvailable)
		return err == nil && got.Status.AvailableReplicas == 1 && c != nil && c.Status == metav1.ConditionTrue, err
	})
}

func TestScales(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "scaled", "scaled", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "scaled", func(*appsv1.Deployment) bool { return true })

	// Through the spec.
	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.Replicas = ptr.To[int32](3)
	if err := suite.Client.Patch(ctx, foo, patch); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "scaled", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })

	// Through the scale subresource, as kubectl scale and an HPA do.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if err := suite.Client.SubResource("scale").Update(ctx, foo, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "scaled", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 5 })
	if scale.Status.Selector != "app=nginx,controller=scaled" {
		t.Errorf("scale selector = %q", scale.Status.Selector)
	}
}

func TestRestoresEditedAndDeletedDeployment(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "restored", "restored", 2)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := waitDeployment(t, ns, "restored", func(*appsv1.Deployment) bool { return true })

	// A hand edit of fields the Foo sets is undone; a label someone added stays.
	d.Spec.Replicas = ptr.To[int32](7)
	d.Spec.Template.Spec.Containers[0].Image = "nginx:edited"
	d.Labels["team"] = "web"
	if err := suite.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	d = waitDeployment(t, ns, "restored", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 2 && d.Spec.Template.Spec.Containers[0].Image == "nginx:latest"
	})
	if d.Labels["team"] != "web" {
		t.Errorf("a label added by someone else was removed: %v", d.Labels)
	}

	// Removing the managed-by label takes it out of the cache; it is still found and restored.
	delete(d.Labels, "app.kubernetes.io/managed-by")
	d.Spec.Replicas = ptr.To[int32](9)
	if err := suite.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "restored", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 2 && d.Labels["app.kubernetes.io/managed-by"] == "kube-envoy-controller"
	})

	// A deleted Deployment comes back.
	oldUID := d.UID
	if err := suite.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "restored", func(d *appsv1.Deployment) bool { return d.UID != oldUID })
}

func TestRenameRemovesOldDeployment(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "renamed", "first", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "first", func(*appsv1.Deployment) bool { return true })

	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.DeploymentName = "second"
	if err := suite.Client.Patch(ctx, foo, patch); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "second", func(*appsv1.Deployment) bool { return true })
	eventually(t, "old Deployment deleted", func() (bool, error) {
		d, err := getDeployment(ns, "first")
		// Envtest has no garbage collector to finish a background deletion; a
		// deletionTimestamp is the API server's record that it was deleted.
		return apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil), client.IgnoreNotFound(err)
	})
}

func TestNameClashIsReportedAndNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	labels := map[string]string{"app": "theirs"}
	theirs := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "theirs:1"}}},
			},
		},
	}
	if err := suite.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	foo := newFoo(ns, "clashing", "taken", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	suite.WaitEvent(t, ns, "clashing", `Warning ErrResourceExists Resource "taken" already exists and is not managed by Foo`)
	got := waitSettled(t, foo)
	c := meta.FindStatusCondition(got.Status.Conditions, ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonResourceExists {
		t.Errorf("Degraded = %+v", c)
	}
	after, err := getDeployment(ns, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != theirs.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Errorf("the foreign Deployment was modified: rv %s -> %s, owners %v",
			theirs.ResourceVersion, after.ResourceVersion, after.OwnerReferences)
	}

	// Once the name is free, the Foo creates its own Deployment and recovers.
	if err := suite.Client.Delete(ctx, after, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	// Foreground deletion waits for a garbage collector envtest lacks; drop its finalizer by hand.
	eventually(t, "foreign Deployment gone", func() (bool, error) {
		d, err := getDeployment(ns, "taken")
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		d.Finalizers = nil
		return false, client.IgnoreNotFound(suite.Client.Update(ctx, d))
	})
	_ = patchReconcileNow(t, foo)
	d := waitDeployment(t, ns, "taken", func(*appsv1.Deployment) bool { return true })
	if !metav1.IsControlledBy(d, foo) {
		t.Errorf("new Deployment not controlled by the Foo")
	}
}

// patchReconcileNow touches an annotation of the Foo, which makes the
// controller reconcile it at once instead of at its next periodic check.
func patchReconcileNow(t *testing.T, foo *samplev1alpha1.Foo) error {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test/touched":%q}}}`, time.Now().String()))
	err := suite.Client.Patch(context.Background(), foo, client.RawPatch(types.MergePatchType, patch))
	if err != nil {
		t.Fatal(err)
	}
	return err
}

// A reconcile that finds everything as desired sends no write request: no
// POST, PUT, PATCH or DELETE reaches the API server, events included.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "settled", "settled", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := waitDeployment(t, ns, "settled", func(*appsv1.Deployment) bool { return true })
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := suite.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "settled status", func() (bool, error) {
		got := &samplev1alpha1.Foo{}
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(foo), got)
		return err == nil && got.Status.AvailableReplicas == 1, err
	})
	// Let the manager's own reconciles and event writes for the last change finish.
	suite.Quiet(t)

	suite.Counter.Reset()
	before := testenv.ReconcileTotal(ControllerName)
	// The running controller, woken by a change that needs nothing done...
	_ = patchReconcileNow(t, foo)
	eventually(t, "the controller to reconcile the touched Foo", func() (bool, error) {
		return testenv.ReconcileTotal(ControllerName) > before, nil
	})
	// ...and direct calls of the same reconciler, with the manager's client.
	for range 3 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(foo)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // events are sent asynchronously
	if w := suite.Counter.WritesTo("/namespaces/" + ns + "/"); len(w) != 0 {
		t.Errorf("a settled reconcile sent %d write requests: %v", len(w), w)
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	tests := []struct {
		name, deployment string
		replicas         int32
		field            string
	}{
		{"bad-name", "Not_A_Name", 1, "spec.deploymentName"},
		{"too-many", "ok", 11, "spec.replicas"},
		{"too-few", "ok", 0, "spec.replicas"},
		{strings.Repeat("x", 64), "ok", 1, "metadata.name"},
	}
	for _, tt := range tests {
		err := suite.Client.Create(ctx, newFoo(ns, tt.name, tt.deployment, tt.replicas))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Foo %s: got %v, want an Invalid error naming %s", tt.name, err, tt.field)
		}
	}
}
