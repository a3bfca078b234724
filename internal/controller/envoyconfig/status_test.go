package envoyconfig

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// statusOf returns an EnvoyConfig of generation 2 whose status was written
// for its content as it is (unchanged) or before a change, with rejected
// versions and the Published condition's reason.
func statusOf(unchanged bool, published string, rejected []string, reason string) *examplev1.EnvoyConfig {
	c := newConfig("ns", "c", cluster("a", "1s"))
	c.Generation = 2
	c.Status.ContentHash = publish.ContentHash(c)
	if !unchanged {
		c.Status.ContentHash = "before"
	}
	c.Status.PublishedVersion, c.Status.RejectedVersions = published, rejected
	if reason != "" {
		c.Status.Conditions = []metav1.Condition{{Type: ConditionPublished, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: 2}}
	}
	return c
}

func TestVouched(t *testing.T) {
	for want, configs := range map[string][]*examplev1.EnvoyConfig{
		"v1": {statusOf(true, "v1", nil, ""), statusOf(true, "", nil, ""), statusOf(false, "v1", nil, "")},
		"":   {statusOf(true, "v1", nil, ""), statusOf(true, "v2", nil, "")},
	} {
		if got := Vouched(configs); got != want {
			t.Errorf("Vouched = %q, want %q", got, want)
		}
	}
	if got := Vouched(nil); got != "" {
		t.Errorf("Vouched of no EnvoyConfig = %q", got)
	}
}

// Status records the fleet's rejected newest version first, keeps those
// recorded while the content is unchanged, and at most publish.MaxRevisions.
func TestStatusRecordsRejectedVersions(t *testing.T) {
	many := []string{"v1", "v2", "v3", "v4", "v5"}
	tests := []struct {
		name     string
		config   *examplev1.EnvoyConfig
		rejected string
		want     []string
	}{
		{"a rejection", statusOf(true, "v0", nil, ""), "v9", []string{"v9"}},
		{"kept", statusOf(true, "v0", []string{"v8"}, ReasonRolledBack), "", []string{"v8"}},
		{"added, newest first", statusOf(true, "v0", []string{"v8"}, ReasonRolledBack), "v9", []string{"v9", "v8"}},
		{"once", statusOf(true, "v0", []string{"v9"}, ReasonRolledBack), "v9", []string{"v9"}},
		{"forgotten when the content changes", statusOf(false, "v0", []string{"v8"}, ReasonRolledBack), "", nil},
		{"bounded", statusOf(true, "v0", many, ReasonRolledBack), "v9", append([]string{"v9"}, many[:publish.MaxRevisions-1]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Status(tt.config, State{PublishedVersion: "v0", Rejected: "bad", RejectedVersion: tt.rejected}).RejectedVersions
			if !slices.Equal(got, tt.want) {
				t.Errorf("rejectedVersions = %v, want %v", got, tt.want)
			}
		})
	}
}
