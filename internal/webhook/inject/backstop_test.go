package inject

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The injector itself never changes a pod of kube-system or of the
// operator's namespace, whatever reaches it: the shipped namespaceSelector
// keeps those pods away, and this is the backstop for a configuration
// edited or written by hand. Both namespaces exist and carry the opt-in
// label, so that nothing but the injector's own exclusion of them stands
// between their pods and injection; the pods reach the injector through a
// configuration without the namespaceSelector. The same pod in an
// ordinary opted-in namespace is acted on: it names a Watcher and an Envoy
// that do not exist, and is denied.
func TestInjectorNeverTouchesExcludedNamespaces(t *testing.T) {
	ctx := context.Background()
	unselected := func(ns string) *corev1.Pod {
		p := podIn(ns, map[string]string{InjectAnnotation: "missing", EnvoySidecarAnnotation: "missing"})
		p.Name, p.GenerateName = "", "app-" // fresh names in the shared namespaces
		p.Labels = map[string]string{unselectedLabel: "true"}
		return p
	}
	ordinary := namespace(t, true)
	err := suite.Client.Create(ctx, unselected(ordinary))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a pod of namespace %s naming a missing Watcher: %v; want it denied", ordinary, err)
	}
	for _, ns := range []string{"kube-system", operatorNamespace} {
		enable(t, ns)
		before := webhookRequests()
		pod := unselected(ns)
		if err := suite.Client.Create(ctx, pod); err != nil {
			t.Errorf("a pod of opted-in namespace %s: %v; want it allowed unchanged", ns, err)
			continue
		}
		if n := webhookRequests() - before; n != 1 {
			t.Errorf("namespace %s: the injector was called %v times, want once", ns, n)
		}
		if got := containerNames(pod); got != "app" || pod.Annotations[InjectedAnnotation] != "" || pod.Annotations[EnvoySidecarInjectedAnnotation] != "" {
			t.Errorf("namespace %s: containers %s, annotations %v: the pod was changed", ns, got, pod.Annotations)
		}
		if err := suite.Client.Delete(ctx, pod); err != nil {
			t.Error(err)
		}
	}
}
