package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
)

// WaitServing waits until mgr's webhook server accepts connections: until
// then the API server fails every request that a configuration sends it.
// Once it serves, the check returns at once.
func WaitServing(t testing.TB, mgr ctrl.Manager) {
	t.Helper()
	check := mgr.GetWebhookServer().StartedChecker()
	Eventually(t, "the webhook server", func() (bool, error) {
		err := check(nil)
		return err == nil, err
	})
}

// WebhookManifests reads the generated webhook configurations,
// config/webhook/manifests.yaml, for installing in envtest.
func WebhookManifests() ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var (
		mutating   []*admissionv1.MutatingWebhookConfiguration
		validating []*admissionv1.ValidatingWebhookConfiguration
	)
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("config/webhook/manifests.yaml: %w", err)
		}
		var target any
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			c := &admissionv1.MutatingWebhookConfiguration{}
			mutating, target = append(mutating, c), c
		case "ValidatingWebhookConfiguration":
			c := &admissionv1.ValidatingWebhookConfiguration{}
			validating, target = append(validating, c), c
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
			return nil, nil, fmt.Errorf("config/webhook/manifests.yaml: %w", err)
		}
	}
	return mutating, validating, nil
}
