//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// A fleet's disruption budget follows its spec, and the Eviction API, which
// node drains use, respects it: the disruption controller of the cluster's
// kube-controller-manager counts the proxies, the API server refuses an
// eviction the budget does not allow.
func TestDisruptionBudgetHoldsEvictions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, "e2e-budget")
	kubectl.Apply(t, ns, `apiVersion: example.com/v1
kind: Envoy
metadata: {name: prod}
spec:
  replicas: 3
  xds: {host: xds.example, port: 18000}
`)
	kubectl.WaitJSONPath(t, time.Minute, ns, "poddisruptionbudget/prod", "{.spec.maxUnavailable}", "1")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/prod", "{.status.availableReplicas}", "3")
	waitBudget(t, ns, "prod", "/1", 1)

	// evict asks to evict a ready proxy: one that is not ready is evicted
	// whatever the budget (unhealthyPodEvictionPolicy AlwaysAllow).
	evict := func() error {
		t.Helper()
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "prod"}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && ready(&p) {
				return k8s.SubResource("eviction").Create(ctx, &p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}})
			}
		}
		t.Fatal("no ready pod to evict")
		return nil
	}
	// The default budget lets one proxy go at a time.
	if err := evict(); err != nil {
		t.Fatalf("the budget allows one eviction: %v", err)
	}

	// No proxy may go.
	kubectl.Run(t, "-n", ns, "patch", "envoy/prod", "--type=merge", "-p", `{"spec":{"podDisruptionBudget":{"maxUnavailable":0}}}`)
	waitBudget(t, ns, "prod", "/0", 0)
	err := evict()
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "disruption budget") {
		t.Fatalf("an eviction beyond the budget: %v, want it refused (429) for the disruption budget", err)
	}

	// At least two of three must stay: one may go again, once all three run.
	kubectl.Run(t, "-n", ns, "patch", "envoy/prod", "--type=merge", "-p", `{"spec":{"podDisruptionBudget":{"maxUnavailable":null,"minAvailable":2}}}`)
	waitBudget(t, ns, "prod", "2/", 1)
	if err := evict(); err != nil {
		t.Fatalf("minAvailable 2 of 3 allows one eviction: %v", err)
	}

	// A fleet of one has no budget unless it asks: scaled down, the
	// budget is gone with the spec's, and back at the default when scaled up.
	kubectl.Run(t, "-n", ns, "patch", "envoy/prod", "--type=merge", "-p", `{"spec":{"podDisruptionBudget":null,"replicas":1}}`)
	kubectl.WaitGone(t, time.Minute, ns, "poddisruptionbudget/prod")
}

// waitBudget waits until the budget name has minAvailable/maxUnavailable
// bounds, and the disruption controller has counted for its current spec
// the disruptions it allows.
func waitBudget(t *testing.T, ns, name, bounds string, allowed int32) {
	t.Helper()
	ctx := context.Background()
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("budget %s: %s, %d disruptions allowed", name, bounds, allowed), func() (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pdb); err != nil {
			return false, err
		}
		got := fmt.Sprintf("%s/%s", str(pdb.Spec.MinAvailable), str(pdb.Spec.MaxUnavailable))
		return got == bounds && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == allowed,
			fmt.Errorf("bounds %s, observed generation %d of %d, %d allowed", got, pdb.Status.ObservedGeneration, pdb.Generation, pdb.Status.DisruptionsAllowed)
	})
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func str(v *intstr.IntOrString) string {
	if v == nil {
		return ""
	}
	return v.String()
}

// spec.autoscaling: the cluster's own HorizontalPodAutoscaler controller
// scales the Envoy through its scale subresource, and the fleet follows.
// KWOK runs no containers and the cluster no metrics server, so the
// autoscaler cannot measure CPU: what it does here is keep spec.replicas
// within minReplicas and maxReplicas, which it does before it measures.
func TestAutoscalerScalesTheFleet(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-autoscaling")
	kubectl.Apply(t, ns, `apiVersion: example.com/v1
kind: Envoy
metadata: {name: scaled}
spec:
  replicas: 1
  xds: {host: xds.example, port: 18000}
  resources: {requests: {cpu: 100m}}
  autoscaling: {minReplicas: 3, maxReplicas: 5}
`)
	kubectl.WaitJSONPath(t, time.Minute, ns, "hpa/scaled", "{.spec.scaleTargetRef.kind}/{.spec.scaleTargetRef.name}/{.spec.minReplicas}/{.spec.maxReplicas}", "Envoy/scaled/3/5")
	// The autoscaler raises the Envoy to its minimum; the operator follows.
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/scaled", "{.spec.replicas}", "3")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/scaled", "{.status.availableReplicas}", "3")
	kubectl.WaitJSONPath(t, time.Minute, ns, "hpa/scaled", "{.status.desiredReplicas}", "3")

	// Beyond the maximum, it brings the Envoy back.
	kubectl.Run(t, "-n", ns, "scale", "envoy/scaled", "--replicas=9")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/scaled", "{.spec.replicas}", "5")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "deployment/scaled", "{.spec.replicas}", "5")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/scaled", "{.status.availableReplicas}", "5")

	kubectl.Run(t, "-n", ns, "patch", "envoy/scaled", "--type=merge", "-p", `{"spec":{"autoscaling":null}}`)
	kubectl.WaitGone(t, time.Minute, ns, "hpa/scaled")
}

// A fleet's proxies spread over the cluster's nodes: softly by default, and
// as the spec says when it says; here hard, one proxy a node.
func TestFleetSpreadsOverNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, "e2e-spread")
	kubectl.Apply(t, ns, `apiVersion: example.com/v1
kind: Envoy
metadata: {name: spread}
spec:
  replicas: 3
  xds: {host: xds.example, port: 18000}
`)
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/spread", "{.status.availableReplicas}", "3")
	kubectl.WaitJSONPath(t, time.Minute, ns, "pods -l app.kubernetes.io/instance=spread",
		`{range .items[*]}{.spec.topologySpreadConstraints[*].topologyKey}/{.spec.topologySpreadConstraints[*].whenUnsatisfiable};{end}`,
		strings.Repeat("kubernetes.io/hostname topology.kubernetes.io/zone/ScheduleAnyway ScheduleAnyway;", 3))

	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	n := len(nodes.Items)
	kubectl.Run(t, "-n", ns, "patch", "envoy/spread", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"replicas":%d,"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"DoNotSchedule"}]}}`, n))
	framework.Eventually(t, 3*time.Minute, "one proxy on each node", func() (bool, error) {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "spread"}); err != nil {
			return false, err
		}
		onNode := map[string]int{}
		running := 0
		for _, p := range pods.Items {
			c := p.Spec.TopologySpreadConstraints
			if p.DeletionTimestamp != nil || len(c) != 1 || c[0].WhenUnsatisfiable != corev1.DoNotSchedule {
				continue // a pod of the rollout before
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
				onNode[p.Spec.NodeName]++
			}
		}
		return running == n && len(onNode) == n, fmt.Errorf("%d running, by node %v", running, onNode)
	})
}
