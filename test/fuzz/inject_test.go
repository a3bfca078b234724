package fuzz

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/objcheck"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/inject"
)

var podSeeds = []string{
	`{"metadata":{"name":"app","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`,
	`{"metadata":{"generateName":"app-","annotations":{"watch.my.domain/inject":"alpha, beta,alpha","example.com/envoy-sidecar":"edge"}},` +
		`"spec":{"containers":[{"name":"app","image":"nginx"}],"volumes":[{"name":"logs","emptyDir":{}}],"imagePullSecrets":[{"name":"registry"}]}}`,
	`{"metadata":{"name":"app","annotations":{"watch.my.domain/injected":"alpha"}},"spec":{"containers":[{"name":"tail","image":"nginx"}]}}`,
	`{"metadata":{"name":"app","labels":{"tier":"a"}},"spec":{"initContainers":[{"name":"envoy","image":"x"}],"containers":[{"name":"app","image":"nginx"}]}}`,
}

func FuzzInject(f *testing.F) {
	for i, pod := range podSeeds {
		a, b := watcherSeeds[i%len(watcherSeeds)].spec, watcherSeeds[(i+1)%len(watcherSeeds)].spec
		envoy := ""
		if i%2 == 1 {
			envoy = `{"resources":{"limits":{"memory":"128Mi"}}}`
		}
		f.Add([]byte(pod), []byte(a), []byte(b), []byte(envoy))
	}
	f.Fuzz(func(t *testing.T, podJSON, alphaSpec, betaSpec, envoySpec []byte) {
		pod := &corev1.Pod{}
		if !decode(podJSON, pod) {
			t.Skip("not a pod")
		}
		pod.Namespace = "fuzz"
		// The API server validates the pod after the webhook; a pod it would
		// refuse without the sidecars is refused with them.
		if len(objcheck.Pod(pod)) > 0 {
			t.Skip("the API server refuses the pod itself")
		}
		podVolumes := sets.New[string]()
		for _, v := range pod.Spec.Volumes {
			podVolumes.Insert(v.Name)
		}
		var watchers []watchv1alpha1.Watcher
		for _, w := range []struct {
			name string
			spec []byte
		}{{"alpha", alphaSpec}, {"beta", betaSpec}} {
			o := watchv1alpha1.Watcher{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: "fuzz", UID: "7c1a", Generation: 1}}
			if !decode(w.spec, &o.Spec) || !admitted(t, "Watcher", &o) {
				t.Skip("the API server refuses a Watcher")
			}
			// The CRD checks what CEL's cost budget allows of the embedded
			// container; the rest (environment names, the volumes it mounts,
			// which may be the pod's) only a pod can show.
			volumes := podVolumes.Clone().Insert(o.Spec.Volume.Name)
			if len(objcheck.Container(&o.Spec.Container, volumes, field.NewPath("container"))) > 0 {
				t.Skip("the Watcher's container is no valid container")
			}
			watchers = append(watchers, o)
		}
		var envoy *examplev1.Envoy
		if len(envoySpec) > 0 {
			envoy = &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "fuzz", UID: "7c1b", Generation: 1}}
			if !decode(envoySpec, &envoy.Spec) || !admitted(t, "Envoy", envoy) {
				t.Skip("the API server refuses the Envoy")
			}
		}

		before := pod.DeepCopy()
		named, matched, _ := inject.Select(pod, watchers)
		// A namespace that lets every Watcher inject by selector.
		selected := append(named, inject.Permitted(matched, map[string]string{inject.SelectorWatchersAnnotation: "*"})...)
		sidecars := inject.Sidecars{Watchers: selected, Envoy: envoy}
		out, err := inject.Inject(pod, sidecars)
		if !equality.Semantic.DeepEqual(before, pod) {
			t.Fatal("Inject modified its input pod")
		}
		if conflict := (*inject.Conflict)(nil); errors.As(err, &conflict) {
			return // refused, with a message that says which name clashes
		}
		if err != nil {
			t.Fatalf("Inject failed with no conflict: %v", err)
		}
		valid(t, "the injected pod", objcheck.Pod(out), out)
		// Whatever the pod's annotations said, it has every sidecar it gets,
		// and the records name exactly those.
		have := map[string]corev1.Container{}
		for _, c := range out.Spec.Containers {
			have[c.Name] = c
		}
		var recorded []string
		for _, w := range selected {
			want := inject.WatcherContainer(w)
			if !inject.CarriesContainer(have[want.Name], want) {
				t.Fatalf("Watcher %s's container is not in the injected pod", w.Name)
			}
			recorded = append(recorded, w.Name)
		}
		if got := out.Annotations[inject.InjectedAnnotation]; got != strings.Join(recorded, ",") {
			t.Fatalf("%s = %q, want %q", inject.InjectedAnnotation, got, strings.Join(recorded, ","))
		}
		if envoy != nil {
			want := inject.EnvoyContainer(envoy, sidecars.Fleet)
			if !inject.CarriesContainer(have[want.Name], want) || out.Annotations[inject.EnvoySidecarInjectedAnnotation] != envoy.Name {
				t.Fatal("the Envoy sidecar is not in the injected pod, or not recorded")
			}
		} else if _, ok := out.Annotations[inject.EnvoySidecarInjectedAnnotation]; ok {
			t.Fatal("an Envoy sidecar the pod did not get is recorded")
		}
		again, err := inject.Inject(out, sidecars)
		if err != nil {
			t.Fatalf("a second injection failed: %v", err)
		}
		if !equality.Semantic.DeepEqual(again, out) {
			t.Fatal("a second injection changed the pod")
		}
	})
}
