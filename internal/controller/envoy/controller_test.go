package envoy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"os"
	"path/filepath"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	proxy "github.com/kube-envoy-controller/kube-envoy-controller/internal/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
)

var (
	suite      testenv.Suite
	reconciler *Reconciler
)

func TestMain(m *testing.M) {
	suite.Main(m, func(mgr ctrl.Manager) error {
		reconciler = NewReconciler(mgr, builtin)
		return reconciler.SetupWithManager(mgr)
	})
}

// applySample creates config/samples/example_v1_envoy.yaml, unchanged, in ns.
func applySample(t *testing.T, ns string) *examplev1.Envoy {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "config", "samples", "example_v1_envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := &examplev1.Envoy{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(e); err != nil {
		t.Fatal(err)
	}
	e.Namespace = ns
	if err := suite.Client.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

func get[T client.Object](t *testing.T, ns, name string, obj T, cond func(T) bool) T {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%T %s", obj, name), func() (bool, error) {
		err := suite.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
		return err == nil && cond(obj), client.IgnoreNotFound(err)
	})
	return obj
}

func exists[T client.Object](T) bool { return true }

func gone(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%T %s to be deleted", obj, name), func() (bool, error) {
		err := suite.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
		// Envtest has no garbage collector to finish a background deletion; a
		// deletionTimestamp is the API server's record of the delete.
		return apierrors.IsNotFound(err) || (err == nil && obj.GetDeletionTimestamp() != nil), client.IgnoreNotFound(err)
	})
}

func settled(t *testing.T, e *examplev1.Envoy) *examplev1.Envoy {
	t.Helper()
	got := &examplev1.Envoy{}
	testenv.Eventually(t, "Envoy status", func() (bool, error) {
		err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(e), got)
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.BootstrapHash != "", err
	})
	return got
}

