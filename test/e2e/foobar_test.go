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
	kubectl(t, "-n", ns, "apply", "-f", sample("k8s_v1_foobar.yaml"))

	waitJSONPath(t, time.Minute, ns, "foobar/foobar-sample", "{.status.jobName}", "foobar-sample-1")
	waitJSONPath(t, time.Minute, ns, "job/foobar-sample-1", "{.metadata.ownerReferences[0].kind}", "FooBar")
	if got := kubectl(t, "-n", ns, "get", "job/foobar-sample-1", "-o",
		`jsonpath={.spec.template.spec.containers[0].command}|{.spec.template.spec.containers[0].env}`); got !=
		`["sh","-c","echo foobar"]|[{"name":"FOO","value":"bar"},{"name":"BARZ","value":"false"}]` {
		t.Errorf("Job command|env = %s", got)
	}
	step("Job created")
	waitJSONPath(t, 2*time.Minute, ns, "foobar/foobar-sample", "{.status.phase}", "Succeeded")
	waitJSONPath(t, time.Minute, ns, "job/foobar-sample-1", `{.status.conditions[?(@.type=="Complete")].status}`, "True")
	if got := kubectl(t, "-n", ns, "get", "pods", "-l", "batch.kubernetes.io/job-name=foobar-sample-1",
		"-o", "jsonpath={.items[*].status.phase}"); got != "Succeeded" {
		t.Errorf("the Job's pod phases = %q, want one Succeeded pod", got)
	}
	for _, f := range []string{"{.status.startTime}", "{.status.completionTime}"} {
		if kubectl(t, "-n", ns, "get", "foobar/foobar-sample", "-o", "jsonpath="+f) == "" {
			t.Errorf("%s is empty", f)
		}
	}
	step("Succeeded")
	events := kubectl(t, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=foobar-sample",
		"-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	if !strings.Contains(events, "Started") || !strings.Contains(events, "Succeeded") {
		t.Errorf("events = %q, want Started and Succeeded", events)
	}

	kubectl(t, "-n", ns, "patch", "foobar/foobar-sample", "--type=merge", "-p", `{"spec":{"command":"echo again"}}`)
	waitJSONPath(t, time.Minute, ns, "foobar/foobar-sample", "{.status.jobName}", "foobar-sample-2")
	waitGone(t, time.Minute, ns, "job/foobar-sample-1")
	waitGone(t, 2*time.Minute, ns, "pods", "-l", "batch.kubernetes.io/job-name=foobar-sample-1")
	step("generation 2: old Job and its pod deleted")
	waitJSONPath(t, 2*time.Minute, ns, "foobar/foobar-sample", "{.status.phase}", "Succeeded")
	step("generation 2 Succeeded")
}
