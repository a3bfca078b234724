package fuzz

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foobar"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/objcheck"
)

func FuzzFooBarJob(f *testing.F) {
	for _, seed := range []struct {
		name       string
		generation int64
		spec       string
	}{
		{"run", 1, `{"command":"echo foobar"}`},
		{long("r", 52), 999999999, `{"command":"true","foo":"","barz":"x y","image":"registry.example.com/tools/busybox:1.36"}`},
		{"run", 7, `{"command":"exit 1","foo":"a\nb","image":" busybox"}`},
	} {
		f.Add(seed.name, seed.generation, []byte(seed.spec))
	}
	f.Fuzz(func(t *testing.T, name string, generation int64, spec []byte) {
		// The API server sets generation: 1 on create, one more on each
		// change of the spec. A billion changes are out of reach.
		if generation < 1 || generation > 999999999 {
			t.Skip("no FooBar reaches this generation")
		}
		fb := &k8sv1.FooBar{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fuzz", UID: "7c1a", Generation: generation}}
		if !decode(spec, &fb.Spec) || !admitted(t, "FooBar", fb) {
			t.Skip("the API server refuses it")
		}
		job := foobar.Desired(fb)
		if job == nil {
			t.Fatal("a FooBar that never ran wants no Job")
		}
		valid(t, "the Job", objcheck.Job(job), job)
		if c := job.Spec.Template.Spec.Containers[0]; c.Command[len(c.Command)-1] != fb.Spec.Command {
			t.Fatalf("the Job runs %q, not the command %q", c.Command, fb.Spec.Command)
		}
		st := foobar.Status(fb, foobar.Observed{Job: job})
		if st.ObservedGeneration != generation {
			t.Fatalf("status.observedGeneration %d, want %d", st.ObservedGeneration, generation)
		}
	})
}
