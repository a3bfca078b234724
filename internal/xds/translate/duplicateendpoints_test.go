package translate

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// An EDS cluster's load assignment defined twice in one EnvoyConfig, in
// spec.resources.endpoints and through spec.serviceEndpoints, is refused at
// admission and in translation, naming both places, as two clusters of one
// name are. Defined once in each of two EnvoyConfigs, it is a clash between
// them, which translation settles (merge).
func TestLoadAssignmentDefinedTwice(t *testing.T) {
	endpointsOf := func(cluster string) runtime.RawExtension {
		return raw(`{"cluster_name": "` + cluster + `", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}}}]}]}`)
	}
	withService := func(c Config, clusters ...string) Config {
		for _, cl := range clusters {
			c.Spec.ServiceEndpoints = append(c.Spec.ServiceEndpoints, examplev1.ServiceEndpoints{Cluster: cl, Service: "web", Port: intstr.FromInt32(80)})
		}
		return c
	}
	twoClusters := examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("k"), clusterNamed("m")}}
	inline := twoClusters
	inline.Endpoints = []runtime.RawExtension{endpointsOf("m"), endpointsOf("k")}
	tests := []struct {
		name   string
		before []Config
		after  Config
		want   []string
	}{
		{"inline and through serviceEndpoints", nil, withService(config("x", inline), "k"),
			[]string{`spec.serviceEndpoints[0] ("k"): the cluster load assignment of cluster "k" is already defined at spec.resources.endpoints[1]: define it in one place`}},
		{"each serviceEndpoints entry that an inline one defines", nil, withService(config("x", inline), "m", "n", "k"),
			[]string{
				`spec.serviceEndpoints[0] ("m"): the cluster load assignment of cluster "m" is already defined at spec.resources.endpoints[0]: define it in one place`,
				`spec.serviceEndpoints[2] ("k"): the cluster load assignment of cluster "k" is already defined at spec.resources.endpoints[1]: define it in one place`,
			}},
		{"inline for one cluster, through serviceEndpoints for another", nil,
			withService(config("x", examplev1.EnvoyResources{Clusters: twoClusters.Clusters, Endpoints: []runtime.RawExtension{endpointsOf("m")}}), "k"), nil},
		{"through serviceEndpoints alone", nil, withService(config("x", twoClusters), "k", "m"), nil},
		{"inline in one EnvoyConfig, through serviceEndpoints in another", []Config{config("e", examplev1.EnvoyResources{Endpoints: []runtime.RawExtension{endpointsOf("k")}})},
			withService(config("x", twoClusters), "k"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Admit(Policy{}, tt.before, tt.after.Name, &tt.after); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Admit = %q\nwant    %q", got, tt.want)
			}
			ir := Translate(Input{Configs: append(append([]Config(nil), tt.before...), tt.after)})
			st := ir.Configs[tt.after.Name]
			if !reflect.DeepEqual(st.Invalid, tt.want) {
				t.Errorf("translation: invalid %q\nwant               %q", st.Invalid, tt.want)
			}
			if want := map[bool]Choice{false: ChoiceCurrent, true: ChoiceNone}[tt.want != nil]; st.Choice != want {
				t.Errorf("translation chose %q, want %q", st.Choice, want)
			}
		})
	}
}
