package podset

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.MainWith(m, func(mgr ctrl.Manager) testenv.Controller { return NewReconciler(mgr) })
}

func newPodSet(ns, name string, replicas int32) *demov1alpha1.PodSet {
	return &demov1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       demov1alpha1.PodSetSpec{Replicas: replicas},
	}
}

// pods returns the pods in ns that are not being deleted.
func livePods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := suite.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitPods waits until ns holds exactly n pods that are not being deleted.
func waitPods(t *testing.T, ns string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testenv.Eventually(t, fmt.Sprintf("%d pods", n), func() (bool, error) {
		pods = livePods(t, ns)
		return len(pods) == n, nil
	})
	return pods
}

// startPodSet creates ps and waits for its spec.replicas pods.
func startPodSet(t *testing.T, ps *demov1alpha1.PodSet) []corev1.Pod {
	t.Helper()
	if err := suite.Client.Create(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	return waitPods(t, ps.Namespace, int(ps.Spec.Replicas))
}

// makeReady plays the scheduler's and the kubelet's part, which envtest lacks:
// the pod is bound to a node, running and ready.
func makeReady(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if p.Spec.NodeName == "" {
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
		if err := suite.Client.SubResource("binding").Create(ctx, p, binding); err != nil {
			t.Fatal(err)
		}
	}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := suite.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

func getPodSet(t *testing.T, ps *demov1alpha1.PodSet) *demov1alpha1.PodSet {
	t.Helper()
	got := &demov1alpha1.PodSet{}
	if err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(ps), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func waitStatus(t *testing.T, ps *demov1alpha1.PodSet, what string, cond func(demov1alpha1.PodSetStatus) bool) *demov1alpha1.PodSet {
	t.Helper()
	got := &demov1alpha1.PodSet{}
	testenv.Eventually(t, what, func() (bool, error) {
		err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(ps), got)
		return err == nil && got.Status.ObservedGeneration == got.Generation && cond(got.Status), err
	})
	return got
}

func TestCreatesPodsAndReportsReadiness(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	ps := newPodSet(ns, "two-podset", 3)
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, ns, 3)
	for _, p := range pods {
		if !metav1.IsControlledBy(&p, ps) || p.Labels[PodSetLabel] != "two-podset" ||
			p.Labels["app.kubernetes.io/managed-by"] != "kube-envoy-controller" {
			t.Errorf("pod %s: owners %v labels %v", p.Name, p.OwnerReferences, p.Labels)
		}
		if c := p.Spec.Containers; len(c) != 1 || c[0].Image != "busybox" || strings.Join(c[0].Command, " ") != "sleep 3600" {
			t.Errorf("pod %s: containers %+v", p.Name, c)
		}
	}
	waitStatus(t, ps, "replicas 3, none ready", func(s demov1alpha1.PodSetStatus) bool {
		return s.Replicas == 3 && s.ReadyReplicas == 0 && s.Selector == "demo.k8s.io/podset=two-podset" &&
			meta.IsStatusConditionFalse(s.Conditions, demov1alpha1.PodSetConditionAvailable)
	})
	suite.WaitEvent(t, ns, "two-podset", "Normal SuccessfulCreate")
	for i := range pods {
		makeReady(t, &pods[i])
	}
	waitStatus(t, ps, "availableReplicas 3", func(s demov1alpha1.PodSetStatus) bool {
		return s.AvailableReplicas == 3 && s.ReadyReplicas == 3 && meta.IsStatusConditionTrue(s.Conditions, demov1alpha1.PodSetConditionAvailable)
	})
}

func TestTemplate(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	ps := newPodSet(ns, "templated", 1)
	ps.Spec.Template = &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1"}}},
	}
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	p := waitPods(t, ns, 1)[0]
	// The template's labels survive the API server's pruning and reach the pod.
	if p.Labels["app"] != "web" || p.Spec.Containers[0].Image != "nginx:1" {
		t.Errorf("pod labels %v image %s, want the template's", p.Labels, p.Spec.Containers[0].Image)
	}
}

// A changed template applies to the pods created afterwards: the running
// pods are neither updated nor replaced.
func TestChangedTemplateAppliesToLaterPods(t *testing.T) {
	ctx := context.Background()
	ps := newPodSet(suite.Namespace(t), "retemplated", 1)
	ps.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1"}}}}
	first := startPodSet(t, ps)[0]
	ns := ps.Namespace

	patch := client.MergeFrom(ps.DeepCopy())
	ps.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	if err := suite.Client.Patch(ctx, ps, patch); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ps, "the new generation observed", func(demov1alpha1.PodSetStatus) bool { return true })
	suite.Touch(t, ControllerName, ps)
	pods := livePods(t, ns)
	if len(pods) != 1 || pods[0].UID != first.UID || pods[0].Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("after the template change: %s, want pod %s unchanged, with nginx:1", podImages(pods), first.Name)
	}

	patch = client.MergeFrom(ps.DeepCopy())
	ps.Spec.Replicas = 2
	if err := suite.Client.Patch(ctx, ps, patch); err != nil {
		t.Fatal(err)
	}
	pods = waitPods(t, ns, 2)
	want := map[string]string{first.Name: "nginx:1"}
	for _, p := range pods {
		if p.Name != first.Name {
			want[p.Name] = "nginx:2"
		}
	}
	if got := podImages(pods); got != imagesOf(want) {
		t.Errorf("pods after the scale-up: %s, want %s", got, imagesOf(want))
	}
}

