package translate

import (
	"reflect"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// A rejection is attributed to the EnvoyConfigs whose change of the type
// rejected it refused, narrowed to those whose changed resources Envoy's
// message names; to none when no EnvoyConfig changed a resource of it.
func TestAttribute(t *testing.T) {
	clusters := func(name string, names ...string) Config {
		var cs []runtime.RawExtension
		for _, n := range names {
			cs = append(cs, clusterNamed(n))
		}
		return config(name, examplev1.EnvoyResources{Clusters: cs})
	}
	listeners := func(name string, port int) Config {
		return config(name, examplev1.EnvoyResources{Listeners: []runtime.RawExtension{listenerOn(name+"-listener", "0.0.0.0", port)}})
	}
	withEndpoints := func(c Config, service string) Config {
		c.Spec.ServiceEndpoints = []examplev1.ServiceEndpoints{{Cluster: "k", Service: service}}
		return c
	}
	A, B := clusters("a", "a1"), clusters("b", "b1")
	A2, B2 := clusters("a", "a1", "a2"), clusters("b", "b1", "b2")
	LA, LB := listeners("la", 8080), listeners("lb", 8081)
	LA2, LB2 := listeners("la", 9090), listeners("lb", 9091)

	for _, tc := range []struct {
		name               string
		rejected, accepted []Config
		typeURL, detail    string
		want               []string
	}{
		{"the one that changed", []Config{A2, B}, []Config{A, B}, resourcev3.ClusterType, "unsupported", []string{"ns/a"}},
		{"both changed, the message names neither", []Config{A2, B2}, []Config{A, B}, resourcev3.ClusterType, "unsupported", []string{"ns/a", "ns/b"}},
		{"both changed, the message names b's cluster", []Config{A2, B2}, []Config{A, B}, resourcev3.ClusterType, "cluster b2: unsupported", []string{"ns/b"}},
		{"a name inside a longer word is not named", []Config{A2, B2}, []Config{A, B}, resourcev3.ClusterType, "cluster b2x: unsupported", []string{"ns/a", "ns/b"}},
		{"a new EnvoyConfig", []Config{A, B}, []Config{A}, resourcev3.ClusterType, "unsupported", []string{"ns/b"}},
		{"nothing accepted before", []Config{A, B}, nil, resourcev3.ClusterType, "cluster a1: no", []string{"ns/a"}},
		{"listeners changed, the clusters were refused", []Config{LA2, A}, []Config{LA, A}, resourcev3.ClusterType, "unsupported", nil},
		{"listeners: Envoy names the one it could not bind", []Config{LA2, LB2}, []Config{LA, LB}, resourcev3.ListenerType,
			"Error adding/updating listener(s) lb-listener: cannot bind '0.0.0.0:9091': Address already in use", []string{"ns/lb"}},
		{"the type is not known: any change", []Config{LA2, B}, []Config{LA, B}, "", "unsupported", []string{"ns/la"}},
		{"endpoints whose Service changed", []Config{withEndpoints(A, "web-2"), B}, []Config{withEndpoints(A, "web"), B}, resourcev3.EndpointType, "bad", []string{"ns/a"}},
		{"endpoints that the Service's pods changed are no one's", []Config{withEndpoints(A, "web"), B2}, []Config{withEndpoints(A, "web"), B}, resourcev3.EndpointType, "bad", nil},
		{"a removed cluster is not to blame", []Config{A, B}, []Config{A2, B}, resourcev3.ClusterType, "unsupported", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Attribute(tc.rejected, tc.accepted, tc.typeURL, tc.detail)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Attribute = %v, want %v", got, tc.want)
			}
		})
	}
}

// An EnvoyConfig whose content is withheld contributes its published
// content, or none of it; the others' changes are taken as they are, and
// new content of its own is taken again.
func TestTranslateWithholds(t *testing.T) {
	A, B := config("a", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("a1")}}),
		config("b", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("b1")}})
	A2 := config("a", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("a1"), clusterNamed("extra")}})
	A3 := config("a", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("a1"), clusterNamed("a3")}})
	B2 := config("b", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("b1"), clusterNamed("b2")}})
	withheld := func(previous *Config) map[string]Withheld {
		return map[string]Withheld{"ns/a": {Content: ContentOf(A2), Version: "v2", Detail: "cluster extra: no", Node: "pod-1", Previous: previous}}
	}

	clusterNames := func(ir IR) []string {
		var out []string
		for _, c := range ir.Revision {
			rs, _ := parse(c)
			for _, r := range rs.resources {
				out = append(out, r.Name)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		current   []Config
		published []Config
		previous  *Config
		choice    Choice
		want      []string
	}{
		{"its content from before the change", []Config{A2, B2}, []Config{A, B}, &A, ChoicePublished, []string{"a1", "b1", "b2"}},
		{"its content from before, though the rejected one stays served", []Config{A2, B2}, []Config{A2, B}, &A, ChoicePublished, []string{"a1", "b1", "b2"}},
		{"none, when it had none before", []Config{A2, B2}, []Config{A2, B}, nil, ChoiceNone, []string{"b1", "b2"}},
		{"its new content", []Config{A3, B2}, []Config{A, B}, &A, ChoiceCurrent, []string{"a1", "a3", "b1", "b2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ir := Translate(Input{Configs: tc.current, Published: tc.published, Withheld: withheld(tc.previous)})
			st := ir.Configs["ns/a"]
			if st.Choice != tc.choice || (st.Withheld != nil) != (tc.choice != ChoiceCurrent) {
				t.Errorf("A: choice %s, withheld %+v; want %s", st.Choice, st.Withheld, tc.choice)
			}
			if got := clusterNames(ir); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("the revision's clusters: %v, want %v", got, tc.want)
			}
			if st.Content != ContentOf(configNamed(tc.current, "ns/a")) {
				t.Errorf("A's content %s, want its current content's", st.Content)
			}
		})
	}
}
