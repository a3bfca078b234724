//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	envoyctrl "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// TestEnvoyFleets creates N Envoys (replicas 1) and, as the floor, the same
// ConfigMaps, Deployments and Services created directly, on a cluster with no
// client-side QPS limits. It reports seconds until all are available, the
// operator's write requests per Envoy and per minute once settled, and its
// peak RSS. BENCH_ENVOY_SIZES sets N (default "100,1000").
func TestEnvoyFleets(t *testing.T) {
	c := k8s
	sizes := strings.Split(envOr("BENCH_ENVOY_SIZES", "100,1000"), ",")
	settle := envDuration(t, "BENCH_SETTLE", time.Minute)
	var rows []string
	for _, s := range sizes {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("BENCH_ENVOY_SIZES: %q", s)
		}
		floor := envoyFloor(t, c, n)
		t.Logf("N=%d floor (ConfigMap+Deployment+Service created directly): %.1fs", n, floor.Seconds())

		ns := fmt.Sprintf("bench-envoy-%d", n)
		namespace(t, ns)
		start := time.Now()
		parallel(t, n, func(i int) error {
			return c.Create(context.Background(), &examplev1.Envoy{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%04d", i), Namespace: ns},
				Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1),
					XDS: &examplev1.XDS{Host: "xds.bench.svc", Port: 18000}},
			})
		})
		waitFor(t, 15*time.Minute, fmt.Sprintf("%d Envoys available", n), func() (int, error) {
			var list examplev1.EnvoyList
			if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
				return 0, err
			}
			ready := 0
			for _, e := range list.Items {
				if meta.IsStatusConditionTrue(e.Status.Conditions, conditions.Available) && e.Status.AvailableReplicas == 1 {
					ready++
				}
			}
			return ready, nil
		}, n)
		ours := time.Since(start)
		up := operatorWritesIn(t, ns)
		t.Logf("N=%d Envoys: %.1fs, %d writes (%s)", n, ours.Seconds(), Total(up), Breakdown(up))

		time.Sleep(settle)
		settled := operatorWritesIn(t, ns)
		perMin := float64(Total(settled)-Total(up)) / settle.Minutes()
		hwm, rss := operatorMemory(t)
		rows = append(rows, fmt.Sprintf("| %d | %.1f | %.1f | %.2f | %.1f | %.1f | %d / %d |",
			n, ours.Seconds(), floor.Seconds(), ours.Seconds()/floor.Seconds(),
			float64(Total(up))/float64(n), perMin, hwm>>20, rss>>20))
		t.Logf("N=%d settled: %.1f writes/min; operator peak RSS %d MiB, RSS %d MiB", n, perMin, hwm>>20, rss>>20)
	}
	Record(t, "envoy", strings.Join(append([]string{
		"| N | Envoys available (s) | floor (s) | ratio | writes per Envoy | writes/min settled | operator peak / current RSS (MiB) |",
		"|---|---|---|---|---|---|---|",
	}, rows...), "\n")+"\n")
}

// operatorWritesIn counts the operator's write requests to ns from the audit log.
func operatorWritesIn(t *testing.T, ns string) map[string]int {
	return Writes(t, ns, OperatorUserAgent, "envoys", "configmaps", "deployments", "services", "events")
}

// envoyFloor creates, for n fleets, the ConfigMap, Deployment and Service the
// operator would, directly, and returns the time until every Deployment is
// available: what the cluster itself needs for the same objects.
func envoyFloor(t *testing.T, c client.Client, n int) time.Duration {
	t.Helper()
	ns := fmt.Sprintf("bench-floor-%d", n)
	namespace(t, ns)
	defaults := fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "xds.bench.svc", Port: 18000}}
	start := time.Now()
	parallel(t, n, func(i int) error {
		e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%04d", i), Namespace: ns},
			Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1)}}
		want, err := envoyctrl.Desired(e, defaults)
		if err != nil {
			return err
		}
		for _, obj := range []client.Object{want.ConfigMap, want.Deployment, want.Service} {
			// Plain objects: no owner, and not labelled as the operator's.
			obj.SetOwnerReferences(nil)
			labels := obj.GetLabels()
			delete(labels, objects.ManagedByLabel)
			obj.SetLabels(labels)
			if d, ok := obj.(*appsv1.Deployment); ok {
				delete(d.Spec.Template.Labels, objects.ManagedByLabel)
			}
			if err := c.Create(context.Background(), obj); err != nil {
				return err
			}
		}
		return nil
	})
	waitFor(t, 15*time.Minute, fmt.Sprintf("%d floor Deployments available", n), func() (int, error) {
		var list appsv1.DeploymentList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		ready := 0
		for _, d := range list.Items {
			if d.Status.AvailableReplicas == 1 {
				ready++
			}
		}
		return ready, nil
	}, n)
	return time.Since(start)
}

// parallel runs create(i) for i in [0, n) on 32 workers.
func parallel(t *testing.T, n int, create func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// waitFor polls count every 250ms until it reaches want.
func waitFor(t *testing.T, timeout time.Duration, what string, count func() (int, error), want int) {
	t.Helper()
	got := 0
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		got, err = count()
		return err == nil && got >= want, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s: %d of %d", what, got, want)
	}
}

// operatorMemory returns the operator's peak and current resident set, in bytes.
func operatorMemory(t *testing.T) (peak, current int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", os.Getenv("OPERATOR_PID"), "status"))
	if err != nil {
		t.Fatalf("reading the operator's memory (OPERATOR_PID): %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmHWM:" || f[0] == "VmRSS:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmHWM:" {
				peak = kb << 10
			} else {
				current = kb << 10
			}
		}
	}
	return peak, current
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return d
}
