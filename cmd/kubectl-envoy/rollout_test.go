package main

import (
	"bytes"
	"strings"
	"testing"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

func rolloutConfig(gen int64, published string, r *examplev1.ConfigRolloutStatus) examplev1.EnvoyConfig {
	var c examplev1.EnvoyConfig
	c.Status.ObservedGeneration, c.Status.PublishedVersion, c.Status.Rollout = gen, published, r
	return c
}

// The orders name the version and the step the EnvoyConfigs report, the
// most recent report when they differ; there is nothing to order without a
// rollout under way.
func TestRolloutOrder(t *testing.T) {
	older := &examplev1.ConfigRolloutStatus{Version: "v2", PreviousVersion: "v1", Phase: "Progressing", Step: 1}
	newer := &examplev1.ConfigRolloutStatus{Version: "v2", PreviousVersion: "v1", Phase: "Progressing", Step: 2}
	configs := []examplev1.EnvoyConfig{rolloutConfig(3, "v2", older), rolloutConfig(7, "v2", newer), rolloutConfig(9, "v2", nil)}
	for _, tc := range []struct {
		promote    bool
		key, value string
	}{{true, examplev1.RolloutPromoteAnnotation, "v2/2"}, {false, examplev1.RolloutAbortAnnotation, "v2"}} {
		key, value, err := rolloutOrder("edge", configs, tc.promote)
		if err != nil || key != tc.key || value != tc.value {
			t.Errorf("promote %v: %s=%s (%v), want %s=%s", tc.promote, key, value, err, tc.key, tc.value)
		}
	}
	aborted := &examplev1.ConfigRolloutStatus{Version: "v2", PreviousVersion: "v1", Phase: "Aborted", Step: 1}
	for _, cs := range [][]examplev1.EnvoyConfig{nil, {rolloutConfig(1, "v1", nil)}, {rolloutConfig(1, "v2", aborted)}} {
		if _, _, err := rolloutOrder("edge", cs, true); err == nil || !strings.Contains(err.Error(), "no rollout under way") {
			t.Errorf("%d configs: err %v, want none under way", len(cs), err)
		}
	}
}

func TestPrintRollout(t *testing.T) {
	for _, tc := range []struct {
		configs []examplev1.EnvoyConfig
		want    []string
	}{
		{nil, []string{"fleet edge: nothing published yet"}},
		{[]examplev1.EnvoyConfig{rolloutConfig(1, "v1", nil)}, []string{"no rollout under way; version v1 is served to every proxy"}},
		{[]examplev1.EnvoyConfig{rolloutConfig(1, "v2", &examplev1.ConfigRolloutStatus{Version: "v2", PreviousVersion: "v1", Phase: "Progressing",
			Step: 2, ServedProxies: 3, ConnectedProxies: 6, Message: "baking"})},
			[]string{"FLEET", "edge", "v2", "v1", "Progressing", "3/6", "baking"}},
	} {
		var b bytes.Buffer
		if err := printRollout(&b, "edge", tc.configs); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("printed %q, want %q in it", b.String(), w)
			}
		}
	}
}

// The verdicts of the steps judged by their proxies' figures are printed
// when the recorded rollout is the one the EnvoyConfigs report; when the
// history cannot be read, the status says why they are not.
func TestPrintVerdicts(t *testing.T) {
	r := &examplev1.ConfigRolloutStatus{Version: "v2", PreviousVersion: "v1", Phase: "Aborted", Step: 2}
	recorded := &publish.Rollout{Revision: "v2", Previous: "v1", Phase: publish.RolloutAborted, Step: 1, Verdicts: []publish.StepVerdict{
		{Step: 0, Outcome: analysis.Pass, Proxies: publish.StepFigures{Proxies: 1, Requests: 300, ErrorRatio: 0.0033, P99: 4.96},
			Baseline: publish.StepFigures{Proxies: 3, Requests: 3000, P99: 4.96}},
		{Step: 1, Outcome: analysis.Abort, Proxies: publish.StepFigures{Proxies: 2, Requests: 400, ErrorRatio: 0.62, P99: 4.96},
			Baseline: publish.StepFigures{Proxies: 2, Requests: 2000, P99: 4.96},
			Finding:  "proxy edge-1 http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00%"},
	}}
	for _, tc := range []struct {
		name     string
		r        *examplev1.ConfigRolloutStatus
		recorded *publish.Rollout
		why      string
		want     []string
	}{
		{"both verdicts", r, recorded, "", []string{
			"STEP  VERDICT  STEP PROXIES",
			"1     Pass     300 requests of 1 proxy, 0.33% 5xx, p99 5.0ms     3000 requests of 3 proxies, 0.00% 5xx, p99 5.0ms  -",
			"2     Abort    400 requests of 2 proxies, 62.00% 5xx, p99 5.0ms  2000 requests of 2 proxies, 0.00% 5xx, p99 5.0ms  proxy edge-1 http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00%"}},
		{"another rollout recorded", &examplev1.ConfigRolloutStatus{Version: "v3"}, recorded, "", nil},
		{"no rollout under way, the last one aborted: its verdicts", nil, recorded, "", []string{
			"the last rollout, of version v2, was aborted at step 2",
			"2     Abort    400 requests of 2 proxies, 62.00% 5xx, p99 5.0ms  2000 requests of 2 proxies, 0.00% 5xx, p99 5.0ms  proxy edge-1 http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00%"}},
		{"no rollout under way, the last one complete", nil, func() *publish.Rollout { c := *recorded; c.Phase = publish.RolloutComplete; return &c }(), "", nil},
		{"no rollout, none recorded", nil, nil, "", nil},
		{"the history unreadable", r, nil, "forbidden", []string{"step verdicts not shown: forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printVerdicts(&b, tc.r, tc.recorded, tc.why); err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && b.Len() > 0 {
				t.Errorf("printed %q, want nothing", b.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("printed\n%s\nwant %q in it", b.String(), w)
				}
			}
		})
	}
}
