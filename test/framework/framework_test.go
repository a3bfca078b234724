package framework

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
)

// The judge's own refusal for lack of time, from a judge whose Envoy never
// answers: WebhookTimedOut knows it by its words.
func TestWebhookTimedOutKnowsTheJudgesTimeout(t *testing.T) {
	j := envoyjudge.New(context.Background(), envoyjudge.Options{Envoy: realenvoy.Stalling(t), Concurrency: 1, Timeout: 50 * time.Millisecond})
	v := j.Judge(context.Background(), envoyload.Resources{})
	if v.Outcome != envoyjudge.TimedOut {
		t.Fatalf("a stalling Envoy: %+v, want %s", v, envoyjudge.TimedOut)
	}
	// As kubectl prints the webhook's refusal.
	msg := `Error from server (Forbidden): error when creating "STDIN": admission webhook "validate.envoyconfig.example.com" denied the request: EnvoyConfig app is invalid: ` + v.Message
	if !WebhookTimedOut(msg) {
		t.Errorf("WebhookTimedOut(%q) = false, want true", msg)
	}
}

func TestWebhookTimedOut(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{`Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling webhook "validate.envoyconfig.example.com": failed to call webhook: Post "https://localhost:9443/validate-example-com-v1-envoyconfig?timeout=5s": context deadline exceeded`, true},
		{`Error from server (InternalError): Internal error occurred: failed calling webhook "inject.watch.my.domain": failed to call webhook: Post "https://localhost:9443/mutate-v1-pod?timeout=5s": dial tcp 127.0.0.1:9443: connect: connection refused`, false},
		{`Error from server (Forbidden): admission webhook "validate.envoyconfig.example.com" denied the request: EnvoyConfig app is invalid: Envoy refused it: Proto constraint validation failed`, false},
		{`error: context deadline exceeded`, false},
		{``, false},
	} {
		if got := WebhookTimedOut(tc.msg); got != tc.want {
			t.Errorf("WebhookTimedOut(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// fakeKubectl is a kubectl that prints each of outputs in turn, one per run,
// failing but for the last, and counts its runs in a file.
func fakeKubectl(t *testing.T, outputs ...string) (Kubectl, func() int) {
	t.Helper()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho x >>" + runs + "\nn=$(($(wc -l <" + runs + ")))\ncase $n in\n"
	for i, out := range outputs {
		status := 1
		if i == len(outputs)-1 {
			status = 0
		}
		script += strconv.Itoa(i+1) + ") printf '%s' '" + out + "'; exit " + strconv.Itoa(status) + ";;\n"
	}
	script += "*) echo 'run once too often'; exit 2;;\nesac\n"
	path := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		raw, err := os.ReadFile(runs)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(raw), "\n")
	}
	return Kubectl{Path: path}, count
}

const timedOut = `Internal error occurred: failed calling webhook "validate.envoyconfig.example.com": failed to call webhook: Post "https://localhost:9443/x?timeout=5s": context deadline exceeded`

func TestKubectlSendsAgainWhatAWebhookHadNoTimeFor(t *testing.T) {
	k, runs := fakeKubectl(t, timedOut, timedOut, "envoyconfig.example.com/app created")
	out, err := k.Out("apply", "-f", "app.yaml")
	if err != nil || out != "envoyconfig.example.com/app created" || runs() != 3 {
		t.Errorf("two timeouts, then created: %q, %v after %d runs; want it created after 3", out, err, runs())
	}
}

func TestKubectlGivesUpAfterWebhookTries(t *testing.T) {
	k, runs := fakeKubectl(t, timedOut, timedOut, timedOut, "never reached")
	if _, err := k.Out("apply", "-f", "app.yaml"); err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || runs() != WebhookTries {
		t.Errorf("timeouts only: %v after %d runs; want the timeout after %d", err, runs(), WebhookTries)
	}
}

func TestKubectlReturnsARefusalAtOnce(t *testing.T) {
	refused := `admission webhook "validate.envoyconfig.example.com" denied the request: EnvoyConfig app is invalid`
	k, runs := fakeKubectl(t, refused, "never reached")
	if _, err := k.Out("apply", "-f", "app.yaml"); err == nil || !strings.Contains(err.Error(), "denied the request") || runs() != 1 {
		t.Errorf("a refusal: %v after %d runs; want it at once", err, runs())
	}
}

// A client made WebhookPatient writes again what a webhook had no time for,
// up to WebhookTries times, and returns any other error at once.
func TestWebhookPatientClient(t *testing.T) {
	timeout := apierrors.NewInternalError(errors.New(`failed calling webhook "validate.envoyconfig.example.com": failed to call webhook: Post "https://localhost:9443/x?timeout=5s": context deadline exceeded`))
	refusal := apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "envoyconfigs"}, "app", errors.New("EnvoyConfig app is invalid"))
	for _, tc := range []struct {
		name    string
		errs    []error // what the API server answers each write, in turn; nil past the end
		want    error
		creates int
	}{
		{"two timeouts, then written", []error{timeout, timeout}, nil, 3},
		{"timeouts only", []error{timeout, timeout, timeout, timeout}, timeout, WebhookTries},
		{"a refusal", []error{refusal}, refusal, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creates := 0
			c := WebhookPatient(fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					creates++
					if creates <= len(tc.errs) {
						return tc.errs[creates-1]
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build())
			err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}})
			if !errors.Is(err, tc.want) && err != tc.want || creates != tc.creates {
				t.Errorf("got %v after %d creates, want %v after %d", err, creates, tc.want, tc.creates)
			}
		})
	}
}
