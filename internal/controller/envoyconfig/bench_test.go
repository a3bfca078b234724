package envoyconfig

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// What judging costs the leader before it records a revision, in a fleet of
// 50 EnvoyConfigs and of 500: the translation alone, for comparison; one
// EnvoyConfig changed since the recorded revision (Envoy loads it); and
// every EnvoyConfig unrecorded, as when the operator first meets a fleet,
// with an empty cache (Envoy loads each, --envoy-validation-concurrency 2 at
// once) and with a warm one. docs/benchmarks.md has the figures:
//
//	go test ./internal/controller/envoyconfig -run '^$' -bench BenchmarkRevisionJudge -benchtime 5x
func BenchmarkRevisionJudge(b *testing.B) {
	envoy := realenvoy.Require(b)
	ctx := context.Background()
	newJudge := func() *envoyjudge.Judge {
		return envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: envoyjudge.DefaultConcurrency, Timeout: envoyjudge.DefaultTimeout})
	}
	for _, size := range []int{50, 500} {
		fleetOf := func(salt0 string) *world {
			w := &world{}
			for i := range size {
				salt := ""
				if i == 0 {
					salt = salt0
				}
				c := newConfig("bench", "tenant-"+strconv.Itoa(i))
				c.Spec.Resources = xdstest.Tenant(i, salt)
				w.configs = append(w.configs, c)
				w.current = append(w.current, translate.FromObject(c))
			}
			return w
		}
		recorded := fleetOf("")
		rev := publish.Revision{Version: "v1"}
		for _, c := range recorded.current {
			rev.Configs = append(rev.Configs, c.Recorded())
		}
		for _, mode := range []string{"translate", "one-changed", "all-unrecorded", "all-unrecorded-cached"} {
			b.Run(fmt.Sprintf("fleet=%d/%s", size, mode), func(b *testing.B) {
				worlds := make([]*world, b.N)
				for i := range worlds {
					switch mode {
					case "one-changed", "translate":
						worlds[i] = fleetOf("-" + strconv.Itoa(i))
						worlds[i].stored.History = publish.History{Current: "v1", Revisions: []publish.Revision{rev}}
					default:
						worlds[i] = recorded
					}
				}
				r := &Reconciler{Envoy: newJudge()}
				if mode == "all-unrecorded-cached" {
					in := recorded.input(r.Policy)
					r.judge(ctx, recorded, in, translate.Translate(in))
				}
				runs := r.Envoy.Runs()
				b.ResetTimer()
				for i := range b.N {
					if mode == "all-unrecorded" {
						b.StopTimer()
						r.Envoy = newJudge()
						b.StartTimer()
					}
					in := worlds[i].input(r.Policy)
					ir := translate.Translate(in)
					if mode != "translate" {
						ir, _ = r.judge(ctx, worlds[i], in, ir)
					}
					for name, st := range ir.Configs {
						if st.Choice != translate.ChoiceCurrent || st.EnvoyRefused != "" || st.EnvoyUnjudged != "" {
							b.Fatalf("%s: %+v", name, st)
						}
					}
				}
				b.StopTimer()
				if mode != "all-unrecorded" {
					b.ReportMetric(float64(r.Envoy.Runs()-runs)/float64(b.N), "envoy-runs/op")
				}
			})
		}
	}
}
