package podset

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
)

func samplePodSet() *demov1alpha1.PodSet {
	return &demov1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "two-podset", Namespace: "default", UID: "uid-1", Generation: 2},
		Spec:       demov1alpha1.PodSetSpec{Replicas: 3},
	}
}

func TestPodDefault(t *testing.T) {
	p := Pod(samplePodSet())
	if p.GenerateName != "two-podset-" || p.Name != "" || p.Namespace != "default" {
		t.Errorf("name = %q/%q generateName %q", p.Namespace, p.Name, p.GenerateName)
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.UID != "uid-1" || ref.Kind != "PodSet" || ref.APIVersion != "demo.k8s.io/v1alpha1" {
		t.Errorf("controller ref = %+v", ref)
	}
	if p.Labels["app.kubernetes.io/managed-by"] != "kube-envoy-controller" || p.Labels[PodSetLabel] != "two-podset" {
		t.Errorf("labels = %v", p.Labels)
	}
	cs := p.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "busybox" || cs[0].Image != "busybox" || !slices.Equal(cs[0].Command, []string{"sleep", "3600"}) {
		t.Errorf("containers = %+v, want the seed's busybox running sleep 3600", cs)
	}
}

func TestPodFromTemplate(t *testing.T) {
	ps := samplePodSet()
	ps.Spec.Template = &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web", PodSetLabel: "spoofed"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	p := Pod(ps)
	if p.Labels["app"] != "web" || p.Labels[PodSetLabel] != "two-podset" || p.Annotations["note"] != "x" {
		t.Errorf("labels %v annotations %v: want the template's, with the PodSet's label winning", p.Labels, p.Annotations)
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "nginx" {
		t.Errorf("containers = %+v, want the template's", p.Spec.Containers)
	}
	p.Spec.Containers[0].Image = "changed"
	p.Labels["app"] = "changed"
	if ps.Spec.Template.Spec.Containers[0].Image != "nginx" || ps.Spec.Template.Labels["app"] != "web" {
		t.Error("Pod shares memory with the PodSet's template")
	}
}

type podOpt func(*corev1.Pod)

func node(p *corev1.Pod) { p.Spec.NodeName = "node-1" }
func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
}
func ready(p *corev1.Pod) {
	running(p)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}
func age(minutes int) podOpt {
	return func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(minutes) * time.Minute))
	}
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func deleting(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	age(10)(p)
	for _, o := range opts {
		o(p)
	}
	return p
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPodsToDelete(t *testing.T) {
	pods := []*corev1.Pod{
		pod("old-ready", node, ready, age(30)),
		pod("new-ready", node, ready, age(1)),
		pod("not-ready", node, running, age(40)),
		pod("pending", node, age(50)),
		pod("unscheduled", age(60)),
		pod("unknown", node, phase(corev1.PodUnknown), age(60)),
	}
	want := []string{"unscheduled", "pending", "unknown", "not-ready", "new-ready", "old-ready"}
	for n := 0; n <= len(pods)+1; n++ {
		got := podNames(PodsToDelete(pods, n))
		if !slices.Equal(got, want[:min(n, len(want))]) {
			t.Errorf("PodsToDelete(%d) = %v, want %v", n, got, want[:min(n, len(want))])
		}
	}
	if pods[0].Name != "old-ready" {
		t.Error("PodsToDelete reordered its argument")
	}
}

func TestPartition(t *testing.T) {
	active, finished := Partition([]*corev1.Pod{
		pod("a", ready), pod("b"), pod("c", phase(corev1.PodFailed)),
		pod("d", phase(corev1.PodSucceeded)), pod("e", ready, deleting),
	})
	if got := podNames(active); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("active = %v", got)
	}
	if got := podNames(finished); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("finished = %v", got)
	}
}

