package fuzz

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foo"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/objcheck"
)

func FuzzFooDeployment(f *testing.F) {
	for _, seed := range []struct{ name, spec string }{
		{"web", `{"deploymentName":"web"}`},
		{"web", `{"deploymentName":"web.example","replicas":10}`},
		{"w", `{"deploymentName":"` + long("d.", 126) + `d","replicas":1}`},
		{"web", `{"deploymentName":"Web","replicas":0}`},
	} {
		f.Add(seed.name, []byte(seed.spec))
	}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		o := &samplev1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fuzz", UID: "7c1a", Generation: 1}}
		if !decode(spec, &o.Spec) || !admitted(t, "Foo", o) {
			t.Skip("the API server refuses it")
		}
		d := foo.Deployment(o)
		valid(t, "the Deployment", objcheck.Deployment(d), d)
		st := foo.Status(o, foo.Observed{Deployment: d})
		if _, err := labels.Parse(st.Selector); err != nil {
			t.Fatalf("status.selector %q does not parse: %v", st.Selector, err)
		}
	})
}
