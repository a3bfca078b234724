package manager_test

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// The kinds the operator creates, each as a minimal valid object.
var childKinds = []struct {
	kind string
	make func(meta metav1.ObjectMeta) client.Object
	// label is what marks the operator's objects of the kind; nil: the managed-by label.
	label map[string]string
}{
	{"Deployment", func(m metav1.ObjectMeta) client.Object {
		sel := map[string]string{"app": m.Name}
		return &appsv1.Deployment{ObjectMeta: m, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: podSpec(corev1.RestartPolicyAlways)},
		}}
	}, nil},
	{"Service", func(m metav1.ObjectMeta) client.Object {
		return &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	}, nil},
	{"ConfigMap", func(m metav1.ObjectMeta) client.Object {
		return &corev1.ConfigMap{ObjectMeta: m, Data: map[string]string{"k": "v"}}
	}, nil},
	{"Pod", func(m metav1.ObjectMeta) client.Object {
		return &corev1.Pod{ObjectMeta: m, Spec: podSpec(corev1.RestartPolicyAlways)}
	}, nil},
	{"Job", func(m metav1.ObjectMeta) client.Object {
		return &batchv1.Job{ObjectMeta: m, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec(corev1.RestartPolicyNever)}}}
	}, nil},
	{"PodDisruptionBudget", func(m metav1.ObjectMeta) client.Object {
		return &policyv1.PodDisruptionBudget{ObjectMeta: m, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": m.Name}},
		}}
	}, nil},
	{"HorizontalPodAutoscaler", func(m metav1.ObjectMeta) client.Object {
		return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: m, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Envoy", Name: m.Name},
			MaxReplicas:    2,
		}}
	}, nil},
	{"NetworkPolicy", func(m metav1.ObjectMeta) client.Object {
		return &networkingv1.NetworkPolicy{ObjectMeta: m, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	}, nil},
	// Of Secrets, only those the xDS control plane may read, whatever the value.
	{"Secret", func(m metav1.ObjectMeta) client.Object {
		return &corev1.Secret{ObjectMeta: m, StringData: map[string]string{"k": "v"}}
	}, map[string]string{names.XDSSecretLabel: "any-value"}},
}

func podSpec(restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}
}

// emptyLike returns a new, empty object of obj's type.
func emptyLike(obj client.Object) client.Object {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

// The manager caches, of the kinds the operator creates, only the objects
// labelled as the operator's, and drops every object's managedFields: a
// cluster full of other Deployments, Pods and ConfigMaps costs the operator
// no memory.
func TestCacheHoldsOnlyLabelledChildrenWithoutManagedFields(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	cache := suite.Manager.GetCache()
	ours := map[string]string{names.ManagedByLabel: names.ManagedByValue}
	for _, k := range childKinds {
		t.Run(k.kind, func(t *testing.T) {
			// The stranger first: its watch event comes before the labelled
			// object's, so once the cache holds the labelled object, it would
			// hold the stranger too, were it to cache it.
			stranger := k.make(metav1.ObjectMeta{Name: "stranger", Namespace: ns, Labels: map[string]string{"app": "other"}})
			label := ours
			if k.label != nil {
				label = k.label
			}
			labelled := k.make(metav1.ObjectMeta{Name: "ours", Namespace: ns, Labels: label})
			for _, obj := range []client.Object{stranger, labelled} {
				if err := suite.Client.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			// The API server records managedFields: what the cache drops.
			if len(labelled.GetManagedFields()) == 0 {
				t.Fatal("the API server returned no managedFields: the test could not tell them dropped")
			}

			cached := testenv.WaitFor(t, cache, ns, "ours", emptyLike(labelled), nil)
			if mf := cached.GetManagedFields(); len(mf) != 0 {
				t.Errorf("cached %s has %d managedFields entries, want none", k.kind, len(mf))
			}
			if !reflect.DeepEqual(cached.GetLabels(), label) {
				t.Errorf("cached %s has labels %v", k.kind, cached.GetLabels())
			}
			if err := cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stranger"}, emptyLike(stranger)); !apierrors.IsNotFound(err) {
				t.Errorf("the unlabelled %s: cache Get = %v, want NotFound", k.kind, err)
			}
			// The API server has it: only the cache leaves it out.
			if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stranger"}, emptyLike(stranger)); err != nil {
				t.Errorf("the unlabelled %s is not in the API server: %v", k.kind, err)
			}
		})
	}

	// Other kinds are cached whatever their labels, without managedFields too.
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled", Namespace: ns}}
	if err := suite.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	if len(e.GetManagedFields()) == 0 {
		t.Fatal("the API server returned no managedFields for the Envoy")
	}
	if cached := testenv.WaitFor(t, cache, ns, "unlabelled", &examplev1.Envoy{}, nil); len(cached.ManagedFields) != 0 {
		t.Errorf("cached Envoy has %d managedFields entries, want none", len(cached.ManagedFields))
	}
}
