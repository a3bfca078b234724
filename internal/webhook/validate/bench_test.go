package validate

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// fleetReader lists a fleet's EnvoyConfigs, as the manager's cache would,
// and holds nothing else.
type fleetReader struct {
	client.Reader
	configs []examplev1.EnvoyConfig
}

func (fleetReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(examplev1.GroupVersion.WithResource("envoys").GroupResource(), key.Name)
}

func (f fleetReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*examplev1.EnvoyConfigList).Items = f.configs
	return nil
}

// What an admission costs, in a fleet of 50 EnvoyConfigs and of 500: the
// rules alone (translate.Admit on the fleet as it would be), the rules and
// a real Envoy's load of the changed EnvoyConfig (content Envoy has not
// seen: it runs), and the rules and a verdict from the cache (the same
// content again). docs/benchmarks.md has the figures:
//
//	go test ./internal/webhook/validate -run '^$' -bench BenchmarkAdmission -benchtime 200x
func BenchmarkAdmission(b *testing.B) {
	envoy := realenvoy.Require(b)
	ctx := context.Background()
	for _, size := range []int{50, 500} {
		fleet := make([]examplev1.EnvoyConfig, size)
		for i := range fleet {
			fleet[i] = *envoyConfig("bench", "tenant-"+strconv.Itoa(i), xdstest.Tenant(i, ""))
		}
		changed := func(salt string) admission.Request {
			return createRequest(b, envoyConfig("bench", "tenant-0", xdstest.Tenant(0, salt)))
		}
		for _, mode := range []string{"rules", "envoy", "cached"} {
			b.Run(fmt.Sprintf("fleet=%d/%s", size, mode), func(b *testing.B) {
				v := &EnvoyConfigValidator{Client: fleetReader{configs: fleet}, Decoder: admission.NewDecoder(suite.Manager.GetScheme()),
					Policy: translate.Policy{Namespace: operatorNamespace}}
				if mode != "rules" {
					v.Envoy = envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: 1, Timeout: envoyjudge.DefaultTimeout})
				}
				reqs := make([]admission.Request, b.N)
				for i := range reqs {
					salt := "-" + strconv.Itoa(i)
					if mode == "cached" {
						salt = ""
					}
					reqs[i] = changed(salt)
				}
				b.ResetTimer()
				for i := range b.N {
					if resp := v.Handle(ctx, reqs[i]); !resp.Allowed || (len(resp.Warnings) > 0) != (v.Envoy == nil) {
						b.Fatalf("allowed %v, %v, warnings %q", resp.Allowed, resp.Result, resp.Warnings)
					}
				}
				b.StopTimer()
				if v.Envoy != nil {
					b.ReportMetric(float64(v.Envoy.Runs())/float64(b.N), "envoy-runs/op")
				}
			})
		}
	}
}
