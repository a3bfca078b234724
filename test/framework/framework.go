// Package framework is what the suites under test/ share: kubectl run as a
// user types it, and waits that poll for what a test asserts. A test waits
// for the state it is about to check, never for something else and then
// reads once: what the operator writes (events, status, children) arrives
// asynchronously, in its own time.
//
// The waits are testenv.Poll underneath, the one polling loop of every test
// of the project: a condition that returns an error made with Unexpected
// ends the wait at once, so that a test fails on an outcome that rules out
// the one it waits for instead of waiting out its timeout.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// Interval is how often the waits ask again. Each ask of a kubectl wait
// starts a kubectl process: a test that polls faster only loads the machine
// it waits on.
const Interval = 250 * time.Millisecond

// Eventually polls cond every Interval until it holds, failing t after
// timeout, or at once when cond returns an error made with Unexpected. Another error does not end the wait: it is what the
// failure reports if cond never holds.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testenv.Poll(t, Interval, timeout, what, cond)
}

// Unexpected returns an error that ends a wait at once, failing the test
// (testenv.Unexpected): a condition returns it for an outcome that rules out
// the one it waits for.
func Unexpected(format string, args ...any) error { return testenv.Unexpected(format, args...) }

// Kubectl runs the repository's bin/kubectl against one cluster.
type Kubectl struct {
	// Path is the kubectl binary.
	Path string
	// Kubeconfig is passed with --kubeconfig; empty, kubectl reads the
	// environment's KUBECONFIG.
	Kubeconfig string
}

// NewKubectl is root/bin/kubectl with kubeconfig (empty: $KUBECONFIG).
func NewKubectl(root, kubeconfig string) Kubectl {
	return Kubectl{Path: filepath.Join(root, "bin", "kubectl"), Kubeconfig: kubeconfig}
}

// As is the same kubectl with another kubeconfig: another user.
func (k Kubectl) As(kubeconfig string) Kubectl {
	k.Kubeconfig = kubeconfig
	return k
}

// Out runs kubectl with args and returns its trimmed output (stdout and
// stderr), or an error that holds the command and its output.
func (k Kubectl) Out(args ...string) (string, error) {
	return k.Input("", args...)
}

// Input is Out with stdin as kubectl's input (-f -).
//
// A request that the API server refused because an admission webhook did
// not answer in time (WebhookTimedOut) is sent again, up to WebhookTries
// times in all, as a user would type it again: on a busy machine the
// operator can miss the webhook's deadline (timeoutSeconds: 5), and a test
// asserts what the operator decides, not how fast. Nothing was written: a
// webhook's failurePolicy is Fail. Any other outcome is returned at once.
func (k Kubectl) Input(stdin string, args ...string) (string, error) {
	if k.Kubeconfig != "" {
		args = append([]string{"--kubeconfig", k.Kubeconfig}, args...)
	}
	var out []byte
	err := sendAgainOnWebhookTimeout(func() error {
		cmd := exec.Command(k.Path, args...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	})
	return strings.TrimSpace(string(out)), err
}

// sendAgainOnWebhookTimeout runs send, and again while its error says that
// a webhook had no time to answer (WebhookTimedOut), WebhookTries times at
// most in all; it returns the last error.
func sendAgainOnWebhookTimeout(send func() error) error {
	for try := 1; ; try++ {
		err := send()
		if err == nil || try >= WebhookTries || !WebhookTimedOut(err.Error()) {
			return err
		}
	}
}

// WebhookTries is how many times Kubectl, and a client made WebhookPatient,
// send a request whose admission webhook did not answer in time.
const WebhookTries = 3

// WebhookPatient is c, but a write (create, update, patch, delete) that the
// API server refused because an admission webhook had no time to answer
// (WebhookTimedOut) is sent again, up to WebhookTries times in all, as
// Kubectl does. Any other outcome is returned at once.
func WebhookPatient(c client.WithWatch) client.WithWatch {
	again := sendAgainOnWebhookTimeout
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return again(func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return again(func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return again(func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return again(func() error { return c.Delete(ctx, obj, opts...) })
		},
	})
}

// WebhookTimedOut reports whether msg, an error of the API server, says
// that an admission webhook did not answer within its timeoutSeconds, or
// that the operator's Envoy did not load an EnvoyConfig within
// --envoy-validation-timeout (envoyjudge.TimedOut): the request was refused
// for lack of time, not for what it holds.
func WebhookTimedOut(msg string) bool {
	return strings.Contains(msg, "failed calling webhook") && strings.Contains(msg, "context deadline exceeded") ||
		strings.Contains(msg, "(--envoy-validation-timeout;")
}

// Run runs kubectl with args and returns its trimmed output; it fails t if
// kubectl fails. Inside a wait, use Out, so that a transient error is asked
// again until the wait's deadline.
func (k Kubectl) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := k.Out(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Apply applies manifest in ns with kubectl apply -f, from a file, as a
// user would.
func (k Kubectl) Apply(t testing.TB, ns, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	k.Run(t, "-n", ns, "apply", "-f", f)
}

// JSONPath returns `kubectl -n ns get <resource...> -o jsonpath=<path>`.
// resource may carry flags, as in "pods -l app=x".
func (k Kubectl) JSONPath(ns, resource, path string) (string, error) {
	args := append([]string{"-n", ns, "get"}, strings.Fields(resource)...)
	return k.Out(append(args, "-o", "jsonpath="+path)...)
}

// WaitJSONPath waits until JSONPath(ns, resource, path) prints want.
func (k Kubectl) WaitJSONPath(t testing.TB, timeout time.Duration, ns, resource, path, want string) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%s %s = %q", resource, path, want), func() (bool, error) {
		got, err := k.JSONPath(ns, resource, path)
		if err != nil {
			return false, err
		}
		return got == want, fmt.Errorf("got %q", got)
	})
}

// WaitGone waits until `kubectl -n ns get <what...>` finds nothing.
func (k Kubectl) WaitGone(t testing.TB, timeout time.Duration, ns string, what ...string) {
	t.Helper()
	args := append([]string{"-n", ns, "get"}, what...)
	args = append(args, "--ignore-not-found", "-o", "name")
	Eventually(t, timeout, strings.Join(what, " ")+" to be deleted", func() (bool, error) {
		out, err := k.Out(args...)
		if err != nil {
			return false, err
		}
		return out == "", fmt.Errorf("still there: %s", strings.Join(strings.Fields(out), " "))
	})
}

// EventReasons returns the reasons of the events about the object named
// name in ns, one a line, oldest first.
func (k Kubectl) EventReasons(ns, name string) (string, error) {
	return k.Out("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name,
		"--sort-by", ".metadata.creationTimestamp", "-o", `jsonpath={range .items[*]}{.reason}{"\n"}{end}`)
}

// WaitEvents waits until there are events about the object named name in
// ns with each of reasons.
func (k Kubectl) WaitEvents(t testing.TB, timeout time.Duration, ns, name string, reasons ...string) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("events %v about %s", reasons, name), func() (bool, error) {
		out, err := k.EventReasons(ns, name)
		if err != nil {
			return false, err
		}
		have := strings.Fields(out)
		for _, r := range reasons {
			if !slices.Contains(have, r) {
				return false, fmt.Errorf("events %v", have)
			}
		}
		return true, nil
	})
}
