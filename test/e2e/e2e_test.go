//go:build e2e

// Package e2e tests the operator as a user meets it: the binary running
// against a local cluster whose Deployment controller, scheduler, garbage
// collector and KWOK nodes are real. hack/e2e.sh starts all of it; the tests
// use kubectl for what a user would type.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	if os.Getenv("KUBECONFIG") == "" || os.Getenv("E2E_ROOT") == "" {
		fmt.Fprintln(os.Stderr, "the e2e tests run through hack/e2e.sh (make e2e), which sets KUBECONFIG and E2E_ROOT")
		os.Exit(1)
	}
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: manager.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// kubectl runs bin/kubectl with args and returns its output; it fails t if
// kubectl fails. Inside a wait, use kubectlOut, so that a transient error is
// retried until the wait's deadline.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlOut(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectlOut runs bin/kubectl with args and returns its trimmed output, or
// an error that holds the command and its output.
func kubectlOut(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(os.Getenv("E2E_ROOT"), "bin", "kubectl"), args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// applyYAML applies manifest in ns with kubectl apply -f, from a file, as a
// user would.
func applyYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "-n", ns, "apply", "-f", f)
}

// sample returns the path of a file in config/samples.
func sample(name string) string {
	return filepath.Join(os.Getenv("E2E_ROOT"), "config", "samples", name)
}

// eventually polls cond until it holds or timeout passes (testenv.Poll).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.Poll(t, 500*time.Millisecond, timeout, what, cond)
}

// waitJSONPath waits until `kubectl -n ns get <resource...> -o jsonpath=<path>`
// prints want. resource may carry flags, as in "pods -l app=x".
func waitJSONPath(t *testing.T, timeout time.Duration, ns, resource, path, want string) {
	t.Helper()
	args := append([]string{"-n", ns, "get"}, strings.Fields(resource)...)
	args = append(args, "-o", "jsonpath="+path)
	eventually(t, timeout, fmt.Sprintf("%s %s = %q", resource, path, want), func() (bool, error) {
		got, err := kubectlOut(args...)
		if err != nil {
			return false, err
		}
		return got == want, fmt.Errorf("got %q", got)
	})
}

// waitGone waits until `kubectl get <what...>` finds nothing.
func waitGone(t *testing.T, timeout time.Duration, ns string, what ...string) {
	t.Helper()
	args := append([]string{"-n", ns, "get"}, what...)
	args = append(args, "--ignore-not-found", "-o", "name")
	eventually(t, timeout, strings.Join(what, " ")+" to be deleted", func() (bool, error) {
		out, err := kubectlOut(args...)
		if err != nil {
			return false, err
		}
		return out == "", fmt.Errorf("still there: %s", strings.Join(strings.Fields(out), " "))
	})
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, name string) string {
	t.Helper()
	kubectl(t, "create", "namespace", name)
	t.Cleanup(func() {
		_ = exec.Command(filepath.Join(os.Getenv("E2E_ROOT"), "bin", "kubectl"),
			"delete", "namespace", name, "--wait=false").Run()
	})
	return name
}
