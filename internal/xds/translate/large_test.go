package translate

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// largeFleet is a fleet of 4096 EDS clusters and their load assignments,
// in eight EnvoyConfigs of 512, every endpoint on port.
func largeFleet(port int) []Config {
	var out []Config
	for k := range 8 {
		var res examplev1.EnvoyResources
		for i := k * 512; i < (k+1)*512; i++ {
			res.Clusters = append(res.Clusters, runtime.RawExtension{Raw: fmt.Appendf(nil,
				`{"name": "c%d", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`, i)})
			res.Endpoints = append(res.Endpoints, runtime.RawExtension{Raw: fmt.Appendf(nil,
				`{"cluster_name": "c%d", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.%d.%d.1", "port_value": %d}}}}]}]}`, i, i/256, i%256, port)})
		}
		out = append(out, FromObject(&examplev1.EnvoyConfig{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("a-", k), Namespace: "ns", Generation: 1},
			Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "a", Resources: res},
		}))
	}
	return out
}

// The time to translate, and to admit an edit of, a fleet of 4096 clusters
// (go test -bench Large ./internal/xds/translate/).
func BenchmarkLargeFleetTranslate(b *testing.B) {
	configs := largeFleet(80)
	for range b.N {
		if ir := Translate(Input{Configs: configs, Policy: testPolicy}); len(ir.Resources) == 0 {
			b.Fatal("nothing translated")
		}
	}
}

func BenchmarkLargeFleetAdmit(b *testing.B) {
	configs := largeFleet(80)
	edit := largeFleet(81)[0]
	for range b.N {
		if problems := Admit(testPolicy, configs, edit.Name, &edit); len(problems) != 0 {
			b.Fatal(problems)
		}
	}
}

// The time to judge the fleet's 8192 resources with the content policy the
// first time, which the verdicts remembered spare every later reconcile and
// admission (each iteration is another policy).
func BenchmarkLargeFleetPolicyFirstJudgement(b *testing.B) {
	configs := largeFleet(80)
	parsedConfigs := make([]parsed, len(configs))
	for i, c := range configs {
		parsedConfigs[i], _ = parse(c)
	}
	b.ResetTimer()
	for i := range b.N {
		pol := testPolicy
		pol.Hosts = []string{fmt.Sprint("xds-", i, ".example.com")}
		for j, p := range parsedConfigs {
			if refused := pol.refusals(configs[j].Name, p.resources); len(refused) != 0 {
				b.Fatal(refused)
			}
		}
	}
}
