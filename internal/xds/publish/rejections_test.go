package publish

import (
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// statusOf returns an EnvoyConfig of generation 2 whose status was written
// for its content as it is (unchanged) or before a change, with rejected
// versions and the Published condition's reason.
func statusOf(unchanged bool, published string, rejected []string, reason string) *examplev1.EnvoyConfig {
	c := &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{
			Clusters: []runtime.RawExtension{{Raw: []byte(`{"name":"a","connect_timeout":"1s"}`)}},
		}},
	}
	c.Status.ContentHash = ContentHash(c)
	if !unchanged {
		c.Status.ContentHash = "before"
	}
	c.Status.PublishedVersion, c.Status.RejectedVersions = published, rejected
	if reason != "" {
		c.Status.Conditions = []metav1.Condition{{Type: examplev1.EnvoyConfigConditionPublished, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: 2}}
	}
	return c
}

func TestRejectionsOf(t *testing.T) {
	tests := []struct {
		name    string
		configs []*examplev1.EnvoyConfig
		want    []string
	}{
		{"none", []*examplev1.EnvoyConfig{statusOf(true, "v1", nil, "")}, nil},
		{"recorded, content unchanged", []*examplev1.EnvoyConfig{statusOf(true, "v1", []string{"v2", "v0"}, examplev1.EnvoyConfigReasonRolledBack), statusOf(true, "v1", nil, "")}, []string{"v0", "v2"}},
		{"recorded before a change", []*examplev1.EnvoyConfig{statusOf(false, "v1", []string{"v2"}, examplev1.EnvoyConfigReasonRolledBack)}, nil},
		{"the previous release's rollback: the offered version", []*examplev1.EnvoyConfig{statusOf(true, "v1", nil, examplev1.EnvoyConfigReasonRolledBack), statusOf(true, "v1", nil, examplev1.EnvoyConfigReasonRejected)}, []string{"offered"}},
		{"the previous release's rollback, one EnvoyConfig changed since", []*examplev1.EnvoyConfig{statusOf(true, "v1", nil, examplev1.EnvoyConfigReasonRolledBack), statusOf(false, "v1", nil, examplev1.EnvoyConfigReasonRolledBack)}, nil},
		{"the previous release's rollback, one EnvoyConfig new", []*examplev1.EnvoyConfig{statusOf(true, "v1", nil, examplev1.EnvoyConfigReasonRolledBack), statusOf(true, "", nil, "")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(RejectionsOf(tt.configs, "offered")))
			if !slices.Equal(got, tt.want) {
				t.Errorf("RejectionsOf = %v, want %v", got, tt.want)
			}
		})
	}
}
