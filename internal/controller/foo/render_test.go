package foo

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
)

func sampleFoo() *samplev1alpha1.Foo {
	return &samplev1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "example-foo", Namespace: "default", UID: "uid-1", Generation: 2},
		Spec:       samplev1alpha1.FooSpec{DeploymentName: "example-foo", Replicas: ptr.To[int32](1)},
	}
}

func TestDeployment(t *testing.T) {
	foo := sampleFoo()
	d := Deployment(foo)
	if d.Name != "example-foo" || d.Namespace != "default" {
		t.Errorf("name = %s/%s", d.Namespace, d.Name)
	}
	if got := *d.Spec.Replicas; got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
	ref := metav1.GetControllerOf(d)
	if ref == nil || ref.UID != "uid-1" || ref.Kind != "Foo" || ref.APIVersion != "samplecontroller.k8s.io/v1alpha1" {
		t.Errorf("controller ref = %+v", ref)
	}
	for _, labels := range []map[string]string{d.Labels, d.Spec.Template.Labels, d.Spec.Selector.MatchLabels} {
		if labels["app"] != "nginx" || labels["controller"] != "example-foo" {
			t.Errorf("labels = %v, want app=nginx controller=example-foo", labels)
		}
	}
	if d.Labels["app.kubernetes.io/managed-by"] != "kube-envoy-controller" {
		t.Errorf("Deployment lacks the managed-by label the cache selects on: %v", d.Labels)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "nginx" || cs[0].Image != "nginx:latest" {
		t.Errorf("containers = %+v", cs)
	}

	foo.Spec.Replicas = nil
	if got := *Deployment(foo).Spec.Replicas; got != 1 {
		t.Errorf("replicas with spec.replicas unset = %d, want the default 1", got)
	}
}

func TestStatus(t *testing.T) {
	dep := func(gen, observed, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "example-foo", Generation: int64(gen)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: int64(observed), Replicas: replicas,
				UpdatedReplicas: updated, AvailableReplicas: available},
		}
	}
	clash := &conditions.Problem{Reason: samplev1alpha1.FooReasonErrResourceExists, Message: "taken"}
	refused := conditions.FromError(apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "example-foo", errors.New("exceeded quota")))
	tests := []struct {
		name                             string
		replicas                         int32
		obs                              Observed
		available                        int32
		wantAvailable, wantProg, wantDeg metav1.ConditionStatus
		wantReason                       string
	}{
		{"clash", 1, Observed{Problem: clash}, 0, "False", "False", "True", samplev1alpha1.FooReasonDeploymentMissing},
		{"create refused", 1, Observed{Problem: refused}, 0, "False", "False", "True", samplev1alpha1.FooReasonDeploymentMissing},
		{"no deployment yet", 1, Observed{}, 0, "False", "True", "False", samplev1alpha1.FooReasonDeploymentMissing},
		{"rolling out", 3, Observed{Deployment: dep(1, 1, 3, 3, 1)}, 1, "False", "True", "False", samplev1alpha1.FooReasonMinimumReplicasUnavailable},
		{"not yet observed", 1, Observed{Deployment: dep(2, 1, 1, 1, 1)}, 1, "True", "True", "False", samplev1alpha1.FooReasonMinimumReplicasAvailable},
		{"rolled out", 3, Observed{Deployment: dep(1, 1, 3, 3, 3)}, 3, "True", "False", "False", samplev1alpha1.FooReasonMinimumReplicasAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			foo := sampleFoo()
			foo.Spec.Replicas = ptr.To(tt.replicas)
			st := Status(foo, tt.obs)
			vocabulary.Check(t, foo, st.Conditions)
			if st.AvailableReplicas != tt.available {
				t.Errorf("availableReplicas = %d, want %d", st.AvailableReplicas, tt.available)
			}
			if st.ObservedGeneration != 2 {
				t.Errorf("observedGeneration = %d, want 2", st.ObservedGeneration)
			}
			if st.Selector != "app=nginx,controller=example-foo" {
				t.Errorf("selector = %q", st.Selector)
			}
			for typ, want := range map[string]metav1.ConditionStatus{
				samplev1alpha1.FooConditionAvailable: tt.wantAvailable, samplev1alpha1.FooConditionProgressing: tt.wantProg, samplev1alpha1.FooConditionDegraded: tt.wantDeg,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Status != want {
					t.Errorf("condition %s = %+v, want status %s", typ, c, want)
				}
			}
			if c := meta.FindStatusCondition(st.Conditions, samplev1alpha1.FooConditionAvailable); c.Reason != tt.wantReason {
				t.Errorf("Available reason = %q, want %q", c.Reason, tt.wantReason)
			}
			if p := tt.obs.Problem; p != nil {
				c := meta.FindStatusCondition(st.Conditions, samplev1alpha1.FooConditionDegraded)
				if c.Reason != p.Reason || c.Message != p.Message {
					t.Errorf("Degraded = %+v, want the problem %+v", c, p)
				}
			}
		})
	}
}

// A status computed from an unchanged world equals the one stored: that is
// what lets a settled reconcile skip its status write.
func TestStatusIsStable(t *testing.T) {
	foo := sampleFoo()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "example-foo"},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}
	foo.Status = Status(foo, Observed{Deployment: d})
	again := Status(foo, Observed{Deployment: d})
	if len(again.Conditions) != 3 {
		t.Fatalf("conditions = %+v", again.Conditions)
	}
	for i := range again.Conditions {
		if again.Conditions[i] != foo.Status.Conditions[i] {
			t.Errorf("condition %d changed: %+v -> %+v", i, foo.Status.Conditions[i], again.Conditions[i])
		}
	}
}
