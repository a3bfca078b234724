package envoyconfig

import (
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Events of different revisions, or of different steps of one rollout,
// have different actions, so that the recorder never folds one into
// another's series and drops its message.
func TestEventAction(t *testing.T) {
	rolling := func(step int) publish.History {
		return publish.History{Current: "v2", Rollout: &publish.Rollout{Revision: "v2", Previous: "v1", Phase: publish.RolloutProgressing, Step: step}}
	}
	for _, tc := range []struct {
		name string
		h    publish.History
		want string
	}{
		{"nothing recorded", publish.History{}, "Publish"},
		{"a revision served to every proxy", publish.History{Current: "v1"}, "Publish v1"},
		{"its rollout's first step", rolling(0), "Publish v2/step-1"},
		{"its rollout's second step", rolling(1), "Publish v2/step-2"},
		{"a rollout done", publish.History{Current: "v2", Rollout: &publish.Rollout{Revision: "v2", Phase: publish.RolloutComplete}}, "Publish v2"},
		{"an aborted rollout's revision no longer served", publish.History{Current: "v1", Rollout: &publish.Rollout{Revision: "v2", Phase: publish.RolloutAborted}}, "Publish v1"},
	} {
		if got := eventAction(tc.h); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
