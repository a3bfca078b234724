package podtemplate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
)

func podSet(gpu string) *demov1alpha1.PodSet {
	return &demov1alpha1.PodSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: demov1alpha1.GroupVersion.String(), Kind: "PodSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: demov1alpha1.PodSetSpec{Replicas: 1, Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"example.com/gpu": resource.MustParse(gpu)}}}},
		}}},
	}
}

func raw(t *testing.T, obj runtime.Object) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// A create is judged; an update is judged when it changes the pod content,
// so that a PodSet stored before a check existed can still be scaled,
// labelled and deleted, and once it is being deleted, always admitted.
func TestValidatorJudgesWhatChanges(t *testing.T) {
	v := &Validator[*demov1alpha1.PodSet]{
		Decoder: admission.NewDecoder(manager.NewScheme()),
		New:     func() *demov1alpha1.PodSet { return &demov1alpha1.PodSet{} },
		Check:   PodSet,
		Spec:    func(ps *demov1alpha1.PodSet) any { return ps.Spec.Template },
	}
	bad, good := podSet("500m"), podSet("1")
	scaled := bad.DeepCopy()
	scaled.Spec.Replicas = 3
	scaled.Labels = map[string]string{"team": "a"}
	deleting := bad.DeepCopy()
	deleting.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	changed := bad.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		old, obj *demov1alpha1.PodSet
		allowed  bool
	}{
		{"create of a valid template", admissionv1.Create, nil, good, true},
		{"create of half a device", admissionv1.Create, nil, bad, false},
		{"update that scales and labels a stored template", admissionv1.Update, bad, scaled, true},
		{"update that changes a stored template and keeps half a device", admissionv1.Update, bad, changed, false},
		{"update that makes a valid template invalid", admissionv1.Update, good, bad, false},
		{"update of a PodSet being deleted", admissionv1.Update, bad, deleting, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, Namespace: "shop", Name: "web", Object: raw(t, tc.obj)}}
			if tc.old != nil {
				req.OldObject = raw(t, tc.old)
			}
			r := v.Handle(context.Background(), req)
			if r.Allowed != tc.allowed {
				t.Fatalf("allowed %v (%s), want %v", r.Allowed, r.Result.Message, tc.allowed)
			}
			if !tc.allowed && !strings.Contains(r.Result.Message, "spec.template.spec.containers[0].resources.limits[example.com/gpu]") {
				t.Errorf("the denial %q does not name the field", r.Result.Message)
			}
		})
	}
}
