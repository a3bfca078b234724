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
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("samplecontroller_v1alpha1_foo.yaml"))

	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foo/example-foo", "{.status.availableReplicas}", "1")
	kubectl.WaitJSONPath(t, time.Minute, ns, "deployment/example-foo", "{.metadata.ownerReferences[0].kind}", "Foo")
	kubectl.WaitJSONPath(t, time.Minute, ns, "foo/example-foo", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	kubectl.WaitJSONPath(t, time.Minute, ns, "pods -l app=nginx,controller=example-foo", "{.items[*].status.phase}", "Running")

	step("available: 1")
	kubectl.Run(t, "-n", ns, "scale", "foo/example-foo", "--replicas=3")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foo/example-foo", "{.status.availableReplicas}", "3")
	kubectl.WaitJSONPath(t, time.Minute, ns, "deployment/example-foo", "{.status.availableReplicas}", "3")

	step("available: 3")
	// Deleting the Foo lets the garbage collector remove its Deployment and pods.
	kubectl.Run(t, "-n", ns, "delete", "foo/example-foo")
	kubectl.WaitGone(t, 2*time.Minute, ns, "deployment/example-foo")
	step("Deployment deleted")
	kubectl.WaitGone(t, 2*time.Minute, ns, "pods", "-l", "app=nginx,controller=example-foo")
	step("pods deleted")
}
