//go:build install

package install

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/manifests"
)

// TestChartRendersInstaller: the Helm chart make chart packaged, rendered
// with its default values (CRDs included), holds the objects of
// dist/install.yaml, image included, compared as objects, not as text.
// hack/install-e2e.sh installed that chart with helm install before it
// applied dist/install.yaml over it.
func TestChartRendersInstaller(t *testing.T) {
	installer, err := os.ReadFile(filepath.Join(root, "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := manifests.Parse(installer)
	if err != nil {
		t.Fatalf("dist/install.yaml: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "bin", "helm"), "template", "kube-envoy-controller", os.Getenv("INSTALL_CHART"), "--include-crds")
	cmd.Stderr = &stderr
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", os.Getenv("INSTALL_CHART"), err, stderr.String())
	}
	got, err := manifests.Parse(rendered)
	if err != nil {
		t.Fatalf("the chart's objects: %v", err)
	}
	if d := manifests.Diff(want, got); len(d) > 0 {
		t.Errorf("the chart %s renders other objects than dist/install.yaml (make generate, then make chart and make installer):\n%s",
			filepath.Base(os.Getenv("INSTALL_CHART")), strings.Join(d, "\n"))
	}
	if len(want) == 0 {
		t.Error("dist/install.yaml holds no object")
	}
}
