package manager

import (
	"runtime"
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
)

func TestBuildInfoMetric(t *testing.T) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": version.Version(), "revision": version.Revision(), "go_version": runtime.Version()}
	for _, f := range families {
		if f.GetName() != "kube_envoy_controller_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("want one series, got %d", len(f.GetMetric()))
		}
		m := f.GetMetric()[0]
		if v := m.GetGauge().GetValue(); v != 1 {
			t.Errorf("value %v, want 1", v)
		}
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("label %s=%q, want %q", k, got[k], v)
			}
		}
		return
	}
	t.Fatal("kube_envoy_controller_build_info is not registered")
}
