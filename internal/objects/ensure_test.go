package objects_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// The suite runs no controller: the tests call Child.Ensure themselves,
// through a client that reads from the API server and whose writes the
// suite counts.
var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.Main(m, func(ctrl.Manager) error { return nil })
}

// counted returns a client of the API server whose requests the suite's
// Counter counts. It reads past any cache, so that Ensure sees every edit
// a test makes at once.
func counted(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(suite.Manager.GetConfig(), client.Options{Scheme: manager.NewScheme(), FieldOwner: names.FieldOwner})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newOwner creates an object to own a test's children.
func newOwner(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
	if err := suite.Client.Create(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// meta is a child's metadata: ours, and controlled by owner.
func meta(owner *corev1.ConfigMap, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: owner.Namespace,
		Labels:    map[string]string{"app": name, names.ManagedByLabel: names.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner,
			corev1.SchemeGroupVersion.WithKind("ConfigMap"))},
	}
}

// podSpec sets zero values that matter: no service account token, no
// privilege escalation.
func podSpec(restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                restart,
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.example/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
		}},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
}

func deployment(owner *corev1.ConfigMap, replicas int32) *appsv1.Deployment {
	sel := map[string]string{"app": "d"}
	return &appsv1.Deployment{
		ObjectMeta: meta(owner, "d"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: podSpec(corev1.RestartPolicyAlways)},
		},
	}
}

// ensurer is one kind of child: how to render it and ensure it.
type ensurer struct {
	kind   string
	ensure func(ctx context.Context, c client.Client, owner *corev1.ConfigMap) (objects.Outcome, error)
}

func ensurerOf[T client.Object](child objects.Child[T], render func(owner *corev1.ConfigMap) T) ensurer {
	return ensurer{kind: child.Kind, ensure: func(ctx context.Context, c client.Client, owner *corev1.ConfigMap) (objects.Outcome, error) {
		_, outcome, err := child.Ensure(ctx, c, c, owner, render(owner))
		return outcome, err
	}}
}

// every kind of child the package reconciles, each rendered as a
// controller would: a new object on every call.
var every = []ensurer{
	ensurerOf(objects.Deployments, func(o *corev1.ConfigMap) *appsv1.Deployment { return deployment(o, 0) }),
	ensurerOf(objects.Services, func(o *corev1.ConfigMap) *corev1.Service {
		return &corev1.Service{ObjectMeta: meta(o, "s"), Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "d"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
	}),
	ensurerOf(objects.ConfigMaps, func(o *corev1.ConfigMap) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: meta(o, "c"), Data: map[string]string{"a": "1", "empty": ""}}
	}),
	ensurerOf(objects.Secrets, func(o *corev1.ConfigMap) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: meta(o, "x"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
	}),
	ensurerOf(objects.PodDisruptionBudgets, func(o *corev1.ConfigMap) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: meta(o, "p"), Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		}}
	}),
	ensurerOf(objects.NetworkPolicies, func(o *corev1.ConfigMap) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: meta(o, "n"), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"169.254.0.0/16"}}}}},
				{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))}}},
			},
		}}
	}),
	ensurerOf(objects.HorizontalPodAutoscalers, func(o *corev1.ConfigMap) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta(o, "h"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    3,
		}}
	}),
	ensurerOf(objects.Jobs, func(o *corev1.ConfigMap) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: meta(o, "j"), Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{Spec: podSpec(corev1.RestartPolicyNever)},
		}}
	}),
}

// writes returns the write requests counted to ns since the last Reset.
func writes(ns string) []string { return suite.Counter.WritesTo("/namespaces/" + ns + "/") }

// Ensure sends one write to create a child, and none at all, however often
// it is called, once the child is as desired: the API server's defaults and
// what others add to it (labels, annotations, fields the child leaves
// unset) are no difference.
func TestEnsureWritesNothingWhenNothingDiffers(t *testing.T) {
	ctx := context.Background()
	c := counted(t)
	for _, e := range every {
		t.Run(e.kind, func(t *testing.T) {
			ns := suite.Namespace(t)
			owner := newOwner(t, ns)
			suite.Counter.Reset()
			if got, err := e.ensure(ctx, c, owner); err != nil || got != objects.Created {
				t.Fatalf("first Ensure: %v, %v; want Created", got, err)
			}
			if w := writes(ns); len(w) != 1 {
				t.Errorf("creating sent %d write requests, want 1: %v", len(w), w)
			}
			suite.Counter.Reset()
			for range 3 {
				if got, err := e.ensure(ctx, c, owner); err != nil || got != objects.Unchanged {
					t.Fatalf("Ensure of what exists: %v, %v; want Unchanged", got, err)
				}
			}
			if w := writes(ns); len(w) != 0 {
				t.Errorf("Ensure of what exists sent %d write requests: %v", len(w), w)
			}
		})
	}
}

