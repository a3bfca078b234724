//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
)

// 1000 pod creations, 50 at a time, through the API server, in a namespace
// where the injection webhook adds a Watcher's sidecar to each, and the same
// in a namespace out of its scope: the latency of each create as the client
// sees it, and the webhook's share as the API server measures it.
func TestWebhookAdmissionLatency(t *testing.T) {
	const pods, concurrency, warmup = 1000, 50, 50
	const nsOn, nsOff = "bench-webhook", "bench-no-webhook"
	ctx := context.Background()
	namespace(t, nsOn)
	namespace(t, nsOff)
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: nsOn}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels[webhook.NamespaceLabel] = webhook.NamespaceEnabled
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	w := &watchv1alpha1.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: nsOn},
		Spec: watchv1alpha1.WatcherSpec{
			Container:  corev1.Container{Name: "watcher", Image: "busybox"},
			ConfigData: map[string]string{"LEVEL": "info"},
		},
	}
	if err := k8s.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitForInjection(t, nsOn)

	// Warm up both paths (connections, caches), then measure.
	createPods(t, nsOn, "warm", warmup, concurrency)
	createPods(t, nsOff, "warm", warmup, concurrency)
	before := webhookAdmission(t)
	on := createPods(t, nsOn, "pod", pods, concurrency)
	after := webhookAdmission(t)
	off := createPods(t, nsOff, "pod", pods, concurrency)

	// Every pod came back injected, once.
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(nsOn)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Annotations[webhook.InjectedAnnotation] != "bench" || len(p.Spec.Containers) != 2 {
			t.Fatalf("pod %s was not injected: %v, %d containers", p.Name, p.Annotations, len(p.Spec.Containers))
		}
	}

	calls := after.count - before.count
	mean := 0.0
	if calls > 0 {
		mean = (after.sum - before.sum) / calls * 1000
	}
	Record(t, "webhook", fmt.Sprintf(`## Sidecar injection: admission latency

%d pod creations, %d at a time, after %d to warm up; each pod gets one Watcher's sidecar.

| namespace | p50 | p99 | max | wall time |
|---|---|---|---|---|
| injection enabled (webhook called) | %s | %s | %s | %s |
| not enabled (webhook not called) | %s | %s | %s | %s |

API server's own measure of the webhook call (apiserver_admission_webhook_admission_duration_seconds): %.0f calls, mean %.1f ms.
`, pods, concurrency, warmup,
		ms(on.quantile(0.5)), ms(on.quantile(0.99)), ms(on.quantile(1)), on.wall.Round(time.Millisecond),
		ms(off.quantile(0.5)), ms(off.quantile(0.99)), ms(off.quantile(1)), off.wall.Round(time.Millisecond),
		calls, mean))
}

// waitForInjection waits until a dry-run pod in ns comes back injected: the
// webhook's certificate is ready and its CA is in the configuration.
func waitForInjection(t *testing.T, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p := benchPod(ns, "probe")
		err := k8s.Create(ctx, p, client.DryRunAll)
		return err == nil && len(p.Spec.Containers) == 2, nil
	})
	if err != nil {
		t.Fatalf("the webhook does not inject in %s: %v", ns, err)
	}
}

func benchPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{webhook.InjectAnnotation: "bench"}},
		Spec: corev1.PodSpec{
			// The pods stay unscheduled: the benchmark measures admission,
			// not the scheduler or the nodes.
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "kube-envoy-controller.io/bench"}},
			Containers:      []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
}

type latencies struct {
	each []time.Duration
	wall time.Duration
}

func (l latencies) quantile(q float64) time.Duration {
	if len(l.each) == 0 {
		return 0
	}
	s := slices.Clone(l.each)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// createPods creates n pods in ns, concurrency at a time, and returns how
// long each create took.
func createPods(t *testing.T, ns, prefix string, n, concurrency int) latencies {
	t.Helper()
	next := make(chan int)
	var mu sync.Mutex
	var out latencies
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				p := benchPod(ns, fmt.Sprintf("%s-%04d", prefix, i))
				t0 := time.Now()
				_, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
				d := time.Since(t0)
				mu.Lock()
				out.each = append(out.each, d)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	out.wall = time.Since(start)
	if firstErr != nil {
		t.Fatalf("creating pods in %s: %v", ns, firstErr)
	}
	return out
}

type histogram struct{ count, sum float64 }

// webhookAdmission reads the API server's count and total seconds of calls
// to the injection webhook.
func webhookAdmission(t *testing.T) histogram {
	t.Helper()
	out, err := exec.Command(filepath.Join(os.Getenv("BENCH_ROOT"), "bin", "kubectl"), "get", "--raw", "/metrics").Output()
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	var h histogram
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `name="inject.watch.my.domain"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_count{"):
			h.count += v
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_sum{"):
			h.sum += v
		}
	}
	return h
}
