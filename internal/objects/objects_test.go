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

// desiredZeros is desiredDeployment with the zero values a renderer sets:
// no replicas, no service account token, no privilege escalation, and an
// emptyDir volume.
func desiredZeros() *appsv1.Deployment {
	d := desiredDeployment()
	d.Spec.Replicas = ptr.To[int32](0)
	spec := &d.Spec.Template.Spec
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
	spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return d
}

// defaulted is what the API server returns for desiredZeros: the same
// fields plus defaults and metadata that others add.
func defaulted() *appsv1.Deployment {
	d := desiredZeros()
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
		// Zero values we set are enforced like any other.
		{"our zero replicas scaled up by hand", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }, false},
		{"our false token automount turned on", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
		}, false},
		{"our false token automount removed", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}, false},
		{"our false privilege escalation turned on", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}, false},
		{"our emptyDir swapped for a hostPath", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}, false},
		// What we leave unset is others'.
		{"paused by hand (we leave paused unset)", func(d *appsv1.Deployment) { d.Spec.Paused = true }, true},
		{"a size limit others set on our emptyDir", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes[0].EmptyDir.SizeLimit = ptr.To(resource.MustParse("1Gi"))
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actual := defaulted()
			tt.mutate(actual)
			got, err := Contains(actual, desiredZeros())
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
		{"empty map desired sets nothing", map[string]string(nil), map[string]string{}, true},
		// The Go zero value of an omitempty field is not in the JSON the
		// API server receives: it cannot be told from unset.
		{"zero of an omitempty bool is unset", corev1.Container{Stdin: true}, corev1.Container{Stdin: false}, true},
		{"true bool does not match absent", corev1.Container{}, corev1.Container{Stdin: true}, false},
		{"nil pointer desired", &appsv1.Deployment{}, (*appsv1.Deployment)(nil), true},
		{"zero pointer desired, absent", corev1.PodSpec{}, corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false)}, false},
		{"zero pointer desired, same", corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false)}, corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false)}, true},
		{"zero int pointer desired, other value", appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}, appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)}, false},
		{"empty string of a field without omitempty", corev1.KeyToPath{Key: "k", Path: "p"}, corev1.KeyToPath{Key: "k"}, false},
		{"zero int of a field without omitempty", corev1.ContainerPort{ContainerPort: 80}, corev1.ContainerPort{}, false},
		{"empty list desired, absent", corev1.Capabilities{}, corev1.Capabilities{Drop: []corev1.Capability{}}, true},
		{"list items compared as partial objects", []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
			[]corev1.ContainerPort{{ContainerPort: 80}}, true},
		{"list reordered", []corev1.EnvVar{{Name: "b"}, {Name: "a"}}, []corev1.EnvVar{{Name: "a"}, {Name: "b"}}, false},
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
