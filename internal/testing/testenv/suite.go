package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
)

// Suite is one test package's integration environment: a real API server,
// and the operator's manager running the controllers under test.
type Suite struct {
	// Client is the tests' own client. Its writes are not counted.
	Client client.Client
	// Counter counts the manager's write requests, events included.
	Counter RequestCounter
	// Manager runs the controllers under test, with the production manager
	// configuration (internal/manager).
	Manager ctrl.Manager
	// Webhooks, set before Main, are installed in the API server, pointing
	// at the manager's webhook server, which serves with envtest's certificate.
	Webhooks []*admissionv1.MutatingWebhookConfiguration
	// ValidatingWebhooks likewise.
	ValidatingWebhooks []*admissionv1.ValidatingWebhookConfiguration
	// GatewayAPI, set before Main, installs the Gateway API's CRDs too.
	GatewayAPI bool
	// Reconciler is the controller under test, as it runs in the manager:
	// calling it directly uses the manager's counted client.
	Reconciler reconcile.Reconciler
}

// Main starts envtest and a manager, lets setup register controllers on it,
// runs the package's tests, stops everything and exits. Call it from TestMain.
func (s *Suite) Main(m *testing.M, setup func(ctrl.Manager) error) {
	level := zapcore.ErrorLevel
	if os.Getenv("TEST_VERBOSE") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	var opts []Option
	if s.GatewayAPI {
		opts = append(opts, WithGatewayAPI())
	}
	env, err := New(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env.WebhookInstallOptions.MutatingWebhooks = s.Webhooks
	env.WebhookInstallOptions.ValidatingWebhooks = s.ValidatingWebhooks
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		// Start fails after it started etcd and kube-apiserver when a CRD
		// is refused; they must not outlive the test.
		_ = env.Stop()
		os.Exit(1)
	}
	code := s.run(m, cfg, &env.WebhookInstallOptions, setup)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

func (s *Suite) run(m *testing.M, cfg *rest.Config, hooks *envtest.WebhookInstallOptions, setup func(ctrl.Manager) error) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if s.Client, err = client.New(cfg, client.Options{Scheme: manager.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A panic in a reconcile fails the test run instead of being logged.
	opts := manager.Options{MetricsAddr: "0", PanicOnReconcilePanic: true}
	if len(s.Webhooks)+len(s.ValidatingWebhooks) > 0 {
		opts.WebhookHost, opts.WebhookPort, opts.WebhookCertDir = hooks.LocalServingHost, hooks.LocalServingPort, hooks.LocalServingCertDir
	}
	if s.Manager, err = manager.New(s.Counter.Wrap(cfg), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := setup(s.Manager); err != nil {
		fmt.Fprintln(os.Stderr, "setting up controllers:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- s.Manager.Start(ctx) }()
	code := m.Run()
	if code == 0 {
		// Every condition and event reason the controllers set in these
		// tests is one that the API packages export for clients.
		wrong, err := s.Unexported(ctx)
		for _, w := range wrong {
			fmt.Fprintln(os.Stderr, "not exported by the API package:", w)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "reading what the controllers set:", err)
		}
		if err != nil || len(wrong) > 0 {
			code = 1
		}
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// Timeout bounds every wait of the integration tests. It is no speed goal:
// every wait polls a condition and returns as soon as it holds, and the
// bound only ends a test that will not pass, on a machine where two API
// servers may share two cores.
const Timeout = 2 * time.Minute

// Eventually polls cond until it holds, failing the test after Timeout.
func Eventually(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	Poll(t, 50*time.Millisecond, Timeout, what, cond)
}

// Poll calls cond every interval until it holds, failing the test after
// timeout. An error from cond does not end the wait: it is what the failure
// reports if cond never holds (a call that failed once must not fail a test
// that would have passed a moment later). An error made with Unexpected does:
// the test fails at once.
func Poll(t testing.TB, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true,
		func(context.Context) (bool, error) {
			ok, err := cond()
			last = err
			var u *unexpected
			if errors.As(err, &u) {
				return false, err
			}
			return ok, nil
		})
	var u *unexpected
	switch {
	case errors.As(err, &u):
		t.Fatalf("waiting for %s: %v", what, u.err)
	case err != nil:
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

// Consistently checks, every CheckInterval for window (once more as it
// ends), that nothing has happened that must not: check returns what did,
// and the test fails at once with it. It is the one way to prove that
// something does not happen over a window, where Poll waits for what does.
func Consistently(t testing.TB, window time.Duration, check func() error) {
	t.Helper()
	for deadline := time.Now().Add(window); ; time.Sleep(CheckInterval) {
		done := !time.Now().Before(deadline)
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
	}
}

// CheckInterval is how often Consistently checks.
const CheckInterval = 100 * time.Millisecond

// Steady waits until value reads the same twice, interval apart, and returns
// it: a count that has stopped growing, as the writes of a workload with
// nothing left to do. It fails the test after timeout. An error from value
// goes on waiting, as Poll's do.
func Steady[V comparable](t testing.TB, interval, timeout time.Duration, what string, value func() (V, error)) V {
	t.Helper()
	var last, v V
	read := false
	Poll(t, interval, timeout, what, func() (bool, error) {
		var err error
		if v, err = value(); err != nil {
			read = false
			return false, err
		}
		moved := fmt.Errorf("read %v once", v)
		if read {
			moved = fmt.Errorf("read %v, then %v", last, v)
		}
		steady := read && v == last
		last, read = v, true
		return steady, moved
	})
	return v
}

// Unexpected returns an error that ends a wait (Poll, Eventually) at once,
// failing the test: a condition returns it for an outcome that rules out the
// one it waits for, so that the test says what went wrong as soon as it
// happens instead of waiting out its timeout.
func Unexpected(format string, args ...any) error {
	return &unexpected{err: fmt.Errorf(format, args...)}
}

type unexpected struct{ err error }

func (u *unexpected) Error() string { return u.err.Error() }
func (u *unexpected) Unwrap() error { return u.err }

// Namespace creates a namespace for one test.
func (s *Suite) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := s.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Events returns the events about the named object in ns, as "Type Reason Note".
func (s *Suite) Events(ns, name string) ([]string, error) {
	evs, err := s.events(ns, name)
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason+" "+e.Note)
	}
	return out, err
}

// events returns the events about the named object in ns.
func (s *Suite) events(ns, name string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := s.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out, nil
}

// WaitEvent waits for an event about the named object that starts with want.
func (s *Suite) WaitEvent(t testing.TB, ns, name, want string) {
	t.Helper()
	Eventually(t, "event "+want, func() (bool, error) {
		evs, err := s.Events(ns, name)
		for _, e := range evs {
			if strings.HasPrefix(e, want) {
				return true, nil
			}
		}
		return false, err
	})
}

// CreatedAgain deletes child, an owner's child the operator made, waits for
// the event that tells of it being made again (one that starts with want,
// "Normal Created Created …", recorded after the deletion), and fails unless
// it is the owner's only Created event, recorded once: an owner's first
// children are told of by its status, not by an event
// (objects.Children.Report). Had the first creation been recorded, it would
// be a second Created event, or this one's first occurrence (a series).
func (s *Suite) CreatedAgain(t testing.TB, owner, child client.Object, want string) {
	t.Helper()
	deleted := time.Now().Truncate(time.Microsecond) // events keep microseconds
	if err := s.Client.Delete(context.Background(), child); err != nil {
		t.Fatal(err)
	}
	var (
		created     []string
		occurrences int32
	)
	Eventually(t, "event "+want+" after the deletion", func() (bool, error) {
		evs, err := s.events(owner.GetNamespace(), owner.GetName())
		seen := false
		created, occurrences = nil, 0
		for _, e := range evs {
			if e.Type != corev1.EventTypeNormal || e.Reason != conditions.EventCreated {
				continue
			}
			n, last := int32(1), e.EventTime.Time
			if e.Series != nil {
				n, last = e.Series.Count, e.Series.LastObservedTime.Time
			}
			created = append(created, fmt.Sprintf("%s (%d×)", e.Note, n))
			occurrences += n
			seen = seen || strings.HasPrefix(e.Type+" "+e.Reason+" "+e.Note, want) && !last.Before(deleted)
		}
		return seen, err
	})
	if occurrences != 1 {
		t.Errorf("Created events %q, want only the one of the child made again, once", created)
	}
}

// Quiet waits until the manager has sent no write request for a second.
func (s *Suite) Quiet(t testing.TB) {
	t.Helper()
	Steady(t, time.Second, Timeout, "the manager to go quiet", func() (int, error) {
		return len(s.Counter.Writes()), nil
	})
}

// WaitFor waits until the object ns/name can be read into obj and cond holds
// for it (nil: it exists), and returns obj.
func WaitFor[T client.Object](t testing.TB, c client.Reader, ns, name string, obj T, cond func(T) bool) T {
	t.Helper()
	Eventually(t, fmt.Sprintf("%T %s/%s", obj, ns, name), func() (bool, error) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
		return err == nil && (cond == nil || cond(obj)), client.IgnoreNotFound(err)
	})
	return obj
}

// WaitGone waits until the object ns/name is deleted. Envtest runs no garbage
// collector to finish a background deletion, so a deletionTimestamp, the API
// server's record of the delete, counts as deleted.
func WaitGone(t testing.TB, c client.Reader, ns, name string, obj client.Object) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%T %s/%s to be deleted", obj, ns, name), func() (bool, error) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
		return apierrors.IsNotFound(err) || (err == nil && obj.GetDeletionTimestamp() != nil), client.IgnoreNotFound(err)
	})
}

// Conditioned is an object with status conditions: every kind of the operator.
type Conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
}

