package objects

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func desiredDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: map[string]string{"app": "nginx"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "nginx",
					Image: "nginx:latest",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"),
					}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)},
					}},
				}}},
			},
		},
	}
}

// defaulted is what the API server returns for desiredDeployment: the same
// fields plus defaults and metadata that others add.
func defaulted() *appsv1.Deployment {
	d := desiredDeployment()
	d.ResourceVersion = "42"
	d.Labels["added-by-someone"] = "x"
	d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	c := &d.Spec.Template.Spec.Containers[0]
	c.ImagePullPolicy = corev1.PullAlways
	c.TerminationMessagePath = "/dev/termination-log"
	c.ReadinessProbe.TimeoutSeconds = 1
	c.ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	d.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	d.Status.Replicas = 2
	return d
}

func TestContains(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   bool
	}{
		{"server defaults and foreign labels are not differences", func(*appsv1.Deployment) {}, true},
		{"replicas changed by hand", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, false},
		{"replicas removed", func(d *appsv1.Deployment) { d.Spec.Replicas = nil }, false},
		{"image changed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "evil" }, false},
		{"container added", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "x"})
		}, false},
		{"our label removed", func(d *appsv1.Deployment) { delete(d.Labels, "app") }, false},
		{"our label changed", func(d *appsv1.Deployment) { d.Labels["app"] = "other" }, false},
		{"quantity written another way", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("0.1")
		}, true},
		{"quantity changed", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
		}, false},
		{"probe port changed", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9090)
		}, false},
		{"probe removed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].ReadinessProbe = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actual := defaulted()
			tt.mutate(actual)
			got, err := Contains(actual, desiredDeployment())
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Contains() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestContainsParts(t *testing.T) {
	tests := []struct {
		name            string
		actual, desired any
		want            bool
	}{
		{"nil desired", map[string]string{"a": "b"}, nil, true},
		{"nil actual", nil, map[string]string{"a": "b"}, false},
		{"map subset", map[string]string{"a": "b", "c": "d"}, map[string]string{"a": "b"}, true},
		{"map value differs", map[string]string{"a": "x"}, map[string]string{"a": "b"}, false},
		{"zero bool matches absent", corev1.Container{}, corev1.Container{Stdin: false}, true},
		{"true bool does not match absent", corev1.Container{}, corev1.Container{Stdin: true}, false},
		{"nil pointer desired", &appsv1.Deployment{}, (*appsv1.Deployment)(nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Contains(tt.actual, tt.desired)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Contains() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMergeMaps(t *testing.T) {
	base := map[string]string{"a": "1", "b": "2"}
	got := MergeMaps(base, map[string]string{"b": "3", "c": "4"})
	want := map[string]string{"a": "1", "b": "3", "c": "4"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got[%q] = %q, want %q", k, got[k], v)
		}
	}
	if base["b"] != "2" {
		t.Errorf("MergeMaps modified its base: %v", base)
	}
	if MergeMaps(nil, nil) != nil {
		t.Errorf("MergeMaps(nil, nil) should be nil")
	}
}
