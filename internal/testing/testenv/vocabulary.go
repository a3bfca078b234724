package testenv

import (
	"context"
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
)

// kinds are the operator's kinds, each with the list type that holds them.
var kinds = []struct {
	obj  client.Object
	list client.ObjectList
	gv   schema.GroupVersion
}{
	{&examplev1.Envoy{}, &examplev1.EnvoyList{}, examplev1.GroupVersion},
	{&examplev1.EnvoyConfig{}, &examplev1.EnvoyConfigList{}, examplev1.GroupVersion},
	{&samplev1alpha1.Foo{}, &samplev1alpha1.FooList{}, samplev1alpha1.GroupVersion},
	{&demov1alpha1.PodSet{}, &demov1alpha1.PodSetList{}, demov1alpha1.GroupVersion},
	{&k8sv1.FooBar{}, &k8sv1.FooBarList{}, k8sv1.GroupVersion},
	{&watchv1alpha1.Watcher{}, &watchv1alpha1.WatcherList{}, watchv1alpha1.GroupVersion},
}

// Unexported returns what the operator set in the suite's API server that
// the API packages do not export for the kind it set it on (package
// vocabulary): a condition type or reason of an object whose status only
// the operator wrote, or the reason of an event about one.
func (s *Suite) Unexported(ctx context.Context) ([]string, error) {
	var wrong []string
	byKind := map[schema.GroupVersionKind]vocabulary.Vocabulary{}
	for _, k := range kinds {
		v, err := vocabulary.Of(k.obj)
		if err != nil {
			return nil, err
		}
		byKind[k.gv.WithKind(v.Kind)] = v
		if err := s.Client.List(ctx, k.list); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(k.list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			o := item.(interface {
				client.Object
				GetConditions() []metav1.Condition
			})
			if statusByOperatorOnly(o.GetManagedFields()) {
				for _, w := range v.Conditions(o.GetConditions()) {
					wrong = append(wrong, fmt.Sprintf("%s/%s: %s", o.GetNamespace(), o.GetName(), w))
				}
			}
		}
	}
	var events eventsv1.EventList
	if err := s.Client.List(ctx, &events); err != nil {
		return nil, err
	}
	for _, e := range events.Items {
		if v, ok := byKind[schema.FromAPIVersionAndKind(e.Regarding.APIVersion, e.Regarding.Kind)]; ok {
			for _, w := range v.Event(e.Reason) {
				wrong = append(wrong, fmt.Sprintf("%s/%s: %s", e.Regarding.Namespace, e.Regarding.Name, w))
			}
		}
	}
	return wrong, nil
}

// statusByOperatorOnly reports whether the operator, and no test, wrote the
// status that fields describes.
func statusByOperatorOnly(fields []metav1.ManagedFieldsEntry) bool {
	by := false
	for _, f := range fields {
		if f.Subresource == "status" {
			if f.Manager != names.FieldOwner {
				return false
			}
			by = true
		}
	}
	return by
}
