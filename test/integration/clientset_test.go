package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	examplev1ac "github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/applyconfiguration/example/v1"
	samplev1alpha1ac "github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/applyconfiguration/samplecontroller/v1alpha1"
	watchv1alpha1ac "github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/applyconfiguration/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/informers/externalversions"
)

// condition is a status condition as the tests write it.
func condition(typ string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}
}

// waitEvent returns the first event from w that match accepts.
func waitEvent[T any](t *testing.T, w watch.Interface, what string, match func(watch.EventType, T) bool) T {
	t.Helper()
	deadline := time.After(testenv.Timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s", what)
			}
			if obj, isT := ev.Object.(T); isT && match(ev.Type, obj) {
				return obj
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestEnvoyClientset(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	envoys := clientset.ExampleV1().Envoys(ns)

	factory := externalversions.NewSharedInformerFactoryWithOptions(clientset, 0, externalversions.WithNamespace(ns))
	lister := factory.Example().V1().Envoys().Lister()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	for typ, synced := range factory.WaitForCacheSync(stop) {
		if !synced {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}

	w, err := envoys.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := envoys.Create(ctx, &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "edge"},
		Spec:       examplev1.EnvoySpec{Replicas: ptr.To[int32](2)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's defaults come back through the typed client.
	if created.Spec.Image != fleet.DefaultImage || created.Spec.LogLevel != fleet.DefaultLogLevel {
		t.Errorf("created: image %q, logLevel %q; want the CRD's defaults", created.Spec.Image, created.Spec.LogLevel)
	}
	waitEvent(t, w, "ADDED edge", func(typ watch.EventType, e *examplev1.Envoy) bool {
		return typ == watch.Added && e.Name == "edge"
	})

	got, err := envoys.Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID {
		t.Errorf("Get returned uid %s, want %s", got.UID, created.UID)
	}
	list, err := envoys.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "edge" {
		t.Errorf("List returned %d items, want only edge", len(list.Items))
	}

	got.Status.Replicas = 2
	got.Status.Selector = "app=edge"
	got.Status.Conditions = []metav1.Condition{condition("Available", metav1.ConditionTrue)}
	updated, err := envoys.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(updated.Status.Conditions, "Available") || updated.Generation != created.Generation {
		t.Errorf("after UpdateStatus: conditions %v, generation %d (was %d)", updated.Status.Conditions, updated.Generation, created.Generation)
	}
	waitEvent(t, w, "MODIFIED edge with Available", func(typ watch.EventType, e *examplev1.Envoy) bool {
		return typ == watch.Modified && meta.IsStatusConditionTrue(e.Status.Conditions, "Available")
	})
	testenv.Eventually(t, "the lister to see the status", func() (bool, error) {
		e, err := lister.Envoys(ns).Get("edge")
		return err == nil && meta.IsStatusConditionTrue(e.Status.Conditions, "Available"), err
	})

	// Update goes to the main resource: a status change in it is ignored.
	updated.Spec.LogLevel = "debug"
	updated.Status.Replicas = 7
	updated, err = envoys.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Spec.LogLevel != "debug" || updated.Status.Replicas != 2 {
		t.Errorf("after Update: logLevel %q, status.replicas %d; want debug and 2", updated.Spec.LogLevel, updated.Status.Replicas)
	}

	// The scale subresource, from the +genclient:method markers.
	scale, err := envoys.GetScale(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Replicas != 2 || scale.Status.Selector != "app=edge" {
		t.Errorf("GetScale: %+v", scale)
	}
	scale.Spec.Replicas = 3
	if _, err := envoys.UpdateScale(ctx, "edge", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	scaled := waitEvent(t, w, "MODIFIED edge with 3 replicas", func(typ watch.EventType, e *examplev1.Envoy) bool {
		return typ == watch.Modified && ptr.Deref(e.Spec.Replicas, 0) == 3
	})
	if scaled.Generation <= created.Generation {
		t.Errorf("scaling did not change the spec's generation: %d", scaled.Generation)
	}

	if err := envoys.Delete(ctx, "edge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, w, "DELETED edge", func(typ watch.EventType, e *examplev1.Envoy) bool {
		return typ == watch.Deleted && e.Name == "edge"
	})
	if _, err := envoys.Get(ctx, "edge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
}

// TestFooInformer drives a Foo through the typed client and follows it with
// the generated informer's event handlers and lister.
func TestFooInformer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	foos := clientset.SamplecontrollerV1alpha1().Foos(ns)

	factory := externalversions.NewSharedInformerFactoryWithOptions(clientset, 0, externalversions.WithNamespace(ns))
	informer := factory.Samplecontroller().V1alpha1().Foos()
	var (
		mu     sync.Mutex
		events []string
	)
	record := func(what string) func(any) {
		return func(obj any) {
			if f, ok := obj.(*samplev1alpha1.Foo); ok {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, what+" "+f.Name)
			}
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record("add"),
		UpdateFunc: func(_, obj any) { record("update")(obj) },
		DeleteFunc: record("delete"),
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	seen := func(want string) func() (bool, error) {
		return func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(events, want), nil
		}
	}

	if _, err := foos.Create(ctx, &samplev1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "example-foo", Labels: map[string]string{"tier": "web"}},
		Spec:       samplev1alpha1.FooSpec{DeploymentName: "example-foo"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the informer's add", seen("add example-foo"))

	cached, err := informer.Lister().Foos(ns).Get("example-foo")
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(cached.Spec.Replicas, 0) != 1 {
		t.Errorf("lister: spec.replicas %v, want the default 1", cached.Spec.Replicas)
	}
	selected, err := informer.Lister().List(labels.SelectorFromSet(labels.Set{"tier": "web"}))
	if err != nil || len(selected) != 1 {
		t.Errorf("lister by label: %d Foos (%v), want 1", len(selected), err)
	}
	if _, err := informer.Lister().Foos(ns).Get("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("lister Get of a missing Foo: %v, want NotFound", err)
	}

	// Objects from a lister are shared with the cache: copy before writing.
	foo := cached.DeepCopy()
	foo.Status.AvailableReplicas = 1
	foo.Status.Conditions = []metav1.Condition{condition("Available", metav1.ConditionTrue)}
	if _, err := foos.UpdateStatus(ctx, foo, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the informer's update", seen("update example-foo"))
	testenv.Eventually(t, "the lister to see the status", func() (bool, error) {
		f, err := informer.Lister().Foos(ns).Get("example-foo")
		return err == nil && f.Status.AvailableReplicas == 1 && meta.IsStatusConditionTrue(f.Status.Conditions, "Available"), err
	})

	var scale *autoscalingv1.Scale
	if scale, err = foos.GetScale(ctx, "example-foo", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Replicas != 1 {
		t.Errorf("GetScale: spec %d status %d, want 1 and 1 (status from availableReplicas)", scale.Spec.Replicas, scale.Status.Replicas)
	}

	if err := foos.Delete(ctx, "example-foo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the informer's delete", seen("delete example-foo"))
}

// TestServerSideApply applies objects built with the generated apply
// configurations, including client-go's for the embedded core types.
func TestServerSideApply(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const manager = "integration-test"
	envoys := clientset.ExampleV1().Envoys(ns)

	applied, err := envoys.Apply(ctx, examplev1ac.Envoy("applied", ns).
		WithLabels(map[string]string{"tier": "edge"}).
		WithSpec(examplev1ac.EnvoySpec().
			WithReplicas(2).
			WithLogLevel("debug").
			WithPorts(examplev1ac.EnvoyPort().WithName("http").WithPort(80).WithTargetPort(8080))),
		metav1.ApplyOptions{FieldManager: manager})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(applied.Spec.Replicas, 0) != 2 || applied.Spec.LogLevel != "debug" || applied.Labels["tier"] != "edge" {
		t.Errorf("applied: replicas %v, logLevel %q, labels %v", applied.Spec.Replicas, applied.Spec.LogLevel, applied.Labels)
	}
	if !ownsByApply(applied.ManagedFields, manager) {
		t.Errorf("managedFields have no Apply entry for %s: %v", manager, applied.ManagedFields)
	}

	// Applying again without logLevel gives up the field: it falls back to the default.
	reapplied, err := envoys.Apply(ctx, examplev1ac.Envoy("applied", ns).
		WithSpec(examplev1ac.EnvoySpec().WithReplicas(2)),
		metav1.ApplyOptions{FieldManager: manager})
	if err != nil {
		t.Fatal(err)
	}
	if reapplied.Spec.LogLevel != "info" || reapplied.Labels["tier"] != "" {
		t.Errorf("reapplied: logLevel %q, labels %v; want the default and no labels", reapplied.Spec.LogLevel, reapplied.Labels)
	}

	// Another manager's conflicting value is refused unless forced.
	_, err = envoys.Apply(ctx, examplev1ac.Envoy("applied", ns).
		WithSpec(examplev1ac.EnvoySpec().WithReplicas(5)),
		metav1.ApplyOptions{FieldManager: "someone-else"})
	if !apierrors.IsConflict(err) {
		t.Errorf("conflicting apply: %v, want a conflict", err)
	}

	// The status, through its own subresource.
	foos := clientset.SamplecontrollerV1alpha1().Foos(ns)
	if _, err := foos.Apply(ctx, samplev1alpha1ac.Foo("applied", ns).
		WithSpec(samplev1alpha1ac.FooSpec().WithDeploymentName("applied")),
		metav1.ApplyOptions{FieldManager: manager}); err != nil {
		t.Fatal(err)
	}
	foo, err := foos.ApplyStatus(ctx, samplev1alpha1ac.Foo("applied", ns).
		WithStatus(samplev1alpha1ac.FooStatus().
			WithAvailableReplicas(1).
			WithConditions(metav1ac.Condition().
				WithType("Available").WithStatus(metav1.ConditionTrue).
				WithReason("Applied").WithMessage("").WithLastTransitionTime(metav1.Now()))),
		metav1.ApplyOptions{FieldManager: manager + "-status", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if foo.Status.AvailableReplicas != 1 || !meta.IsStatusConditionTrue(foo.Status.Conditions, "Available") {
		t.Errorf("ApplyStatus: %+v", foo.Status)
	}

	// A Watcher nests client-go's apply configuration for its container.
	watcher, err := clientset.WatchV1alpha1().Watchers(ns).Apply(ctx, watchv1alpha1ac.Watcher("log-watcher", ns).
		WithSpec(watchv1alpha1ac.WatcherSpec().
			WithContainer(corev1ac.Container().WithName("log-watcher").WithImage("busybox").WithArgs("sleep", "3600")).
			WithConfigData(map[string]string{"LEVEL": "debug"})),
		metav1.ApplyOptions{FieldManager: manager})
	if err != nil {
		t.Fatal(err)
	}
	if c := watcher.Spec.Container; c.Name != "log-watcher" || c.Image != "busybox" || !slices.Equal(c.Args, []string{"sleep", "3600"}) {
		t.Errorf("applied Watcher container: %+v", c)
	}
}

func ownsByApply(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
