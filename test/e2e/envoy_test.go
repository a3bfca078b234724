//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// The seed's sample Envoy, applied unchanged, becomes a running fleet that
// scales, rolls on a bootstrap change, scales to zero, and is removed with
// its Envoy.
func TestEnvoySample(t *testing.T) {
	t.Parallel()
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ns := namespace(t, "e2e-envoy")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("example_v1_envoy.yaml"))

	kubectl.WaitJSONPath(t, time.Minute, ns, "configmap/envoy-cfg-1", "{.metadata.ownerReferences[0].name}", "edge-envoy")
	kubectl.WaitJSONPath(t, time.Minute, ns, "deployment/webserver-beta", "{.metadata.ownerReferences[0].name}", "edge-envoy")
	kubectl.WaitJSONPath(t, time.Minute, ns, "service/webserver-beta", "{.metadata.ownerReferences[0].name}", "edge-envoy")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/edge-envoy", "{.status.availableReplicas}", "3")
	selector := "app.kubernetes.io/instance=edge-envoy"
	kubectl.WaitJSONPath(t, time.Minute, ns, "pods -l "+selector, "{.items[*].status.phase}", "Running Running Running")
	step("3 proxies running")

	kubectl.Run(t, "-n", ns, "scale", "envoy/edge-envoy", "--replicas=5")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/edge-envoy", "{.status.availableReplicas}", "5")
	step("scaled to 5")

	oldHash := kubectl.Run(t, "-n", ns, "get", "envoy/edge-envoy", "-o", "jsonpath={.status.bootstrapHash}")
	kubectl.Run(t, "-n", ns, "patch", "envoy/edge-envoy", "--type=merge", "-p", `{"spec":{"xds":{"port":19500}}}`)
	framework.Eventually(t, time.Minute, "the bootstrap to change", func() (bool, error) {
		boot, err := kubectl.Out("-n", ns, "get", "configmap/envoy-cfg-1", "-o", `jsonpath={.data.envoy\.yaml}`)
		return err == nil && strings.Contains(boot, "port_value: 19500"), err
	})
	newHash := ""
	framework.Eventually(t, time.Minute, "a new bootstrap hash", func() (bool, error) {
		var err error
		newHash, err = kubectl.Out("-n", ns, "get", "envoy/edge-envoy", "-o", "jsonpath={.status.bootstrapHash}")
		return err == nil && newHash != oldHash, err
	})
	// Every pod now runs the new bootstrap: the rollout replaced them all.
	framework.Eventually(t, 2*time.Minute, "the pods to roll", func() (bool, error) {
		hashes, err := kubectl.Out("-n", ns, "get", "pods", "-l", selector, "--field-selector=status.phase=Running",
			"-o", `jsonpath={range .items[*]}{.metadata.annotations.kube-envoy-controller\.io/bootstrap-hash}{" "}{end}`)
		if err != nil {
			return false, err
		}
		f := strings.Fields(hashes)
		if len(f) != 5 {
			return false, fmt.Errorf("%d Running pods, want 5", len(f))
		}
		for _, h := range f {
			if h != newHash {
				return false, fmt.Errorf("bootstrap hashes %v, want %s", f, newHash)
			}
		}
		return true, nil
	})
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/edge-envoy", `{.status.conditions[?(@.type=="Progressing")].reason}`, "RolledOut")
	step("rolled to the new bootstrap")

	// Zero is a number of replicas like any other: it reaches the Deployment.
	kubectl.Run(t, "-n", ns, "scale", "envoy/edge-envoy", "--replicas=0")
	kubectl.WaitJSONPath(t, time.Minute, ns, "deployment/webserver-beta", "{.spec.replicas}", "0")
	kubectl.WaitGone(t, 2*time.Minute, ns, "pods", "-l", selector)
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoy/edge-envoy", "{.status.availableReplicas}", "0")
	step("scaled to 0")

	kubectl.Run(t, "-n", ns, "delete", "envoy/edge-envoy")
	kubectl.WaitGone(t, 2*time.Minute, ns, "deployment/webserver-beta")
	kubectl.WaitGone(t, time.Minute, ns, "service/webserver-beta")
	kubectl.WaitGone(t, time.Minute, ns, "configmap/envoy-cfg-1")
	kubectl.WaitGone(t, 2*time.Minute, ns, "pods", "-l", selector)
	step("children deleted")
}
