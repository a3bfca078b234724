//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// The seed's sample Foo, applied unchanged, runs nginx pods on the cluster.
func TestFooSample(t *testing.T) {
	t.Parallel()
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ns := namespace(t, "e2e-foo")
	kubectl(t, "-n", ns, "apply", "-f", sample("samplecontroller_v1alpha1_foo.yaml"))

	waitJSONPath(t, 2*time.Minute, ns, "foo/example-foo", "{.status.availableReplicas}", "1")
	waitJSONPath(t, time.Minute, ns, "deployment/example-foo", "{.metadata.ownerReferences[0].kind}", "Foo")
	waitJSONPath(t, time.Minute, ns, "foo/example-foo", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	if got := kubectl(t, "-n", ns, "get", "pods", "-l", "app=nginx,controller=example-foo",
		"-o", "jsonpath={.items[*].status.phase}"); got != "Running" {
		t.Errorf("pod phases = %q, want one Running pod", got)
	}

	step("available: 1")
	kubectl(t, "-n", ns, "scale", "foo/example-foo", "--replicas=3")
	waitJSONPath(t, 2*time.Minute, ns, "foo/example-foo", "{.status.availableReplicas}", "3")
	waitJSONPath(t, time.Minute, ns, "deployment/example-foo", "{.status.availableReplicas}", "3")

	step("available: 3")
	// Deleting the Foo lets the garbage collector remove its Deployment and pods.
	kubectl(t, "-n", ns, "delete", "foo/example-foo")
	waitGone(t, 2*time.Minute, ns, "deployment/example-foo")
	step("Deployment deleted")
	waitGone(t, 2*time.Minute, ns, "pods", "-l", "app=nginx,controller=example-foo")
	step("pods deleted")
}
