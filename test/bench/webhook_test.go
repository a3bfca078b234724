//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/inject"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
)

// 1000 pod creations, 50 at a time, through the API server, in a namespace
// where the injection webhook adds a Watcher's sidecar to each, and the same
// in a namespace out of its scope: the latency of each create as the client
// sees it, and the webhook's share as the API server measures it. Then, on
// a quiet API server, pods created one at a time in each namespace in turn
// (BENCH_WEBHOOK_QUIET_PODS in each, default 200): what the webhook adds to
// one create. BENCH_WEBHOOK_PODS sets the number of pods (default 1000).
func TestWebhookAdmissionLatency(t *testing.T) {
	pods := sizeEnv(t, "BENCH_WEBHOOK_PODS", 1000)
	concurrency, warmup := min(50, pods), min(50, pods)
	const nsOn, nsOff = "bench-webhook", "bench-no-webhook"
	ctx := context.Background()
	namespace(t, nsOn)
	namespace(t, nsOff)
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: nsOn}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels[inject.NamespaceLabel] = inject.NamespaceEnabled
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
	hook := podInjector(t)
	before := webhookAdmission(t, hook)
	on := createPods(t, nsOn, "pod", pods, concurrency)
	after := webhookAdmission(t, hook)
	off := createPods(t, nsOff, "pod", pods, concurrency)

	// Every pod came back injected, once.
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(nsOn)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Annotations[inject.InjectedAnnotation] != "bench" || len(p.Spec.Containers) != 2 {
			t.Fatalf("pod %s was not injected: %v, %d containers", p.Name, p.Annotations, len(p.Spec.Containers))
		}
	}

	// The API server's own count: at least one call of the webhook per pod.
	calls := after.Count - before.Count
	if calls < float64(pods) {
		t.Fatalf("the API server counted %.0f calls of the webhook %s for %d injected pods", calls, hook, pods)
	}
	mean := (after.Sum - before.Sum) / calls * 1000

	// Quiet: one create at a time, alternating between the namespaces, so
	// that a drift of the machine's load weighs on both alike.
	quiet := sizeEnv(t, "BENCH_WEBHOOK_QUIET_PODS", 200)
	var quietOn, quietOff latencies
	beforeQuiet := webhookAdmission(t, hook)
	for i := range quiet {
		quietOn.each = append(quietOn.each, createPods(t, nsOn, fmt.Sprintf("quiet-%04d", i), 1, 1).each...)
		quietOff.each = append(quietOff.each, createPods(t, nsOff, fmt.Sprintf("quiet-%04d", i), 1, 1).each...)
	}
	afterQuiet := webhookAdmission(t, hook)
	quietCalls := afterQuiet.Count - beforeQuiet.Count
	if quietCalls < float64(quiet) {
		t.Fatalf("the API server counted %.0f calls of the webhook %s for %d pods created one at a time", quietCalls, hook, quiet)
	}
	quietMean := (afterQuiet.Sum - beforeQuiet.Sum) / quietCalls * 1000

	Record(t, "webhook", fmt.Sprintf(`## Sidecar injection: admission latency

%d pod creations, %d at a time, after %d to warm up; each pod gets one Watcher's sidecar.

| namespace | p50 | p99 | max | wall time |
|---|---|---|---|---|
| injection enabled (webhook called) | %s | %s | %s | %s |
| not enabled (webhook not called) | %s | %s | %s | %s |

API server's own measure of the webhook call (%s{name=%q}): %.0f calls, mean %.1f ms.

Quiet: %d pod creations in each namespace, one at a time, alternating.

| namespace | p50 | p99 | max |
|---|---|---|---|
| injection enabled (webhook called) | %s | %s | %s |
| not enabled (webhook not called) | %s | %s | %s |
| added by the webhook | %s | %s | |

API server's own measure of the webhook call: %.0f calls, mean %.1f ms.
`, pods, concurrency, warmup,
		ms(on.quantile(0.5)), ms(on.quantile(0.99)), ms(on.quantile(1)), on.wall.Round(time.Millisecond),
		ms(off.quantile(0.5)), ms(off.quantile(0.99)), ms(off.quantile(1)), off.wall.Round(time.Millisecond),
		webhookDurationMetric, hook, calls, mean,
		quiet,
		ms(quietOn.quantile(0.5)), ms(quietOn.quantile(0.99)), ms(quietOn.quantile(1)),
		ms(quietOff.quantile(0.5)), ms(quietOff.quantile(0.99)), ms(quietOff.quantile(1)),
		ms(quietOn.quantile(0.5)-quietOff.quantile(0.5)), ms(quietOn.quantile(0.99)-quietOff.quantile(0.99)),
		quietCalls, quietMean))
}

// waitForInjection waits until a dry-run pod in ns comes back injected: the
// webhook's certificate is ready and its CA is in the configuration.
func waitForInjection(t *testing.T, ns string) {
	t.Helper()
	testenv.Poll(t, 500*time.Millisecond, 2*time.Minute, "the webhook to inject in "+ns, func() (bool, error) {
		p := benchPod(ns, "probe")
		err := k8s.Create(context.Background(), p, client.DryRunAll)
		return err == nil && len(p.Spec.Containers) == 2, err
	})
}

func benchPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{inject.InjectAnnotation: "bench"}},
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
	var (
		mu  sync.Mutex
		out latencies
	)
	start := time.Now()
	parallel(t, n, concurrency, func(i int) error {
		p := benchPod(ns, fmt.Sprintf("%s-%04d", prefix, i))
		t0 := time.Now()
		_, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		d := time.Since(t0)
		mu.Lock()
		out.each = append(out.each, d)
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("creating pods in %s: %w", ns, err)
		}
		return nil
	})
	out.wall = time.Since(start)
	return out
}

// webhookDurationMetric is the API server's histogram of webhook calls.
const webhookDurationMetric = "apiserver_admission_webhook_admission_duration_seconds"

// podInjector returns the name of the mutating webhook that handles pod
// creation, as installed in the cluster.
func podInjector(t *testing.T) string {
	t.Helper()
	var list admissionregistrationv1.MutatingWebhookConfigurationList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cfg := range list.Items {
		for _, h := range cfg.Webhooks {
			for _, r := range h.Rules {
				if slices.Contains(r.Resources, "pods") && slices.Contains(r.Operations, admissionregistrationv1.Create) {
					names = append(names, h.Name)
				}
			}
		}
	}
	if len(names) != 1 {
		t.Fatalf("mutating webhooks of pod creation: %v, want one", names)
	}
	return names[0]
}

// webhookAdmission reads the API server's count and total seconds of calls
// to the webhook hook. It fails when the API server has no such measure: a
// renamed metric or webhook must not read as 0 calls.
func webhookAdmission(t *testing.T, hook string) measure.Series {
	t.Helper()
	out, err := exec.Command(filepath.Join(os.Getenv("BENCH_ROOT"), "bin", "kubectl"), "get", "--raw", "/metrics").Output()
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	fams, err := measure.ParseMetrics(out)
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	s, err := measure.Sum(fams, webhookDurationMetric, map[string]string{"name": hook})
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	if s.Matched == 0 {
		t.Fatalf("the API server's metrics have no %s series for the webhook %s", webhookDurationMetric, hook)
	}
	return s
}
