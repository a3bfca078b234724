package main

import (
	"bytes"
	"strings"
	"testing"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
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
