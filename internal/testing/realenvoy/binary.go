// Package realenvoy runs Envoy's official binary for the tests and the
// playground: where to find it (Binary), a bootstrap checked by
// `envoy --mode validate` (Validate), a proxy of a fleet run as a process on
// this host in place of its pod (Adapt, Start).
//
// KWOK's pods run no containers, so a fleet's proxies run here as processes:
// each is named as its pod, presents the fleet's client certificate and
// starts from the bootstrap the operator rendered into the fleet's
// ConfigMap, adapted to the host by Adapt and by nothing else. In the
// host's network (Run), each takes free admin and ready ports of its own;
// in its pod's own network namespace (RunPod, Kubelet.PodNetwork), it keeps
// its pod's ports, binds its listeners as in its pod, and its admin
// interface answers at the pod's address.
//
// Envoy is bin/envoy (make envoy), or the build the ENVOY environment
// variable names. A test that needs it calls Require: where Envoy is
// missing, the test fails under CI and is skipped elsewhere, saying so.
package realenvoy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// JudgeTimeout is the timeout of a judge (envoyjudge.Options.Timeout) in a
// test of what Envoy decides. On a busy machine a load that takes Envoy tens
// of milliseconds took more than the operator's default of 3s
// (envoyjudge.DefaultTimeout), and the test saw the judge's refusal for lack
// of time instead of Envoy's verdict. A test asserts the verdict, not how
// fast: the benchmarks time the judge, and the tests of the timeout use an
// Envoy that never answers (Stalling).
const JudgeTimeout = time.Minute

// Binary returns the path of Envoy: $ENVOY, else bin/envoy of the repository.
func Binary() (string, error) {
	path := os.Getenv("ENVOY")
	if path == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, "bin", "envoy")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no Envoy at %s (make envoy puts it in bin/envoy; ENVOY=/path/to/envoy uses another build): %w", path, err)
	}
	return path, nil
}

// Require returns Binary's path for a test that needs a real Envoy. Without
// one the test fails when it runs under CI (CI=true), and is skipped,
// saying why, elsewhere.
func Require(t testing.TB) string {
	t.Helper()
	path, err := Binary()
	if err != nil {
		testenv.Require(t, fmt.Errorf("this test needs a real Envoy: %w", err))
	}
	return path
}

var versionRE = regexp.MustCompile(`version: [0-9a-f]+/(\d+\.\d+\.\d+)/`)

// Version returns the release of the Envoy at path (1.40.0), from its
// --version.
func Version(path string) (string, error) {
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", path, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version: no version in %q", path, strings.TrimSpace(string(out)))
	}
	return string(m[1]), nil
}

// ErrRefused is what Validate and Load return, wrapped with Envoy's message,
// when Envoy refuses a bootstrap: envoyload's.
var ErrRefused = envoyload.ErrRefused

// Validate loads the bootstrap in dir/name with `envoy --mode validate`,
// which builds every static resource and checks the rest without opening a
// port or a connection. It returns nil when Envoy accepts it, ErrRefused
// with Envoy's message when it refuses it, and another error when Envoy
// could not run. args are added to Envoy's command line.
func Validate(envoy, dir, name string, args ...string) error {
	return ValidateArgs(envoy, dir, append([]string{"-c", filepath.Join(dir, name),
		"--service-node", "validate", "--service-cluster", "validate", "--log-level", "critical",
		"--disable-hot-restart"}, args...)...)
}

// ValidateArgs runs Envoy with args in `--mode validate`, in dir, and
// answers as Validate does (envoyload.ValidateArgs).
func ValidateArgs(envoy, dir string, args ...string) error {
	return envoyload.ValidateArgs(context.Background(), envoy, dir, args...)
}
