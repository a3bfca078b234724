package main

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The replicas asked are the operator's running pods, at their port named
// debug, or 8444.
func TestReplicasOf(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, ports ...corev1.ContainerPort) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar"}, {Name: "manager", Ports: ports}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	deleting := pod("op-d", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{}
	got := replicasOf([]corev1.Pod{
		pod("op-b", corev1.PodRunning, corev1.ContainerPort{Name: "metrics", ContainerPort: 8443}, corev1.ContainerPort{Name: "debug", ContainerPort: 9444}),
		pod("op-a", corev1.PodRunning, corev1.ContainerPort{Name: "metrics", ContainerPort: 8443}),
		pod("op-c", corev1.PodPending),
		deleting,
	})
	want := []replica{{name: "op-a", pod: "op-a", port: 8444}, {name: "op-b", pod: "op-b", port: 9444}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replicas = %+v, want %+v", got, want)
	}
}
