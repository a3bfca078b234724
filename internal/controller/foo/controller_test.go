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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.MainWith(m, func(mgr ctrl.Manager) testenv.Controller { return NewReconciler(mgr) })
}

func newFoo(ns, name, deployment string, replicas int32) *samplev1alpha1.Foo {
	return &samplev1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       samplev1alpha1.FooSpec{DeploymentName: deployment, Replicas: ptr.To(replicas)},
	}
}

func TestCreatesDeployment(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foo := newFoo(ns, "example-foo", "example-foo", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := testenv.WaitFor(t, suite.Client, ns, "example-foo", &appsv1.Deployment{}, nil)
	if !metav1.IsControlledBy(d, foo) {
		t.Errorf("Deployment is not controlled by the Foo: %+v", d.OwnerReferences)
	}
	if d.Labels["app"] != "nginx" || d.Labels["controller"] != "example-foo" {
		t.Errorf("labels = %v", d.Labels)
	}
	if *d.Spec.Replicas != 1 || d.Spec.Template.Spec.Containers[0].Image != "nginx:latest" {
		t.Errorf("spec = replicas %d image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	got := testenv.WaitSettled(t, suite.Client, foo.DeepCopy(), nil)
	if c := testenv.Condition(got, samplev1alpha1.FooConditionAvailable); c.Status != metav1.ConditionFalse {
		t.Errorf("Available = %+v before any pod is available", c)
	}
	if c := testenv.Condition(got, samplev1alpha1.FooConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != samplev1alpha1.FooReasonRollingOut {
		t.Errorf("Progressing = %+v while the Deployment rolls out", c)
	}
	// Every write names the operator as its field manager.
	if m := d.ManagedFields; len(m) == 0 || m[0].Manager != names.FieldOwner {
		t.Errorf("field managers of the Deployment = %+v, want %s", m, names.FieldOwner)
	}

	// Envtest runs no Deployment controller: play its part, and the Foo follows.
	suite.PlayDeploymentController(t, d)
	got = testenv.WaitSettled(t, suite.Client, foo.DeepCopy(), func(f *samplev1alpha1.Foo) bool { return f.Status.AvailableReplicas == 1 })
	for typ, want := range map[string]metav1.ConditionStatus{samplev1alpha1.FooConditionAvailable: "True", samplev1alpha1.FooConditionProgressing: "False", samplev1alpha1.FooConditionDegraded: "False"} {
		if c := testenv.Condition(got, typ); c.Status != want {
			t.Errorf("%s = %+v, want %s", typ, c, want)
		}
	}

	// The first Deployment is told of by the status; one made again by an event.
	suite.CreatedAgain(t, foo, d, `Normal Created Created Deployment "example-foo"`)
}

func TestScales(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foo := newFoo(ns, "scaled", "scaled", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "scaled", &appsv1.Deployment{}, nil)

	// Through the spec.
	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.Replicas = ptr.To[int32](3)
	if err := suite.Client.Patch(ctx, foo, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "scaled", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })

	// Through the scale subresource, as kubectl scale and an HPA do.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if err := suite.Client.SubResource("scale").Update(ctx, foo, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "scaled", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 5 })
	if scale.Status.Selector != "app=nginx,controller=scaled" {
		t.Errorf("scale selector = %q", scale.Status.Selector)
	}
}

func TestRestoresEditedAndDeletedDeployment(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foo := newFoo(ns, "restored", "restored", 2)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := testenv.WaitFor(t, suite.Client, ns, "restored", &appsv1.Deployment{}, nil)

	// A hand edit of fields the Foo sets is undone; a label someone added stays.
	d.Spec.Replicas = ptr.To[int32](7)
	d.Spec.Template.Spec.Containers[0].Image = "nginx:edited"
	d.Labels["team"] = "web"
	if err := suite.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	d = testenv.WaitFor(t, suite.Client, ns, "restored", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
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
	testenv.WaitFor(t, suite.Client, ns, "restored", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 2 && d.Labels["app.kubernetes.io/managed-by"] == "kube-envoy-controller"
	})

	// A deleted Deployment comes back.
	oldUID := d.UID
	if err := suite.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "restored", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return d.UID != oldUID })
}

func TestRenameRemovesOldDeployment(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foo := newFoo(ns, "renamed", "first", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "first", &appsv1.Deployment{}, nil)

	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.DeploymentName = "second"
	if err := suite.Client.Patch(ctx, foo, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "second", &appsv1.Deployment{}, nil)
	testenv.WaitGone(t, suite.Client, ns, "first", &appsv1.Deployment{})
	suite.WaitEvent(t, ns, "renamed", `Normal Deleted Deleted Deployment "first"`)
}

func TestNameClashIsReportedAndNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
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
	suite.WaitEvent(t, ns, "clashing", `Warning ErrResourceExists Deployment "taken" already exists and is not managed by Foo "clashing"`)
	got := testenv.WaitSettled(t, suite.Client, foo.DeepCopy(), nil)
	if c := testenv.Condition(got, samplev1alpha1.FooConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != samplev1alpha1.FooReasonErrResourceExists {
		t.Errorf("Degraded = %+v", c)
	}
	if c := testenv.Condition(got, samplev1alpha1.FooConditionProgressing); c.Status != metav1.ConditionFalse || c.Reason != samplev1alpha1.FooReasonErrResourceExists {
		t.Errorf("Progressing = %+v, want False: nothing can progress while the name is taken", c)
	}
	after := testenv.WaitFor(t, suite.Client, ns, "taken", &appsv1.Deployment{}, nil)
	if after.ResourceVersion != theirs.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Errorf("the foreign Deployment was modified: rv %s -> %s, owners %v",
			theirs.ResourceVersion, after.ResourceVersion, after.OwnerReferences)
	}

	// Once the name is free, the Foo creates its own Deployment and recovers.
	if err := suite.Client.Delete(ctx, after, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	// Foreground deletion waits for a garbage collector envtest lacks; drop its finalizer by hand.
	testenv.Eventually(t, "foreign Deployment gone", func() (bool, error) {
		d := &appsv1.Deployment{}
		err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, d)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		d.Finalizers = nil
		return false, client.IgnoreNotFound(suite.Client.Update(ctx, d))
	})
	patchReconcileNow(t, foo)
	d := testenv.WaitFor(t, suite.Client, ns, "taken", &appsv1.Deployment{}, nil)
	if !metav1.IsControlledBy(d, foo) {
		t.Errorf("new Deployment not controlled by the Foo")
	}
}