// WaitSettled waits until obj's status describes its current generation:
// it has conditions, all observed at the object's generation, and cond holds
// (nil: nothing more). It returns obj as last read.
func WaitSettled[T Conditioned](t testing.TB, c client.Reader, obj T, cond func(T) bool) T {
	t.Helper()
	return WaitFor(t, c, obj.GetNamespace(), obj.GetName(), obj, func(o T) bool {
		return Observed(o) && (cond == nil || cond(o))
	})
}

// Observed reports whether o's conditions all describe its current generation.
func Observed(o Conditioned) bool {
	conds := o.GetConditions()
	for _, c := range conds {
		if c.ObservedGeneration != o.GetGeneration() {
			return false
		}
	}
	return len(conds) > 0
}

// Condition returns o's condition typ, or a zero condition of that type.
func Condition(o Conditioned, typ string) metav1.Condition {
	for _, c := range o.GetConditions() {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{Type: typ}
}

// Controller is what a controller package's tests need of its reconciler.
type Controller interface {
	reconcile.Reconciler
	SetupWithManager(ctrl.Manager) error
}

// MainWith is Main for a package that tests one controller: build makes it
// on the manager, and Reconciler holds it for the tests.
func (s *Suite) MainWith(m *testing.M, build func(ctrl.Manager) Controller) {
	s.Main(m, func(mgr ctrl.Manager) error {
		c := build(mgr)
		s.Reconciler = c
		return c.SetupWithManager(mgr)
	})
}

// PlayDeploymentController writes the status the Deployment controller
// would for d, fully rolled out: envtest runs no Deployment controller.
func (s *Suite) PlayDeploymentController(t testing.TB, d *appsv1.Deployment) {
	t.Helper()
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	if err := s.Client.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}
