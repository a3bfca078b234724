package fuzz

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/podset"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/objcheck"
)

func FuzzPodSetPod(f *testing.F) {
	for _, seed := range []struct{ name, spec string }{
		{"pods", `{}`},
		{"pods", `{"replicas":0}`},
		{long("p", 63), `{"replicas":3,"template":{"metadata":{"labels":{"app":"web","demo.k8s.io/podset":"other"},"annotations":{"a":"b"}},` +
			`"spec":{"restartPolicy":"Never","containers":[{"name":"web","image":"nginx","ports":[{"name":"http","containerPort":80}]}]}}}`},
		{"pods", `{"template":{"spec":{"containers":[{"name":"a","image":"i"}],"volumes":[{"name":"v","emptyDir":{}}]}}}`},
		{"pods", `{"template":{"spec":{}}}`},
	} {
		f.Add(seed.name, []byte(seed.spec))
	}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		ps := &demov1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fuzz", UID: "7c1a", Generation: 1}}
		if !decode(spec, &ps.Spec) || !admitted(t, "PodSet", ps) {
			t.Skip("the API server refuses it")
		}
		// The template is the user's pod. The CRD checks what CEL's cost
		// budget allows of it; a template that is no valid pod in ways it
		// cannot check is the user's error, reported at runtime by the
		// ReplicaFailure condition with the API server's message.
		if tmpl := ps.Spec.Template; tmpl != nil {
			user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: "fuzz", Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
			if errs := objcheck.Pod(user); len(errs) > 0 {
				t.Skip("the template is no valid pod")
			}
		}
		before := ps.DeepCopy()
		pod := podset.Pod(ps)
		valid(t, "the pod", objcheck.Pod(pod), pod)
		if !labels.SelectorFromSet(podset.PodLabels(ps)).Matches(labels.Set(pod.Labels)) {
			t.Fatalf("the PodSet's selector does not select its pod: %v", pod.Labels)
		}
		if !equality.Semantic.DeepEqual(before, ps) {
			t.Fatal("Pod modified the PodSet")
		}
		st := podset.Status(ps, podset.Observed{Active: []*corev1.Pod{pod}, Managed: true})
		if _, err := labels.Parse(st.Selector); err != nil {
			t.Fatalf("status.selector %q does not parse: %v", st.Selector, err)
		}
	})
}
