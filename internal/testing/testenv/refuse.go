package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// RefuseCreates makes the API server refuse every create of probe's kind in
// probe's namespace, as an admission control of the cluster would (a
// ValidatingAdmissionPolicy, evaluated in the API server), with reason
// Forbidden and message. It returns once a dry-run create of probe is
// refused, and a function that lifts the refusal, which also runs when the
// test ends.
func (s *Suite) RefuseCreates(t testing.TB, probe client.Object, message string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	gvk, err := apiutil.GVKForObject(probe, s.Client.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := s.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("refuse-%s-%s", mapping.Resource.Resource, probe.GetNamespace())
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{
						APIGroups:   []string{gvk.Group},
						APIVersions: []string{gvk.Version},
						Resources:   []string{mapping.Resource.Resource},
					},
				}}},
			},
			Validations: []admissionv1.Validation{{
				Expression: "false",
				Message:    message,
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": probe.GetNamespace()},
			}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := s.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		for _, obj := range []client.Object{binding, policy} {
			if err := s.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
		// The API server drops the policy from its informer a moment later.
		Eventually(t, "the refusal of "+mapping.Resource.Resource+" to be lifted", func() (bool, error) {
			err := s.Client.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
			return err == nil || !strings.Contains(err.Error(), name), err
		})
	}
	t.Cleanup(lift)
	// Policies take effect once the API server's informer has them.
	Poll(t, 100*time.Millisecond, Timeout, "the API server to refuse "+mapping.Resource.Resource, func() (bool, error) {
		err := s.Client.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), message), err
	})
	return lift
}

// BackoffWindow is how long ExpectBackoff watches the retries of a refused
// write.
const BackoffWindow = 5 * time.Second

// MaxRetries bounds the refused creates ExpectBackoff allows in
// BackoffWindow. controller-runtime retries a failed reconcile after 5 ms,
// doubling the delay each time: 5 ms · 2^10 exceeds BackoffWindow, so an
// object retried with backoff sends at most about 10 in it, whatever the
// machine's speed (a slower machine sends fewer); a reconcile requeued
// without backoff would send hundreds.
const MaxRetries = 12

// ExpectBackoff proves that an object reporting a refused create (as
// Degraded, already written) is no hot loop: for BackoffWindow, the manager
// sends to namespace ns only the creates of resource that the API server
// refuses, at most MaxRetries of them, and no status write or new event,
// since nothing it reports changes. An event recorded again is counted by
// the events library, which patches the event's series once, then every
// half hour: such a patch is no new event.
func (s *Suite) ExpectBackoff(t testing.TB, ns, resource string) {
	t.Helper()
	s.Counter.Reset()
	time.Sleep(BackoffWindow)
	creates := 0
	for _, w := range s.Counter.WritesTo("/namespaces/" + ns + "/") {
		if strings.HasPrefix(w, "PATCH /apis/events.k8s.io/v1/namespaces/"+ns+"/events/") {
			continue
		}
		if !strings.HasPrefix(w, "POST ") || !strings.HasSuffix(w, "/"+resource) {
			t.Errorf("a write besides the refused creates of %s while the refusal lasts: %s", resource, w)
			continue
		}
		creates++
	}
	if creates > MaxRetries {
		t.Errorf("%d refused creates of %s in %s: more than the %d a retry with backoff sends", creates, resource, BackoffWindow, MaxRetries)
	}
}

// Refusal is one kind's test of a child that the API server refuses to
// create (TestRefusal).
type Refusal[T Conditioned] struct {
	// Object is created by the test, in Probe's namespace.
	Object T
	// Probe is a child of the kind refused, in the namespace of the test.
	Probe client.Object
	// Resource names the refused kind in URLs ("deployments").
	Resource string
	// Controller names the controller that reconciles Object (see Touch).
	Controller string
	// Change changes Object's spec while the refusal lasts: the status must
	// follow the new generation.
	Change func(T)
	// Recovered reports whether Object's status says it works, once the
	// refusal is lifted.
	Recovered func(T) bool
}

// TestRefusal runs r: Object's child is refused by an admission policy; the
// object reports it as Degraded with the API server's reason and message,
// at the current generation (also after a spec change), with a Warning
// event; it retries with backoff (ExpectBackoff); and it recovers on its
// own once the refusal is lifted.
func TestRefusal[T Conditioned](t *testing.T, s *Suite, r Refusal[T]) {
	t.Helper()
	ctx := context.Background()
	const message = "this namespace admits no such object (test policy)"
	lift := s.RefuseCreates(t, r.Probe, message)
	obj := r.Object
	if err := s.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	refused := func(o T) bool {
		c := Condition(o, "Degraded")
		return c.Status == metav1.ConditionTrue && c.Reason == string(metav1.StatusReasonForbidden) && strings.Contains(c.Message, message)
	}
	got := WaitSettled(t, s.Client, obj.DeepCopyObject().(T), refused)
	s.expectObservedGeneration(t, got)
	s.WaitEvent(t, got.GetNamespace(), got.GetName(), "Warning Forbidden")

	// A new spec while refused: the status describes it.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			return err
		}
		r.Change(got)
		return s.Client.Update(ctx, got)
	}); err != nil {
		t.Fatal(err)
	}
	if got.GetGeneration() < 2 {
		t.Fatalf("the change left the generation at %d", got.GetGeneration())
	}
	got = WaitSettled(t, s.Client, got, refused)
	s.expectObservedGeneration(t, got)

	// The status may be written once more after it first describes the new
	// generation: the change also changed a child that was created, and the
	// child's event comes after. Whatever is in flight lands before the
	// backoff is counted: the controller has reconciled a touch since.
	s.Touch(t, r.Controller, got)
	s.ExpectBackoff(t, got.GetNamespace(), r.Resource)

	lift()
	WaitSettled(t, s.Client, got, func(o T) bool {
		return Condition(o, "Degraded").Status == metav1.ConditionFalse && r.Recovered(o)
	})
}

// expectObservedGeneration checks that obj's status.observedGeneration is
// its generation.
func (s *Suite) expectObservedGeneration(t testing.TB, obj client.Object) {
	t.Helper()
	u := &unstructured.Unstructured{}
	gvk, err := apiutil.GVKForObject(obj, s.Client.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(gvk)
	if err := s.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatal(err)
	}
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		t.Errorf("status.observedGeneration = %d, want the generation, %d", observed, u.GetGeneration())
	}
}

// Probes: valid objects of the kinds the controllers create, for
// RefuseCreates.

// ConfigMapProbe is a ConfigMap in ns.
func ConfigMapProbe(ns string) client.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}
}

// ServiceProbe is a Service in ns.
func ServiceProbe(ns string) client.Object {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
}

// PodProbe is a pod in ns.
func PodProbe(ns string) client.Object {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec:       probePodSpec(),
	}
}

// DeploymentProbe is a Deployment in ns.
func DeploymentProbe(ns string) client.Object {
	labels := map[string]string{"app": "probe"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: probePodSpec()},
		},
	}
}

// JobProbe is a Job in ns.
func JobProbe(ns string) client.Object {
	spec := probePodSpec()
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}},
	}
}

func probePodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}
}
