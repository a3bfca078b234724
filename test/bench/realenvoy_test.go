//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// TestRealEnvoyPush times what a user waits for: from an EnvoyConfig edit
// sent to the API server to the moment each real Envoy of
// the fleet has applied it, as Envoy itself records it (its route
// configuration's update_time stat, the wall clock of the update's
// success), in both protocols. The fleet's proxies are Envoy processes on
// this host, one per pod (realenvoy.Kubelet), each over mutual TLS; the
// route is sent by RDS. The p50, p99 and max are over the proxies and the
// rounds. Its floor, in the same rounds, is the API server's own delivery
// of the edit to a watcher of EnvoyConfigs, which no operator can beat.
func TestRealEnvoyPush(t *testing.T) {
	envoy := realenvoy.Require(t)
	sizes := sizesEnv(t, "BENCH_REAL_ENVOY_SIZES", "1,10,50")
	rounds := sizeEnv(t, "BENCH_REAL_ENVOY_ROUNDS", 10)
	if Smoke() {
		sizes, rounds = sizesEnv(t, "BENCH_REAL_ENVOY_SIZES", "2"), sizeEnv(t, "BENCH_REAL_ENVOY_ROUNDS", 2)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "Real Envoys (%s), one per pod on this host, over mutual TLS: from an EnvoyConfig edit sent to the API server to Envoy's record of the route applied (%d rounds)\n\n", envoyVersion(t, envoy), rounds)
	out.WriteString("| protocol | Envoys | p50 | p99 | max | floor p50 | p50 / floor |\n|---|---|---|---|---|---|---|\n")
	for _, delta := range []bool{false, true} {
		for _, n := range sizes {
			p50, p99, worst, floor := realEnvoyPush(t, envoy, n, rounds, delta)
			fmt.Fprintf(&out, "| %s | %d | %s | %s | %s | %s | %.1f |\n", map[bool]string{false: "state of the world", true: "delta"}[delta], n,
				p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), floor.Round(time.Millisecond),
				float64(p50)/float64(max(floor, time.Millisecond)))
		}
	}
	Record(t, "real-envoy-push", out.String())
}

func envoyVersion(t *testing.T, envoy string) string {
	v, err := realenvoy.Version(envoy)
	if err != nil {
		t.Fatal(err)
	}
	return "Envoy " + v
}

func realEnvoyPush(t *testing.T, envoy string, n, rounds int, delta bool) (p50, p99, worst, floor time.Duration) {
	t.Helper()
	ns := fmt.Sprintf("bench-real-envoy-%d-%t", n, delta)
	namespace(t, ns)
	ports, err := realenvoy.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, ns, fmt.Sprintf("apiVersion: example.com/v1\nkind: Envoy\nmetadata: {name: real}\nspec: {replicas: %d, drainSeconds: 0}\n", n))
	apply(t, ns, realenvoy.DirectResponse("push", "real", int(ports[0]), "round 0"))
	k := &realenvoy.Kubelet{Client: cs, Namespace: ns, Selector: "app.kubernetes.io/instance=real",
		Envoy: envoy, XDS: os.Getenv("OPERATOR_XDS_ADDR"), Dir: t.TempDir(), Delta: delta}
	defer k.Start(func(err error) { t.Logf("host proxies: %v", err) })()
	ctx := context.Background()
	procs := k.WaitLive(t, n, 5*time.Minute)
	// The floor: the API server's own delivery of the edit to a watcher,
	// which the operator cannot beat.
	cfgs := &examplev1.EnvoyConfigList{}
	if err := k8s.List(ctx, cfgs, client.InNamespace(ns)); err != nil || len(cfgs.Items) != 1 {
		t.Fatalf("the EnvoyConfig push: %v (%d)", err, len(cfgs.Items))
	}
	gen0 := cfgs.Items[0].Generation
	w, err := k8s.Watch(ctx, &examplev1.EnvoyConfigList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: cfgs.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const stat = "http.push.rds.push.update_time"
	var lags, floors []time.Duration
	for r := 1; r <= rounds; r++ {
		before := map[string]int64{}
		for pod, p := range procs {
			v, err := p.Stat(ctx, stat)
			if err != nil {
				t.Fatal(err)
			}
			before[pod] = v
		}
		acked := apply(t, ns, realenvoy.DirectResponse("push", "real", int(ports[0]), fmt.Sprintf("round %d", r)))
		for seen := false; !seen; {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the EnvoyConfigs' watch ended")
				}
				if o, isObj := ev.Object.(metav1.Object); isObj && o.GetGeneration() == gen0+int64(r) {
					floors = append(floors, time.Since(acked))
					seen = true
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("round %d: the watch never told of the edit", r)
			}
		}
		for pod, p := range procs {
			var at int64
			testenv.Poll(t, 20*time.Millisecond, 2*time.Minute, "Envoy "+pod+" to apply the route", func() (bool, error) {
				v, err := p.Stat(ctx, stat)
				at = v
				return err == nil && v > before[pod], err
			})
			lags = append(lags, time.UnixMilli(at).Sub(acked))
		}
	}
	slices.Sort(lags)
	slices.Sort(floors)
	return lags[len(lags)/2], lags[(len(lags)*99)/100], lags[len(lags)-1], floors[len(floors)/2]
}

// apply applies manifest, one object, in ns (server-side apply) and returns
// when it sent the request: the operator may hear of the edit before the
// API server's answer reaches us, so the time of the request is the start
// of what a user waits for.
func apply(t *testing.T, ns, manifest string) time.Time {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(ns)
	sent := time.Now()
	//nolint:staticcheck // client.Apply with an unstructured object is server-side apply
	if err := k8s.Patch(context.Background(), obj, client.Apply, client.FieldOwner("bench"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	return sent
}
