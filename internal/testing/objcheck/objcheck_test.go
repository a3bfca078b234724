package objcheck

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func deployment() *appsv1.Deployment {
	l := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: l},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}},
				},
			},
		},
	}
}

func service() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		errs func() field.ErrorList
		// want is part of the first error; empty when the object is valid.
		want string
	}{
		{"valid Deployment", func() field.ErrorList { return Deployment(deployment()) }, ""},
		{"selector does not select", func() field.ErrorList {
			d := deployment()
			d.Spec.Template.Labels = map[string]string{"app": "other"}
			return Deployment(d)
		}, "spec.selector"},
		{"empty selector", func() field.ErrorList {
			d := deployment()
			d.Spec.Selector = &metav1.LabelSelector{}
			return Deployment(d)
		}, "spec.selector"},
		{"container name", func() field.ErrorList {
			d := deployment()
			d.Spec.Template.Spec.Containers[0].Name = "Web"
			return Deployment(d)
		}, "spec.template.spec.containers[0].name"},
		{"label value", func() field.ErrorList {
			d := deployment()
			d.Spec.Template.Labels["team"] = strings.Repeat("x", 64)
			return Deployment(d)
		}, "spec.template.metadata.labels"},
		{"mount of no volume", func() field.ErrorList {
			d := deployment()
			d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			return Deployment(d)
		}, "volumeMounts[0].name"},
		{"requests above limits", func() field.ErrorList {
			return Resources(&corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": resource.MustParse("2")},
				Limits:   corev1.ResourceList{"cpu": resource.MustParse("1")},
			}, field.NewPath("resources"))
		}, "resources.requests[cpu]"},
		{"valid Service", func() field.ErrorList { return Service(service()) }, ""},
		{"Service name with a dot", func() field.ErrorList {
			s := service()
			s.Name = "a.b"
			return Service(s)
		}, "metadata.name"},
		{"duplicate Service ports", func() field.ErrorList {
			s := service()
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "other", Port: 80, TargetPort: intstr.FromInt32(81)})
			return Service(s)
		}, "spec.ports[1]"},
		{"ConfigMap key", func() field.ErrorList {
			return ConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{"a/b": ""}})
		}, "data[a/b]"},
		{"Job name of 64", func() field.ErrorList {
			d := deployment()
			return Job(&batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("j", 64), Namespace: "ns"},
				Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: d.Spec.Template.Spec.Containers}}},
			})
		}, "metadata.name"},
		{"pod with generateName", func() field.ErrorList {
			d := deployment()
			return Pod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "ns"}, Spec: d.Spec.Template.Spec})
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.errs()
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Fatalf("invalid: %v", errs)
			case tc.want != "" && len(errs) == 0:
				t.Fatalf("valid; want an error about %s", tc.want)
			case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
				t.Fatalf("the errors do not name %s: %v", tc.want, errs)
			}
		})
	}
}
