package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

const managerFile = "../../config/manager/manager.yaml"

// The in-cluster Deployment's GOMEMLIMIT stays between 80% and 95% of its
// memory limit: close enough that the runtime returns memory before the
// container is killed, far enough that memory outside the Go heap fits.
func TestMemoryLimitLeavesRoom(t *testing.T) {
	b, err := os.ReadFile(managerFile)
	if err != nil {
		t.Fatal(err)
	}
	var d *appsv1.Deployment
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &obj); err == nil && obj.Kind == "Deployment" {
			d = &obj
		}
	}
	if d == nil {
		t.Fatalf("no Deployment in %s", managerFile)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		limit, ok := c.Resources.Limits.Memory().AsInt64()
		if !ok || limit <= 0 {
			t.Fatalf("the manager container has no memory limit")
		}
		for _, e := range c.Env {
			if e.Name != "GOMEMLIMIT" {
				continue
			}
			soft, err := goMemLimit(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			if ratio := float64(soft) / float64(limit); ratio < 0.8 || ratio > 0.95 {
				t.Errorf("GOMEMLIMIT %s is %.0f%% of the memory limit %s, want 80–95%%", e.Value, 100*ratio, c.Resources.Limits.Memory())
			}
			return
		}
		t.Fatal("the manager container sets no GOMEMLIMIT")
	}
	t.Fatal("no container named manager")
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does: a number of bytes
// with an optional unit, B, KiB, MiB, GiB or TiB.
func goMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("GOMEMLIMIT %q: not a size", s)
			}
			return v << u.shift, nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("GOMEMLIMIT %q: not a size", s)
	}
	return v, nil
}