// playDeploymentController writes the status the Deployment controller would,
// which envtest does not run.
func playDeploymentController(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	if err := suite.Client.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func TestSeedSampleCreatesFleet(t *testing.T) {
	ns := suite.Namespace(t)
	e := applySample(t, ns)

	cm := get(t, ns, "envoy-cfg-1", &corev1.ConfigMap{}, exists)
	b, err := proxy.ParseBootstrap([]byte(cm.Data["envoy.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's bootstrap does not pass Envoy's schema: %v", err)
	}
	if got := b.GetStaticResources().GetClusters()[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress(); got.GetAddress() != "xds-service.default" || got.GetPortValue() != 19000 {
		t.Errorf("xds cluster = %v", got)
	}
	d := get(t, ns, "webserver-beta", &appsv1.Deployment{}, exists)
	svc := get(t, ns, "webserver-beta", &corev1.Service{}, exists)
	for _, obj := range []client.Object{cm, d, svc} {
		if !metav1.IsControlledBy(obj, e) {
			t.Errorf("%T %s is not controlled by the Envoy", obj, obj.GetName())
		}
	}
	if *d.Spec.Replicas != 3 || svc.Spec.Selector["app.kubernetes.io/instance"] != "edge-envoy" {
		t.Errorf("replicas %d, service selector %v", *d.Spec.Replicas, svc.Spec.Selector)
	}
	// One event tells of the three children.
	suite.WaitEvent(t, ns, e.Name, `Normal Created Created ConfigMap "envoy-cfg-1", Deployment "webserver-beta", Service "webserver-beta"`)

	got := settled(t, e)
	if got.Status.BootstrapHash != proxy.Hash([]byte(cm.Data["envoy.yaml"])) ||
		d.Spec.Template.Annotations[BootstrapHashAnnotation] != got.Status.BootstrapHash {
		t.Errorf("bootstrap hash: status %s, pod template %s", got.Status.BootstrapHash, d.Spec.Template.Annotations[BootstrapHashAnnotation])
	}
	if got.Status.XDSServer != "xds-service.default:19000" {
		t.Errorf("status.xdsServer = %q", got.Status.XDSServer)
	}

	playDeploymentController(t, d)
	get(t, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool {
		c := meta.FindStatusCondition(e.Status.Conditions, ConditionAvailable)
		return e.Status.AvailableReplicas == 3 && e.Status.ReadyReplicas == 3 && e.Status.Replicas == 3 && c != nil && c.Status == metav1.ConditionTrue
	})
}

func TestBuiltInXDSServerByDefault(t *testing.T) {
	ns := suite.Namespace(t)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}}
	if err := suite.Client.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got := settled(t, e)
	if got.Status.XDSServer != builtin.XDS.String() {
		t.Errorf("xdsServer = %q, want the built-in %q", got.Status.XDSServer, builtin.XDS)
	}
	// The API server applied the CRD's defaults.
	if *got.Spec.Replicas != 1 || got.Spec.Image != examplev1.DefaultImage || got.Spec.LogLevel != "info" ||
		len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 || got.Spec.ServiceType != corev1.ServiceTypeClusterIP {
		t.Errorf("defaults = %+v", got.Spec)
	}
	get(t, ns, "plain-bootstrap", &corev1.ConfigMap{}, exists)
	get(t, ns, "plain", &corev1.Service{}, exists)
}

func TestXDSChangeUpdatesBootstrapAndRollsPods(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	before := settled(t, e).Status.BootstrapHash

	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.XDS.Port = 19500
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	cm := get(t, ns, "envoy-cfg-1", &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) bool {
		return proxy.Hash([]byte(cm.Data["envoy.yaml"])) != before
	})
	b, err := proxy.ParseBootstrap([]byte(cm.Data["envoy.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	if p := b.GetStaticResources().GetClusters()[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(); p != 19500 {
		t.Errorf("xds cluster port = %d, want 19500", p)
	}
	hash := proxy.Hash([]byte(cm.Data["envoy.yaml"]))
	get(t, ns, "webserver-beta", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations[BootstrapHashAnnotation] == hash
	})
	get(t, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool { return e.Status.BootstrapHash == hash })
}

func TestScaleSubresource(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if err := suite.Client.SubResource("scale").Update(ctx, e, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	get(t, ns, "webserver-beta", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 5 })
}

func TestRestoresChildren(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)

	cm := get(t, ns, "envoy-cfg-1", &corev1.ConfigMap{}, exists)
	want := cm.Data["envoy.yaml"]
	cm.Data["envoy.yaml"] = "tampered"
	cm.Data["extra"] = "x"
	if err := suite.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	get(t, ns, "envoy-cfg-1", &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) bool {
		return cm.Data["envoy.yaml"] == want && len(cm.Data) == 1
	})

	svc := get(t, ns, "webserver-beta", &corev1.Service{}, exists)
	svc.Spec.Selector = map[string]string{"app": "elsewhere"}
	if err := suite.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	get(t, ns, "webserver-beta", &corev1.Service{}, func(s *corev1.Service) bool {
		return s.Spec.Selector["app.kubernetes.io/instance"] == "edge-envoy" && s.Spec.Selector["app"] == ""
	})

	d := get(t, ns, "webserver-beta", &appsv1.Deployment{}, exists)
	if err := suite.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	get(t, ns, "webserver-beta", &appsv1.Deployment{}, func(n *appsv1.Deployment) bool { return n.UID != d.UID })
}

func TestRenameRemovesOldChildren(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)

	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.Name = "webserver-gamma"
	e.Spec.ConfigMapName = "envoy-cfg-2"
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	d := get(t, ns, "webserver-gamma", &appsv1.Deployment{}, exists)
	get(t, ns, "webserver-gamma", &corev1.Service{}, exists)
	get(t, ns, "envoy-cfg-2", &corev1.ConfigMap{}, exists)
	if v := d.Spec.Template.Spec.Volumes[0].ConfigMap.Name; v != "envoy-cfg-2" {
		t.Errorf("pods mount %s", v)
	}
	gone(t, ns, "webserver-beta", &appsv1.Deployment{})
	gone(t, ns, "webserver-beta", &corev1.Service{})
	gone(t, ns, "envoy-cfg-1", &corev1.ConfigMap{})
}

func TestNameClashIsReportedAndNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webserver-beta", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 1234}}},
	}
	if err := suite.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	e := applySample(t, ns)
	suite.WaitEvent(t, ns, e.Name, "Warning ResourceExists [Service webserver-beta] already exist and are not managed by this Envoy")
	got := settled(t, e)
	if c := meta.FindStatusCondition(got.Status.Conditions, ConditionDegraded); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Degraded = %+v", c)
	}
	after := &corev1.Service{}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(theirs), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != theirs.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Errorf("the foreign Service was modified")
	}
	// The other children are still made.
	get(t, ns, "webserver-beta", &appsv1.Deployment{}, exists)
}

// A reconcile that finds everything as desired sends no write request.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	d := get(t, ns, "webserver-beta", &appsv1.Deployment{}, exists)
	playDeploymentController(t, d)
	get(t, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool { return e.Status.AvailableReplicas == 3 })
	suite.Quiet(t)

	suite.Counter.Reset()
	before := testenv.ReconcileTotal(ControllerName)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test/touched":%q}}}`, time.Now()))
	if err := suite.Client.Patch(ctx, e, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a reconcile of the touched Envoy", func() (bool, error) {
		return testenv.ReconcileTotal(ControllerName) > before, nil
	})
	for range 3 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // events are sent asynchronously
	if w := suite.Counter.WritesTo("/namespaces/" + ns + "/"); len(w) != 0 {
		t.Errorf("a settled reconcile sent %d write requests: %v", len(w), w)
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*examplev1.Envoy)
		field  string
	}{
		{"bad-name", func(e *examplev1.Envoy) { e.Spec.Name = "Web_Server" }, "spec.name"},
		{"digit-name", func(e *examplev1.Envoy) { e.Spec.Name = "1web" }, "spec.name"},
		{"bad-cm", func(e *examplev1.Envoy) { e.Spec.ConfigMapName = "a/b" }, "spec.configMapName"},
		{"neg-replicas", func(e *examplev1.Envoy) { e.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas"},
		{"xds-port", func(e *examplev1.Envoy) { e.Spec.XDS.Port = 70000 }, "spec.xds.port"},
		{"xds-host", func(e *examplev1.Envoy) { e.Spec.XDS.Host = "not a host" }, "spec.xds.host"},
		{"log-level", func(e *examplev1.Envoy) { e.Spec.LogLevel = "loud" }, "spec.logLevel"},
		{"reserved-port", func(e *examplev1.Envoy) {
			e.Spec.Ports = []examplev1.EnvoyPort{{Name: "http", Port: 80, TargetPort: 19001}}
		}, "spec"},
		{"dup-port", func(e *examplev1.Envoy) {
			e.Spec.Ports = []examplev1.EnvoyPort{{Name: "a", Port: 80}, {Name: "b", Port: 80, TargetPort: 81}}
		}, "spec.ports"},
		{"reserved-label", func(e *examplev1.Envoy) {
			e.Spec.PodLabels = map[string]string{"app.kubernetes.io/instance": "x"}
		}, "spec.podLabels"},
		{"service-type", func(e *examplev1.Envoy) { e.Spec.ServiceType = "ExternalName" }, "spec.serviceType"},
	}
	for _, tt := range tests {
		e := &examplev1.Envoy{
			ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: ns},
			Spec:       examplev1.EnvoySpec{XDS: &examplev1.XDS{Host: "xds", Port: 1}},
		}
		tt.mutate(e)
		err := suite.Client.Create(ctx, e)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: got %v, want an Invalid error naming %s", tt.name, err, tt.field)
		}
	}
	// metadata.name must be usable as the Service name when spec.name is not set.
	bad := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "1fleet", Namespace: ns}}
	if err := suite.Client.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("got %v, want an Invalid error naming metadata.name", err)
	}
}