// podImages describes pods as "name=image" of their first container, sorted.
func podImages(pods []corev1.Pod) string {
	m := map[string]string{}
	for _, p := range pods {
		m[p.Name] = p.Spec.Containers[0].Image
	}
	return imagesOf(m)
}

func imagesOf(m map[string]string) string {
	var out []string
	for name, image := range m {
		out = append(out, name+"="+image)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestScalesThroughSpecAndSubresource(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	ps := newPodSet(ns, "scaled", 1)
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, ns, 1)
	oldest := pods[0].Name
	makeReady(t, &pods[0])

	patch := client.MergeFrom(ps.DeepCopy())
	ps.Spec.Replicas = 4
	if err := suite.Client.Patch(ctx, ps, patch); err != nil {
		t.Fatal(err)
	}
	waitPods(t, ns, 4)

	// Scale down deletes the unscheduled pods before the scheduled, ready one.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
	if err := suite.Client.SubResource("scale").Update(ctx, ps, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	if scale.Status.Selector != "demo.k8s.io/podset=scaled" {
		t.Errorf("scale selector = %q", scale.Status.Selector)
	}
	pods = waitPods(t, ns, 1)
	if pods[0].Name != oldest {
		t.Errorf("scale-down kept %s, want the ready pod %s", pods[0].Name, oldest)
	}
	suite.WaitEvent(t, ns, "scaled", "Normal SuccessfulDelete")

	// Down to zero: allowed, and it removes the last pod.
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	if err := suite.Client.SubResource("scale").Update(ctx, ps, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	waitPods(t, ns, 0)
	waitStatus(t, ps, "replicas 0", func(s demov1alpha1.PodSetStatus) bool { return s.Replicas == 0 })
}

func TestReplacesDeletedAndFinishedPods(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	ps := newPodSet(ns, "healing", 2)
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, ns, 2)

	// A deleted pod is replaced.
	if err := suite.Client.Delete(ctx, &pods[0]); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a replacement pod", func() (bool, error) {
		now := livePods(t, ns)
		return len(now) == 2 && now[0].Name != pods[0].Name && now[1].Name != pods[0].Name, nil
	})

	// A failed pod is replaced, and removed.
	pods = livePods(t, ns)
	failed := pods[0]
	failed.Status.Phase = corev1.PodFailed
	if err := suite.Client.Status().Update(ctx, &failed); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the failed pod replaced and removed", func() (bool, error) {
		now := livePods(t, ns)
		for _, p := range now {
			if p.Name == failed.Name {
				return false, nil
			}
		}
		return len(now) == 2, nil
	})

	// So is a succeeded one.
	succeeded := livePods(t, ns)[0]
	succeeded.Status.Phase = corev1.PodSucceeded
	if err := suite.Client.Status().Update(ctx, &succeeded); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the succeeded pod replaced and removed", func() (bool, error) {
		now := livePods(t, ns)
		for _, p := range now {
			if p.Name == succeeded.Name {
				return false, nil
			}
		}
		return len(now) == 2, nil
	})
}

// Pods in the PodSet's namespace that it does not control do not count, even
// with its label; nor do its name's pods in another namespace.
func TestOnlyControlledPodsCount(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	other := suite.Namespace(t)
	for _, n := range []string{ns, other} {
		stranger := Pod(newPodSet(n, "owned", 1))
		stranger.OwnerReferences = nil
		if err := suite.Client.Create(ctx, stranger); err != nil {
			t.Fatal(err)
		}
	}
	ps := newPodSet(ns, "owned", 2)
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitPods(t, ns, 3)
	waitStatus(t, ps, "replicas 2", func(s demov1alpha1.PodSetStatus) bool { return s.Replicas == 2 })
	suite.Touch(t, ControllerName, ps)
	if n := len(livePods(t, ns)); n != 3 {
		t.Errorf("%d pods, want the stranger and the PodSet's 2", n)
	}
	if n := len(livePods(t, other)); n != 1 {
		t.Errorf("%d pods in the other namespace, want only its own", n)
	}
}

