//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// The seed's sample FooBar, applied unchanged, runs its command in a Job whose
// pod KWOK completes; the FooBar reaches Succeeded. A new spec runs a new Job
// and removes the old one with its pod.
func TestFooBarSample(t *testing.T) {
	t.Parallel()
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ns := namespace(t, "e2e-foobar")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("k8s_v1_foobar.yaml"))

	kubectl.WaitJSONPath(t, time.Minute, ns, "foobar/foobar-sample", "{.status.jobName}", "foobar-sample-1")
	kubectl.WaitJSONPath(t, time.Minute, ns, "job/foobar-sample-1", "{.metadata.ownerReferences[0].kind}", "FooBar")
	if got := kubectl.Run(t, "-n", ns, "get", "job/foobar-sample-1", "-o",
		`jsonpath={.spec.template.spec.containers[0].command}|{.spec.template.spec.containers[0].env}`); got !=
		`["sh","-c","echo foobar"]|[{"name":"FOO","value":"bar"},{"name":"BARZ","value":"false"}]` {
		t.Errorf("Job command|env = %s", got)
	}
	step("Job created")
	// The phase and its times are one status write: read together.
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foobar/foobar-sample", "{.status.phase}", "Succeeded")
	got := strings.Split(kubectl.Run(t, "-n", ns, "get", "foobar/foobar-sample", "-o",
		"jsonpath={.status.phase}|{.status.startTime}|{.status.completionTime}"), "|")
	if len(got) != 3 || got[0] != "Succeeded" || got[1] == "" || got[2] == "" {
		t.Errorf("phase|startTime|completionTime = %q, want Succeeded with both times", got)
	}
	kubectl.WaitJSONPath(t, time.Minute, ns, "job/foobar-sample-1", `{.status.conditions[?(@.type=="Complete")].status}`, "True")
	kubectl.WaitJSONPath(t, time.Minute, ns, "pods -l batch.kubernetes.io/job-name=foobar-sample-1", "{.items[*].status.phase}", "Succeeded")
	step("Succeeded")
	// Events are recorded asynchronously, after the status that tells of
	// the same change: wait for them.
	kubectl.WaitEvents(t, time.Minute, ns, "foobar-sample", "Started", "Succeeded")

	kubectl.Run(t, "-n", ns, "patch", "foobar/foobar-sample", "--type=merge", "-p", `{"spec":{"command":"echo again"}}`)
	kubectl.WaitJSONPath(t, time.Minute, ns, "foobar/foobar-sample", "{.status.jobName}", "foobar-sample-2")
	kubectl.WaitGone(t, time.Minute, ns, "job/foobar-sample-1")
	kubectl.WaitGone(t, 2*time.Minute, ns, "pods", "-l", "batch.kubernetes.io/job-name=foobar-sample-1")
	step("generation 2: old Job and its pod deleted")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foobar/foobar-sample", "{.status.phase}", "Succeeded")
	step("generation 2 Succeeded")
}
