//go:build bench

package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/podset"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// A PodSet of 1000 pods and a ReplicaSet of 1000 pods, handled by the
// built-in ReplicaSet controller, created at the same moment on the same
// cluster: the time until all pods are Running, the peak pod count and the
// write requests of each controller. BENCH_PODSET_REPLICAS sets the number of
// pods (default 1000).
func TestPodSetVsReplicaSet(t *testing.T) {
	replicas := sizeEnv(t, "BENCH_PODSET_REPLICAS", 1000)
	const nsPS, nsRS = "bench-podset", "bench-replicaset"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	namespace(t, nsPS)
	namespace(t, nsRS)
	psPods := TrackPods(t, ctx, nsPS, replicas)
	rsPods := TrackPods(t, ctx, nsRS, replicas)

	ps := &demov1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: nsPS},
		Spec:       demov1alpha1.PodSetSpec{Replicas: int32(replicas)},
	}
	// The ReplicaSet runs the same pod as a PodSet without a template.
	labels := map[string]string{"app": "bench"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: nsRS},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: podset.DefaultContainer, Image: podset.DefaultImage, Command: podset.DefaultCommand,
				}}},
			},
		},
	}
	start := time.Now()
	if err := k8s.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	psCreated := time.Now()
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	rsCreated := time.Now()
	t.Logf("created the PodSet and the ReplicaSet %.3fs apart", rsCreated.Sub(psCreated).Seconds())

	// Wait for all pods Running, then for both owners to report it, so that the
	// status writes of the scale-up are counted too.
	testenv.Poll(t, time.Second, 20*time.Minute, "all pods running", func() (bool, error) {
		p, r := psPods.Stats(t), rsPods.Stats(t)
		t.Logf("%5.0fs running: PodSet %4d, ReplicaSet %4d", time.Since(start).Seconds(), p.Running, r.Running)
		if p.AllRunning.IsZero() || r.AllRunning.IsZero() {
			return false, nil
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		return int(ps.Status.AvailableReplicas) == replicas && int(rs.Status.AvailableReplicas) == replicas, nil
	})
	// The last status writes and events: wait until the audit log counts
	// no new write of either controller.
	var psWrites, rsWrites map[string]int
	testenv.Steady(t, 2*time.Second, 2*time.Minute, "the controllers' writes to stop", func() ([2]int, error) {
		psWrites = Writes(t, nsPS, OperatorUserAgent, "pods", "podsets", "events")
		rsWrites = Writes(t, nsRS, BuiltinUserAgent, "pods", "replicasets", "events")
		return [2]int{Total(psWrites), Total(rsWrites)}, nil
	})

	p, r := psPods.Stats(t), rsPods.Stats(t)
	psSecs, rsSecs := p.AllRunning.Sub(psCreated).Seconds(), r.AllRunning.Sub(rsCreated).Seconds()

	var b strings.Builder
	fmt.Fprintf(&b, "| %d replicas | seconds until all Running | peak pods | pods created | write requests | of which |\n", replicas)
	fmt.Fprintf(&b, "|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| PodSet (kube-envoy-controller) | %.1f | %d | %d | %d | %s |\n", psSecs, p.Peak, p.Created, Total(psWrites), Breakdown(psWrites))
	fmt.Fprintf(&b, "| ReplicaSet (kube-controller-manager) | %.1f | %d | %d | %d | %s |\n", rsSecs, r.Peak, r.Created, Total(rsWrites), Breakdown(rsWrites))
	fmt.Fprintf(&b, "\nPodSet time / ReplicaSet time: %.2f\n", psSecs/rsSecs)
	if out, err := exec.Command("nproc").Output(); err == nil {
		fmt.Fprintf(&b, "CPUs: %s", out)
	}
	Record(t, "podset-vs-replicaset", b.String())

	// Correctness, not speed: neither controller ever ran more pods than asked.
	if p.Peak > replicas || r.Peak > replicas {
		t.Errorf("peak pods: PodSet %d, ReplicaSet %d; want at most %d", p.Peak, r.Peak, replicas)
	}
	if p.Created != replicas {
		t.Errorf("the PodSet created %d pods for %d replicas", p.Created, replicas)
	}
	// The audit log and the pod watch are two sources for the same pods: every
	// pod seen created was a create request in the log.
	if psWrites["create pods"] < p.Created || rsWrites["create pods"] < r.Created {
		t.Errorf("the audit log holds %d and %d pod creates of the PodSet and the ReplicaSet, which created %d and %d pods",
			psWrites["create pods"], rsWrites["create pods"], p.Created, r.Created)
	}
}