// patchReconcileNow touches an annotation of the Foo, which makes the
// controller reconcile it at once instead of at its next periodic check.
func patchReconcileNow(t *testing.T, foo *samplev1alpha1.Foo) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test/touched":%q}}}`, time.Now().String()))
	if err := suite.Client.Patch(context.Background(), foo, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// A reconcile that finds everything as desired sends no write request: no
// POST, PUT, PATCH or DELETE reaches the API server, events included.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foo := newFoo(ns, "settled", "settled", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := testenv.WaitFor(t, suite.Client, ns, "settled", &appsv1.Deployment{}, nil)
	suite.PlayDeploymentController(t, d)
	testenv.WaitSettled(t, suite.Client, foo.DeepCopy(), func(f *samplev1alpha1.Foo) bool { return f.Status.AvailableReplicas == 1 })
	suite.ExpectNoWrites(t, ControllerName, foo, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(foo)})
}

// In a namespace being deleted, creates are refused: the Foo goes with its
// namespace, so the refusal is neither an error to retry nor a Degraded status.
func TestNamespaceBeingDeleted(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foo := newFoo(ns, "leaving", "first", 1)
	if err := suite.Client.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "first", &appsv1.Deployment{}, nil)
	testenv.WaitSettled(t, suite.Client, foo.DeepCopy(), nil)
	// Envtest runs no namespace controller: the namespace stays terminating.
	if err := suite.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, "", ns, &corev1.Namespace{}, func(n *corev1.Namespace) bool { return n.Status.Phase == corev1.NamespaceTerminating })

	errorsBefore := testenv.ReconcileErrors(ControllerName)
	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.DeploymentName = "second" // a new Deployment, which the namespace refuses
	if err := suite.Client.Patch(ctx, foo, patch); err != nil {
		t.Fatal(err)
	}
	suite.Touch(t, ControllerName, foo)
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "second"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Deployment second: %v, want it refused", err)
	}
	if n := testenv.ReconcileErrors(ControllerName) - errorsBefore; n != 0 {
		t.Errorf("%v reconcile errors for a create its terminating namespace refused", n)
	}
	got := testenv.WaitFor(t, suite.Client, ns, foo.Name, &samplev1alpha1.Foo{}, nil)
	if conditions.IsTrue(got.Status.Conditions, samplev1alpha1.FooConditionDegraded) {
		t.Errorf("Degraded = %+v", testenv.Condition(got, samplev1alpha1.FooConditionDegraded))
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tests := []struct {
		name, deployment string
		replicas         int32
		field            string
	}{
		{"bad-name", "Not_A_Name", 1, "spec.deploymentName:"},
		{"too-many", "ok", 11, "spec.replicas:"},
		{"too-few", "ok", 0, "spec.replicas:"},
		// A rule on the object's root: the message, not the path, names the field.
		{strings.Repeat("x", 64), "ok", 1, "metadata.name must be no more than 63 characters"},
	}
	for _, tt := range tests {
		err := suite.Client.Create(ctx, newFoo(ns, tt.name, tt.deployment, tt.replicas))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Foo %s: got %v, want an Invalid error naming %s", tt.name, err, tt.field)
		}
	}
}

// A Deployment the API server refuses (an admission policy here; a quota or
// Pod Security admission alike) is reported as Degraded, retried with
// backoff, and created once it is admitted.
func TestRefusedDeploymentIsDegraded(t *testing.T) {
	ns := suite.Namespace(t)
	testenv.TestRefusal(t, &suite, testenv.Refusal[*samplev1alpha1.Foo]{
		Controller: ControllerName,
		Object:     newFoo(ns, "refused", "refused", 1),
		Probe:      testenv.DeploymentProbe(ns),
		Resource:   "deployments",
		Change:     func(f *samplev1alpha1.Foo) { f.Spec.Replicas = ptr.To[int32](2) },
		Recovered: func(f *samplev1alpha1.Foo) bool {
			return testenv.Condition(f, samplev1alpha1.FooConditionProgressing).Reason == samplev1alpha1.FooReasonRollingOut // the Deployment exists
		},
	})
}