// What a child leaves unset is others': edits of it are never written back.
func TestEnsureLeavesUnsetFieldsAlone(t *testing.T) {
	ctx := context.Background()
	c := counted(t)
	ns := suite.Namespace(t)
	owner := newOwner(t, ns)
	if got, err := every[0].ensure(ctx, c, owner); err != nil || got != objects.Created {
		t.Fatalf("Ensure: %v, %v", got, err)
	}
	edits := map[string]func(*appsv1.Deployment){
		"a label":                      func(d *appsv1.Deployment) { d.Labels["team"] = "theirs" },
		"an annotation":                func(d *appsv1.Deployment) { d.Annotations = map[string]string{"note": "theirs"} },
		"paused":                       func(d *appsv1.Deployment) { d.Spec.Paused = true },
		"minReadySeconds":              func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 5 },
		"revisionHistoryLimit":         func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](2) },
		"a template annotation":        func(d *appsv1.Deployment) { d.Spec.Template.Annotations = map[string]string{"restartedAt": "now"} },
		"a template label":             func(d *appsv1.Deployment) { d.Spec.Template.Labels["team"] = "theirs" },
		"the image pull policy":        func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullNever },
		"the termination message path": func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/elsewhere" },
		"the DNS policy":               func(d *appsv1.Deployment) { d.Spec.Template.Spec.DNSPolicy = corev1.DNSDefault },
		"a node selector":              func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} },
	}
	for what, edit := range edits {
		t.Run(what, func(t *testing.T) {
			d := &appsv1.Deployment{}
			if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d"}, d); err != nil {
				t.Fatal(err)
			}
			edit(d)
			if err := suite.Client.Update(ctx, d); err != nil {
				t.Fatal(err)
			}
			suite.Counter.Reset()
			if got, err := every[0].ensure(ctx, c, owner); err != nil || got != objects.Unchanged {
				t.Errorf("Ensure after an edit of %s: %v, %v; want Unchanged", what, got, err)
			}
			if w := writes(ns); len(w) != 0 {
				t.Errorf("Ensure after an edit of %s sent %d write requests: %v", what, len(w), w)
			}
		})
	}
}

// A zero value a child sets is enforced like any other: a hand edit of it
// is put back with one write.
func TestEnsureEnforcesZeroValues(t *testing.T) {
	ctx := context.Background()
	c := counted(t)
	ns := suite.Namespace(t)
	owner := newOwner(t, ns)
	ensure := every[0].ensure
	if got, err := ensure(ctx, c, owner); err != nil || got != objects.Created {
		t.Fatalf("Ensure: %v, %v", got, err)
	}
	edits := []struct {
		what    string
		edit    func(*appsv1.Deployment)
		putBack func(*appsv1.Deployment) bool
	}{
		{"replicas 0 scaled up", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) },
			func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 }},
		{"automountServiceAccountToken false turned on", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
		}, func(d *appsv1.Deployment) bool { return *d.Spec.Template.Spec.AutomountServiceAccountToken == false }},
		{"automountServiceAccountToken false removed", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}, func(d *appsv1.Deployment) bool {
			return d.Spec.Template.Spec.AutomountServiceAccountToken != nil && !*d.Spec.Template.Spec.AutomountServiceAccountToken
		}},
		{"allowPrivilegeEscalation false turned on", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}, func(d *appsv1.Deployment) bool {
			return *d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation == false
		}},
		{"the emptyDir swapped for a hostPath", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}, func(d *appsv1.Deployment) bool {
			v := d.Spec.Template.Spec.Volumes[0].VolumeSource
			return v.EmptyDir != nil && v.HostPath == nil
		}},
	}
	for _, tt := range edits {
		t.Run(tt.what, func(t *testing.T) {
			key := client.ObjectKey{Namespace: ns, Name: "d"}
			d := &appsv1.Deployment{}
			if err := suite.Client.Get(ctx, key, d); err != nil {
				t.Fatal(err)
			}
			tt.edit(d)
			if err := suite.Client.Update(ctx, d); err != nil {
				t.Fatal(err)
			}
			suite.Counter.Reset()
			if got, err := ensure(ctx, c, owner); err != nil || got != objects.Updated {
				t.Fatalf("Ensure: %v, %v; want Updated", got, err)
			}
			if w := writes(ns); len(w) != 1 || w[0] != fmt.Sprintf("PUT /apis/apps/v1/namespaces/%s/deployments/d", ns) {
				t.Errorf("putting it back sent %v, want one update of the Deployment", w)
			}
			if err := suite.Client.Get(ctx, key, d); err != nil {
				t.Fatal(err)
			}
			if !tt.putBack(d) {
				t.Errorf("not put back: %+v", d.Spec)
			}
			suite.Counter.Reset()
			if got, err := ensure(ctx, c, owner); err != nil || got != objects.Unchanged {
				t.Errorf("Ensure after putting it back: %v, %v; want Unchanged", got, err)
			}
			if w := writes(ns); len(w) != 0 {
				t.Errorf("Ensure after putting it back sent %v", w)
			}
		})
	}
}