func TestStatus(t *testing.T) {
	active := []*corev1.Pod{pod("a", ready), pod("b", ready), pod("c", running)}
	tests := []struct {
		name             string
		replicas         int32
		obs              Observed
		prior            []metav1.Condition
		wantAvailable    metav1.ConditionStatus
		wantFailure      metav1.ConditionStatus // "" for absent
		wantDegraded     string                 // "<status> <reason>", "" for absent
		wantReady, wantN int32
	}{
		{"short of ready pods", 3, Observed{Active: active, Managed: true}, nil, "False", "", "False AsExpected", 2, 3},
		{"enough ready pods", 2, Observed{Active: active, Managed: true}, nil, "True", "", "False AsExpected", 2, 3},
		{"no pods, none wanted", 0, Observed{Managed: true}, nil, "True", "", "False AsExpected", 0, 0},
		{"create failed", 5, Observed{Active: active, Managed: true, Failure: &Failure{demov1alpha1.PodSetReasonFailedCreate, "quota", "Forbidden"}}, nil, "False", "True", "True Forbidden", 2, 3},
		{"failure cleared once managed", 3, Observed{Active: active, Managed: true},
			[]metav1.Condition{{Type: demov1alpha1.PodSetConditionReplicaFailure, Status: "True", Reason: demov1alpha1.PodSetReasonFailedCreate}, {Type: demov1alpha1.PodSetConditionDegraded, Status: "True", Reason: "Forbidden"}},
			"False", "", "False AsExpected", 2, 3},
		{"failure kept while waiting for expectations", 3, Observed{Active: active},
			[]metav1.Condition{{Type: demov1alpha1.PodSetConditionReplicaFailure, Status: "True", Reason: demov1alpha1.PodSetReasonFailedCreate}, {Type: demov1alpha1.PodSetConditionDegraded, Status: "True", Reason: "Forbidden"}},
			"False", "True", "True Forbidden", 2, 3},
		{"nothing known before expectations are met", 3, Observed{Active: active}, nil, "False", "", "", 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := samplePodSet()
			ps.Spec.Replicas = tt.replicas
			ps.Status.Conditions = tt.prior
			st := Status(ps, tt.obs)
			vocabulary.Check(t, ps, st.Conditions)
			if st.Replicas != tt.wantN || st.ReadyReplicas != tt.wantReady || st.AvailableReplicas != tt.wantReady {
				t.Errorf("replicas %d ready %d available %d, want %d %d %d", st.Replicas, st.ReadyReplicas, st.AvailableReplicas, tt.wantN, tt.wantReady, tt.wantReady)
			}
			if st.ObservedGeneration != 2 || st.Selector != "demo.k8s.io/podset=two-podset" {
				t.Errorf("observedGeneration %d selector %q", st.ObservedGeneration, st.Selector)
			}
			if c := meta.FindStatusCondition(st.Conditions, demov1alpha1.PodSetConditionAvailable); c == nil || c.Status != tt.wantAvailable {
				t.Errorf("Available = %+v, want %s", c, tt.wantAvailable)
			}
			c := meta.FindStatusCondition(st.Conditions, demov1alpha1.PodSetConditionReplicaFailure)
			switch {
			case tt.wantFailure == "" && c != nil:
				t.Errorf("ReplicaFailure = %+v, want none", c)
			case tt.wantFailure != "" && (c == nil || c.Status != tt.wantFailure):
				t.Errorf("ReplicaFailure = %+v, want %s", c, tt.wantFailure)
			}
			degraded := ""
			if d := meta.FindStatusCondition(st.Conditions, demov1alpha1.PodSetConditionDegraded); d != nil {
				degraded = string(d.Status) + " " + d.Reason
			}
			if degraded != tt.wantDegraded {
				t.Errorf("Degraded = %q, want %q", degraded, tt.wantDegraded)
			}
		})
	}

	// An unchanged condition keeps its transition time, so a settled PodSet's status is stable.
	ps := samplePodSet()
	first := Status(ps, Observed{Active: active, Managed: true})
	ps.Status = first
	// The time of the last transition is kept, not recomputed.
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ps.Status.Conditions[0].LastTransitionTime = earlier
	first.Conditions[0].LastTransitionTime = earlier
	if again := Status(ps, Observed{Active: active, Managed: true}); !meta.IsStatusConditionFalse(again.Conditions, demov1alpha1.PodSetConditionAvailable) ||
		!again.Conditions[0].LastTransitionTime.Equal(&first.Conditions[0].LastTransitionTime) {
		t.Errorf("conditions changed without a change: %+v -> %+v", first.Conditions, again.Conditions)
	}
}

func TestWithoutGeneratedName(t *testing.T) {
	tests := []struct{ msg, name, prefix, want string }{
		{`creating pods: pods "web-x7k2p" is forbidden: exceeded quota`, "web-x7k2p", "web-",
			`creating pods: pods "web-*" is forbidden: exceeded quota`},
		{`pods "web-x7k2p" is forbidden`, "other-x7k2p", "web-", `pods "web-x7k2p" is forbidden`},
		{`pods "web-" is forbidden`, "web-", "web-", `pods "web-" is forbidden`},
		{`no name`, "", "web-", `no name`},
	}
	for _, tt := range tests {
		if got := WithoutGeneratedName(tt.msg, tt.name, tt.prefix); got != tt.want {
			t.Errorf("WithoutGeneratedName(%q, %q, %q) = %q, want %q", tt.msg, tt.name, tt.prefix, got, tt.want)
		}
	}
}