// A pod that carries the PodSet's controller ownerReference counts towards
// its replicas whatever its other labels: here without the PodSet's label.
// (The operator's managed-by label it needs: the manager caches no pod
// without it.)
func TestControlledPodCountsWhateverItsLabels(t *testing.T) {
	ctx := context.Background()
	ps := newPodSet(suite.Namespace(t), "adopter", 2)
	own := startPodSet(t, ps)
	ns := ps.Namespace
	waitStatus(t, ps, "replicas 2", func(s demov1alpha1.PodSetStatus) bool { return s.Replicas == 2 })

	foreign := Pod(ps)
	foreign.GenerateName = ""
	foreign.Name = "foreign"
	foreign.Labels = map[string]string{"app": "foreign", names.ManagedByLabel: names.ManagedByValue}
	if err := suite.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// Three pods count where two are wanted: one goes, and none is created.
	waitPods(t, ns, 2)
	suite.Touch(t, ControllerName, ps)
	pods := livePods(t, ns)
	if len(pods) != 2 {
		t.Errorf("%d pods, want 2", len(pods))
	}
	if got := getPodSet(t, ps); got.Status.Replicas != 2 {
		t.Errorf("status.replicas = %d, want 2", got.Status.Replicas)
	}
	names := map[string]bool{own[0].Name: true, own[1].Name: true, foreign.Name: true}
	for _, p := range pods {
		if !names[p.Name] {
			t.Errorf("pod %s was created: the foreign-labelled pod did not count", p.Name)
		}
	}
}

// A ResourceQuota admits 3 of 10 pods: the PodSet reports ReplicaFailure and
// a Warning event, and recovers when the quota is raised.
func TestQuotaIsReportedAndRecovered(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}},
	}
	if err := suite.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// The quota admission plugin needs the quota's status to enforce it; envtest has no quota controller.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := suite.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	ps := newPodSet(ns, "quota", 10)
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, ps, "ReplicaFailure", func(s demov1alpha1.PodSetStatus) bool {
		return meta.IsStatusConditionTrue(s.Conditions, demov1alpha1.PodSetConditionReplicaFailure)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, demov1alpha1.PodSetConditionReplicaFailure); c.Reason != demov1alpha1.PodSetReasonFailedCreate || !strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("ReplicaFailure = %+v", c)
	}
	suite.WaitEvent(t, ns, "quota", "Warning FailedCreate")
	if n := len(livePods(t, ns)); n != 3 {
		t.Errorf("%d pods, want the 3 the quota admits", n)
	}

	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(quota), quota); err != nil {
		t.Fatal(err)
	}
	quota.Spec.Hard[corev1.ResourcePods] = resource.MustParse("100")
	if err := suite.Client.Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status.Hard = quota.Spec.Hard
	if err := suite.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	waitPods(t, ns, 10)
	waitStatus(t, ps, "ReplicaFailure cleared", func(s demov1alpha1.PodSetStatus) bool {
		return s.Replicas == 10 && meta.FindStatusCondition(s.Conditions, demov1alpha1.PodSetConditionReplicaFailure) == nil
	})
}

// A reconcile that finds everything as desired sends no write request: no
// POST, PUT, PATCH or DELETE reaches the API server, events included.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	ps := newPodSet(ns, "settled", 2)
	if err := suite.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, ns, 2)
	for i := range pods {
		makeReady(t, &pods[i])
	}
	waitStatus(t, ps, "availableReplicas 2", func(s demov1alpha1.PodSetStatus) bool { return s.AvailableReplicas == 2 })
	suite.ExpectNoWrites(t, ControllerName, ps, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ps)})
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	noContainers := newPodSet(ns, "no-containers", 1)
	noContainers.Spec.Template = &corev1.PodTemplateSpec{}
	tests := []struct {
		ps    *demov1alpha1.PodSet
		field string
	}{
		{newPodSet(ns, "negative", -1), "spec.replicas"},
		{newPodSet(ns, strings.Repeat("x", 64), 1), "metadata.name"},
		{noContainers, "spec.template.spec.containers"},
	}
	for _, tt := range tests {
		err := suite.Client.Create(ctx, tt.ps)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("PodSet %s: got %v, want an Invalid error naming %s", tt.ps.Name, err, tt.field)
		}
	}

	// spec.replicas defaults to 1 when absent.
	raw := []byte(`{"apiVersion":"demo.k8s.io/v1alpha1","kind":"PodSet","metadata":{"name":"defaulted"},"spec":{}}`)
	u := &demov1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "defaulted", Namespace: ns}}
	if err := suite.Client.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if got := getPodSet(t, u); got.Spec.Replicas != 1 {
		t.Errorf("defaulted replicas = %d, want 1", got.Spec.Replicas)
	}
}

// Pods the API server refuses (an admission policy here; Pod Security
// admission or a quota alike) are reported as Degraded, with the API
// server's reason, besides ReplicaFailure; retried with backoff; and created
// once admitted.
func TestRefusedPodsAreDegraded(t *testing.T) {
	ns := suite.Namespace(t)
	testenv.TestRefusal(t, &suite, testenv.Refusal[*demov1alpha1.PodSet]{
		Controller: ControllerName,
		Object:     newPodSet(ns, "refused", 2),
		Probe:      testenv.PodProbe(ns),
		Resource:   "pods",
		Change:     func(ps *demov1alpha1.PodSet) { ps.Spec.Replicas = 3 },
		Recovered: func(ps *demov1alpha1.PodSet) bool {
			return ps.Status.Replicas == 3 && meta.FindStatusCondition(ps.Status.Conditions, demov1alpha1.PodSetConditionReplicaFailure) == nil
		},
	})
}
