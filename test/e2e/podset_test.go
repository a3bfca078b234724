//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// The seed's sample PodSet, applied unchanged, runs three ready pods; a
// deleted pod is replaced.
func TestPodSetSample(t *testing.T) {
	t.Parallel()
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ns := namespace(t, "e2e-podset")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("demo_v1alpha1_podset.yaml"))

	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "podset/two-podset", "{.status.availableReplicas}", "3")
	step("availableReplicas: 3")
	// The status counts ready pods as the PodSet's cache sees them: wait
	// for the API server's list to show the same.
	var pods []string
	framework.Eventually(t, time.Minute, "3 Running pods owned by the PodSet", func() (bool, error) {
		out, err := kubectl.Out("-n", ns, "get", "pods", "-l", "demo.k8s.io/podset=two-podset",
			"-o", "jsonpath={range .items[*]}{.metadata.name},{.status.phase},{.metadata.ownerReferences[0].kind}{\"\\n\"}{end}")
		pods = strings.Fields(out)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if !strings.HasSuffix(p, ",Running,PodSet") {
				return false, fmt.Errorf("pod %s: want Running and owned by the PodSet", p)
			}
		}
		return len(pods) == 3, fmt.Errorf("pods %q", pods)
	})
	kubectl.WaitJSONPath(t, time.Minute, ns, "podset/two-podset", `{.status.conditions[?(@.type=="Available")].status}`, "True")

	victim := strings.Split(pods[0], ",")[0]
	kubectl.Run(t, "-n", ns, "delete", "pod", victim, "--wait=false")
	framework.Eventually(t, time.Minute, "a replacement pod", func() (bool, error) {
		out, err := kubectl.Out("-n", ns, "get", "pods", "-l", "demo.k8s.io/podset=two-podset",
			"--field-selector", "status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}")
		names := strings.Fields(out)
		if err != nil {
			return false, err
		}
		return len(names) == 3 && !slices.Contains(names, victim), fmt.Errorf("Running pods %v", names)
	})
	kubectl.WaitJSONPath(t, time.Minute, ns, "podset/two-podset", "{.status.availableReplicas}", "3")
	step("deleted pod replaced")
}

// podSampler counts the pods in a namespace throughout a test: every change a
// watch reports and, independently, a list every 100ms.
type podSampler struct {
	mu       sync.Mutex
	live     map[string]bool // pods that exist, by name
	max      int             // most pods that existed at once, by the watch
	listMax  int             // most pods a list returned
	samples  int             // lists taken
	created  []string        // every pod the watch saw created, in order
	watchErr error           // why the watch ended early, if it did
}

func samplePods(t *testing.T, ctx context.Context, ns string) *podSampler {
	t.Helper()
	s := &podSampler{live: map[string]bool{}}
	// A RetryWatcher resumes from the last resourceVersion when the API server
	// closes the watch, so that no pod event is missed.
	cfg, err := config.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var initial corev1.PodList
	if err := k8s.List(ctx, &initial, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range initial.Items {
		s.live[p.Name] = true
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, initial.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if ev.Type == watch.Error {
					s.mu.Lock()
					s.watchErr = fmt.Errorf("pod watch failed: %v", ev.Object)
					s.mu.Unlock()
				}
				continue
			}
			s.mu.Lock()
			switch ev.Type {
			case watch.Added:
				s.live[p.Name] = true
				s.created = append(s.created, p.Name)
			case watch.Deleted:
				delete(s.live, p.Name)
			}
			s.max = max(s.max, len(s.live))
			s.mu.Unlock()
		}
	}()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var list corev1.PodList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
				continue
			}
			s.mu.Lock()
			s.listMax = max(s.listMax, len(list.Items))
			s.samples++
			s.mu.Unlock()
		}
	}()
	return s
}

// createdSoFar returns how many pods the watch saw created.
func (s *podSampler) createdSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created)
}

// take returns the sampler's figures so far and resets the maxima.
func (s *podSampler) take(t *testing.T) (watchMax, listMax, samples, created int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchErr != nil {
		t.Fatal(s.watchErr)
	}
	watchMax, listMax, samples, created = s.max, s.listMax, s.samples, len(s.created)
	s.max, s.listMax, s.samples = len(s.live), 0, 0
	return
}

// lateWindow is how long a scale test watches for a pod created late, after
// the PodSet reports its target.
const lateWindow = 2 * time.Second

// Scaling from 0 to 200 and back to 0: the pod count, sampled throughout, is
// never above the target, and no pod is created beyond it.
func TestPodSetScaleNeverAboveTarget(t *testing.T) {
	t.Parallel()
	const target = 200
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ns := namespace(t, "e2e-podset-scale")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sampler := samplePods(t, ctx, ns)

	ps := &demov1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns}, Spec: demov1alpha1.PodSetSpec{Replicas: 0}}
	if err := k8s.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	kubectl.WaitJSONPath(t, time.Minute, ns, "podset/scaled", "{.status.observedGeneration}", "1")

	kubectl.Run(t, "-n", ns, "scale", "podset/scaled", fmt.Sprintf("--replicas=%d", target))
	kubectl.WaitJSONPath(t, 5*time.Minute, ns, "podset/scaled", "{.status.availableReplicas}", fmt.Sprint(target))
	step(fmt.Sprintf("availableReplicas: %d", target))
	// The watch reports each create in its own time: wait until it has seen
	// the target's, then give a create beyond it the time to show.
	framework.Eventually(t, time.Minute, "the watch to see every pod created", func() (bool, error) {
		n := sampler.createdSoFar()
		return n >= target, fmt.Errorf("%d pods seen created", n)
	})
	testenv.Consistently(t, lateWindow, func() error {
		if n := sampler.createdSoFar(); n != target {
			return fmt.Errorf("scale up to %d created %d pods", target, n)
		}
		return nil
	})
	watchMax, listMax, samples, created := sampler.take(t)
	t.Logf("scale up: at most %d pods (watch), %d (%d lists), %d pods created", watchMax, listMax, samples, created)
	if watchMax > target || listMax > target {
		t.Errorf("scale up to %d: %d pods at once by the watch, %d by a list", target, watchMax, listMax)
	}
	if created != target {
		t.Errorf("scale up to %d created %d pods", target, created)
	}

	kubectl.Run(t, "-n", ns, "scale", "podset/scaled", "--replicas=0")
	kubectl.WaitGone(t, 5*time.Minute, ns, "pods", "-l", "demo.k8s.io/podset=scaled")
	kubectl.WaitJSONPath(t, time.Minute, ns, "podset/scaled", "{.status.replicas}", "0")
	step("scaled to 0, every pod gone")
	testenv.Consistently(t, lateWindow, func() error {
		if n := sampler.createdSoFar(); n != created {
			return fmt.Errorf("scale down to 0 created %d pods", n-created)
		}
		return nil
	})
	watchMax, listMax, samples, createdAfter := sampler.take(t)
	t.Logf("scale down: at most %d pods (watch), %d (%d lists), %d pods created", watchMax, listMax, samples, createdAfter-created)
	if watchMax > target || listMax > target {
		t.Errorf("scale down: %d pods at once by the watch, %d by a list", watchMax, listMax)
	}
	if createdAfter != created {
		t.Errorf("scale down to 0 created %d pods", createdAfter-created)
	}
}
