package inject

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// admit sends the injector, as the manager serves it (Setup), the
// admission review the API server would send for the creation of pod in ns,
// and returns its answer.
func admit(t *testing.T, ns string, annotations map[string]string) *admissionv1.AdmissionResponse {
	t.Helper()
	pod := podIn(ns, annotations)
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("review-" + ns),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns, Name: pod.Name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	suite.Manager.GetWebhookServer().WebhookMux().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("namespace %s: the injector answered %d: %s", ns, rec.Code, rec.Body)
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
		t.Fatalf("namespace %s: the injector's answer %s: %v", ns, rec.Body, err)
	}
	return answer.Response
}

// The injector itself never changes a pod of kube-system or of the
// operator's namespace, whatever reaches it: the shipped namespaceSelector
// keeps those pods away, and this is the backstop for a configuration
// edited or written by hand. The same request for an ordinary namespace is
// acted on: it names a Watcher and an Envoy that do not exist, and is denied.
func TestInjectorNeverTouchesExcludedNamespaces(t *testing.T) {
	asks := map[string]string{InjectAnnotation: "missing", EnvoySidecarAnnotation: "missing"}
	ordinary := namespace(t, true)
	if r := admit(t, ordinary, asks); r.Allowed || !strings.Contains(message(r), `Watcher "missing", which does not exist`) {
		t.Fatalf("a pod of namespace %s naming a missing Watcher: allowed %v (%s); want it denied", ordinary, r.Allowed, message(r))
	}
	for _, ns := range []string{"kube-system", operatorNamespace} {
		r := admit(t, ns, asks)
		if !r.Allowed || r.Patch != nil || r.PatchType != nil {
			t.Errorf("a pod of namespace %s: allowed %v (%s), patch %s; want it allowed unchanged", ns, r.Allowed, message(r), r.Patch)
		}
	}
}

func message(r *admissionv1.AdmissionResponse) string {
	if r.Result == nil {
		return ""
	}
	return r.Result.Message
}
