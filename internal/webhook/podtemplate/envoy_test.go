package podtemplate

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
)

// An Envoy's resources are judged as a container's are, naming the field
// under spec.resources; an update that leaves them as they are is admitted,
// so that an Envoy stored before the check can still be scaled.
func TestEnvoyResources(t *testing.T) {
	envoy := func(hugepages string) *examplev1.Envoy {
		return &examplev1.Envoy{
			TypeMeta:   metav1.TypeMeta{APIVersion: examplev1.GroupVersion.String(), Kind: "Envoy"},
			ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "shop"},
			Spec: examplev1.EnvoySpec{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				"hugepages-2Mi": resource.MustParse(hugepages), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		}
	}
	bad, good := envoy("3Mi"), envoy("4Mi")
	scaled := bad.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](3)
	v := envoyValidator(admission.NewDecoder(manager.NewScheme()))
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		old, obj *examplev1.Envoy
		refusal  string
	}{
		{"create of whole pages", admissionv1.Create, nil, good, ""},
		{"create of a page and a half", admissionv1.Create, nil, bad,
			"spec.resources.limits[hugepages-2Mi]: Invalid value: \"3Mi\": must be a whole number of pages of 2Mi"},
		{"update that scales a stored Envoy and keeps its resources", admissionv1.Update, bad, scaled, ""},
		{"update that makes valid resources invalid", admissionv1.Update, good, bad, "spec.resources.limits[hugepages-2Mi]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, Namespace: "shop", Name: "edge", Object: raw(t, tc.obj)}}
			if tc.old != nil {
				req.OldObject = raw(t, tc.old)
			}
			r := v.Handle(context.Background(), req)
			if r.Allowed != (tc.refusal == "") {
				t.Fatalf("allowed = %v (%s), want %v", r.Allowed, r.Result.Message, tc.refusal == "")
			}
			if tc.refusal != "" && !strings.Contains(r.Result.Message, tc.refusal) {
				t.Errorf("refused with %q, want it to say %q", r.Result.Message, tc.refusal)
			}
		})
	}
}
