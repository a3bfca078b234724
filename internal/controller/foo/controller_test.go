package foo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
)

var (
	k8s        client.Client // the test's own client: its writes are not counted
	counter    testenv.RequestCounter
	reconciler *Reconciler // uses the manager's counted client
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	env, err := testenv.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		os.Exit(1)
	}
	code := run(m, cfg)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

func run(m *testing.M, cfg *rest.Config) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: manager.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := manager.New(counter.Wrap(cfg), manager.Options{MetricsAddr: "0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	reconciler = NewReconciler(mgr)
	if err := reconciler.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

const timeout = 30 * time.Second

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) {
			ok, err := cond()
			last = err
			return ok, nil
		})
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "foo-test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newFoo(ns, name, deployment string, replicas int32) *samplev1alpha1.Foo {
	return &samplev1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       samplev1alpha1.FooSpec{DeploymentName: deployment, Replicas: ptr.To(replicas)},
	}
}

func getDeployment(ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d)
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
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(foo), got)
		return err == nil && got.Status.ObservedGeneration == got.Generation &&
			meta.FindStatusCondition(got.Status.Conditions, ConditionAvailable) != nil, err
	})
	return got
}

// events returns the events about the named object in ns, as "type reason note".
func eventsAbout(ns, name string) ([]string, error) {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+" "+e.Reason+" "+e.Note)
		}
	}
	return out, nil
}

func waitEvent(t *testing.T, ns, name, want string) {
	t.Helper()
	eventually(t, "event "+want, func() (bool, error) {
		evs, err := eventsAbout(ns, name)
		for _, e := range evs {
			if strings.HasPrefix(e, want) {
				return true, nil
			}
		}
		return false, err
	})
}

func TestCreatesDeployment(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "example-foo", "example-foo", 1)
	if err := k8s.Create(ctx, foo); err != nil {
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
	waitEvent(t, ns, "example-foo", "Normal Synced")

	// Envtest runs no Deployment controller: play its part, and the Foo follows.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := k8s.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "availableReplicas 1", func() (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(foo), got)
		c := meta.FindStatusCondition(got.Status.Conditions, ConditionAvailable)
		return err == nil && got.Status.AvailableReplicas == 1 && c != nil && c.Status == metav1.ConditionTrue, err
	})
}

func TestScales(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "scaled", "scaled", 1)
	if err := k8s.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "scaled", func(*appsv1.Deployment) bool { return true })

	// Through the spec.
	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.Replicas = ptr.To[int32](3)
	if err := k8s.Patch(ctx, foo, patch); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "scaled", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })

	// Through the scale subresource, as kubectl scale and an HPA do.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if err := k8s.SubResource("scale").Update(ctx, foo, client.WithSubResourceBody(scale)); err != nil {
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
	if err := k8s.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := waitDeployment(t, ns, "restored", func(*appsv1.Deployment) bool { return true })

	// A hand edit of fields the Foo sets is undone; a label someone added stays.
	d.Spec.Replicas = ptr.To[int32](7)
	d.Spec.Template.Spec.Containers[0].Image = "nginx:edited"
	d.Labels["team"] = "web"
	if err := k8s.Update(ctx, d); err != nil {
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
	if err := k8s.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "restored", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 2 && d.Labels["app.kubernetes.io/managed-by"] == "kube-envoy-controller"
	})

	// A deleted Deployment comes back.
	oldUID := d.UID
	if err := k8s.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "restored", func(d *appsv1.Deployment) bool { return d.UID != oldUID })
}

func TestRenameRemovesOldDeployment(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foo := newFoo(ns, "renamed", "first", 1)
	if err := k8s.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "first", func(*appsv1.Deployment) bool { return true })

	patch := client.MergeFrom(foo.DeepCopy())
	foo.Spec.DeploymentName = "second"
	if err := k8s.Patch(ctx, foo, patch); err != nil {
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
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	foo := newFoo(ns, "clashing", "taken", 1)
	if err := k8s.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "clashing", `Warning ErrResourceExists Resource "taken" already exists and is not managed by Foo`)
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
	if err := k8s.Delete(ctx, after, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
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
		return false, client.IgnoreNotFound(k8s.Update(ctx, d))
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
	err := k8s.Patch(context.Background(), foo, client.RawPatch(types.MergePatchType, patch))
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
	if err := k8s.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	d := waitDeployment(t, ns, "settled", func(*appsv1.Deployment) bool { return true })
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := k8s.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "settled status", func() (bool, error) {
		got := &samplev1alpha1.Foo{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(foo), got)
		return err == nil && got.Status.AvailableReplicas == 1, err
	})
	// Let the manager's own reconciles and event writes for the last change finish.
	quiet(t)

	counter.Reset()
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
	if w := counter.WritesTo("/namespaces/" + ns + "/"); len(w) != 0 {
		t.Errorf("a settled reconcile sent %d write requests: %v", len(w), w)
	}
}

// quiet waits until the manager has sent no write request for a second.
func quiet(t *testing.T) {
	t.Helper()
	last := -1
	eventually(t, "the controller to go quiet", func() (bool, error) {
		n := len(counter.Writes())
		if n == last {
			return true, nil
		}
		last = n
		time.Sleep(time.Second)
		return false, nil
	})
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
		err := k8s.Create(ctx, newFoo(ns, tt.name, tt.deployment, tt.replicas))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Foo %s: got %v, want an Invalid error naming %s", tt.name, err, tt.field)
		}
	}
}
