package envoy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"os"
	"path/filepath"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

var suite testenv.Suite

// ca is the suite's xDS certificate authority, made and rotated by the
// production Rotator in the operator's namespace.
var ca *authority.Store

// caNamespace stands for the operator's namespace.
const caNamespace = "default"

// testPKI: a new CA signs three seconds after it is trusted, so that a
// rotation completes within a test.
var testPKI = pki.Options{TrustDomain: "cluster.local", CAValidity: 30 * 24 * time.Hour, CertValidity: 24 * time.Hour, Propagation: 3 * time.Second}

func TestMain(m *testing.M) {
	suite.MainWith(m, func(mgr ctrl.Manager) testenv.Controller {
		var err error
		if ca, err = authority.Add(mgr, authority.Config{Namespace: caNamespace, Options: testPKI, Hosts: []string{"builtin.svc"}}); err != nil {
			panic(err)
		}
		return NewReconciler(mgr, builtin, ca)
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

// settled waits until the Envoy's status describes its current generation.
func settled(t *testing.T, e *examplev1.Envoy) *examplev1.Envoy {
	t.Helper()
	return testenv.WaitSettled(t, suite.Client, e.DeepCopy(), func(e *examplev1.Envoy) bool { return e.Status.BootstrapHash != "" })
}

func TestSeedSampleCreatesFleet(t *testing.T) {
	ns := suite.Namespace(t)
	e := applySample(t, ns)

	cm := testenv.WaitFor(t, suite.Client, ns, "envoy-cfg-1", &corev1.ConfigMap{}, nil)
	b, err := proxy.ParseBootstrap([]byte(cm.Data["envoy.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's bootstrap does not pass Envoy's schema: %v", err)
	}
	if got := b.GetStaticResources().GetClusters()[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress(); got.GetAddress() != "xds-service.default" || got.GetPortValue() != 19000 {
		t.Errorf("xds cluster = %v", got)
	}
	d := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, nil)
	svc := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &corev1.Service{}, nil)
	for _, obj := range []client.Object{cm, d, svc} {
		if !metav1.IsControlledBy(obj, e) {
			t.Errorf("%T %s is not controlled by the Envoy", obj, obj.GetName())
		}
	}
	if *d.Spec.Replicas != 3 || svc.Spec.Selector["app.kubernetes.io/instance"] != "edge-envoy" {
		t.Errorf("replicas %d, service selector %v", *d.Spec.Replicas, svc.Spec.Selector)
	}
	got := settled(t, e)
	if got.Status.BootstrapHash != proxy.Hash([]byte(cm.Data["envoy.yaml"])) ||
		d.Spec.Template.Annotations[fleet.BootstrapHashAnnotation] != got.Status.BootstrapHash {
		t.Errorf("bootstrap hash: status %s, pod template %s", got.Status.BootstrapHash, d.Spec.Template.Annotations[fleet.BootstrapHashAnnotation])
	}
	if got.Status.XDSServer != "xds-service.default:19000" {
		t.Errorf("status.xdsServer = %q", got.Status.XDSServer)
	}

	suite.PlayDeploymentController(t, d)
	testenv.WaitFor(t, suite.Client, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool {
		return e.Status.AvailableReplicas == 3 && e.Status.ReadyReplicas == 3 && e.Status.Replicas == 3 && conditions.IsTrue(e.Status.Conditions, examplev1.EnvoyConditionAvailable)
	})

	// The first children are told of by the status; a child made again by an event.
	suite.CreatedAgain(t, e, svc, `Normal Created Created Service "webserver-beta"`)
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
	if *got.Spec.Replicas != 1 || got.Spec.Image != fleet.DefaultImage || got.Spec.LogLevel != "info" ||
		len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 || got.Spec.ServiceType != corev1.ServiceTypeClusterIP {
		t.Errorf("defaults = %+v", got.Spec)
	}
	testenv.WaitFor(t, suite.Client, ns, "plain-bootstrap", &corev1.ConfigMap{}, nil)
	testenv.WaitFor(t, suite.Client, ns, "plain", &corev1.Service{}, nil)
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
	cm := testenv.WaitFor(t, suite.Client, ns, "envoy-cfg-1", &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) bool {
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
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations[fleet.BootstrapHashAnnotation] == hash
	})
	testenv.WaitFor(t, suite.Client, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool { return e.Status.BootstrapHash == hash })
}

func TestScaleSubresource(t *testing.T) {
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)
	scaleTo(t, e, 5)
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 5 })
}

// Zero proxies is a number like any other: kubectl scale envoy
// --replicas=0, and spec.replicas: 0, reach the Deployment, and a fleet of
// none settles.
func TestScaleToZero(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)
	zero := func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 }

	scaleTo(t, e, 0)
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, zero)
	// A fleet that can have no two proxies has no budget.
	testenv.WaitGone(t, suite.Client, ns, "webserver-beta", &policyv1.PodDisruptionBudget{})

	for _, n := range []int32{2, 0} {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
		if err := suite.Client.Patch(ctx, e, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == n })
	}
	got := testenv.WaitSettled(t, suite.Client, e.DeepCopy(), func(e *examplev1.Envoy) bool { return *e.Spec.Replicas == 0 })
	suite.ExpectNoWrites(t, ControllerName, got, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, zero)
}

// scaleTo sets e's replicas through its scale subresource, as kubectl scale
// and a HorizontalPodAutoscaler do.
func scaleTo(t *testing.T, e *examplev1.Envoy, n int32) {
	t.Helper()
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if err := suite.Client.SubResource("scale").Update(context.Background(), e, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
}

func TestRestoresChildren(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)

	cm := testenv.WaitFor(t, suite.Client, ns, "envoy-cfg-1", &corev1.ConfigMap{}, nil)
	want := cm.Data["envoy.yaml"]
	cm.Data["envoy.yaml"] = "tampered"
	cm.Data["extra"] = "x"
	if err := suite.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "envoy-cfg-1", &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) bool {
		return cm.Data["envoy.yaml"] == want && len(cm.Data) == 1
	})

	svc := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &corev1.Service{}, nil)
	svc.Spec.Selector = map[string]string{"app": "elsewhere"}
	if err := suite.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &corev1.Service{}, func(s *corev1.Service) bool {
		return s.Spec.Selector["app.kubernetes.io/instance"] == "edge-envoy" && s.Spec.Selector["app"] == ""
	})

	d := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, nil)
	if err := suite.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, func(n *appsv1.Deployment) bool { return n.UID != d.UID })
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
	d := testenv.WaitFor(t, suite.Client, ns, "webserver-gamma", &appsv1.Deployment{}, nil)
	testenv.WaitFor(t, suite.Client, ns, "webserver-gamma", &corev1.Service{}, nil)
	testenv.WaitFor(t, suite.Client, ns, "envoy-cfg-2", &corev1.ConfigMap{}, nil)
	if v := d.Spec.Template.Spec.Volumes[0].ConfigMap.Name; v != "envoy-cfg-2" {
		t.Errorf("pods mount %s", v)
	}
	testenv.WaitGone(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{})
	testenv.WaitGone(t, suite.Client, ns, "webserver-beta", &corev1.Service{})
	testenv.WaitGone(t, suite.Client, ns, "envoy-cfg-1", &corev1.ConfigMap{})
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
	suite.WaitEvent(t, ns, e.Name, `Warning ErrResourceExists Service "webserver-beta" already exists and is not managed by Envoy "edge-envoy"`)
	got := settled(t, e)
	if c := testenv.Condition(got, examplev1.EnvoyConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != examplev1.EnvoyReasonErrResourceExists {
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
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, nil)
}

// A reconcile that finds everything as desired sends no write request.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	d := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, nil)
	suite.PlayDeploymentController(t, d)
	testenv.WaitFor(t, suite.Client, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool { return e.Status.AvailableReplicas == 3 })
	suite.ExpectNoWrites(t, ControllerName, e, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
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
		}, "targetPort 19000 and 19001 are reserved"},
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

// A Service the API server refuses (an admission policy here; a quota alike)
// is reported as Degraded, retried with backoff, and created once admitted.
func TestRefusedServiceIsDegraded(t *testing.T) {
	ns := suite.Namespace(t)
	testenv.TestRefusal(t, &suite, testenv.Refusal[*examplev1.Envoy]{
		Controller: ControllerName,
		Object: &examplev1.Envoy{
			ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: ns},
			Spec:       examplev1.EnvoySpec{Replicas: ptr.To[int32](1), XDS: &examplev1.XDS{Host: "xds", Port: 18000}},
		},
		Probe:    testenv.ServiceProbe(ns),
		Resource: "services",
		Change:   func(e *examplev1.Envoy) { e.Spec.Replicas = ptr.To[int32](2) },
		Recovered: func(e *examplev1.Envoy) bool {
			return testenv.Condition(e, examplev1.EnvoyConditionProgressing).Reason == examplev1.EnvoyReasonRollingOut
		},
	})
}

// A fleet of two proxies or more gets a disruption budget, kept as its spec
// says; a fleet that shrinks to one loses it, unless its spec asks for one.
func TestDisruptionBudgetFollowsSpec(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns) // three proxies
	pdb := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &policyv1.PodDisruptionBudget{}, nil)
	if !metav1.IsControlledBy(pdb, e) || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
		pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "edge-envoy" || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("budget = %+v", pdb.Spec)
	}
	settled(t, e)
	suite.ExpectNoWrites(t, ControllerName, e, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})

	// Edited by hand: put back, the other bound removed.
	pdb.Spec.MaxUnavailable = nil
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(3))
	if err := suite.Client.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &policyv1.PodDisruptionBudget{}, func(p *policyv1.PodDisruptionBudget) bool {
		return p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable != nil && p.Spec.MaxUnavailable.IntValue() == 1
	})

	scaleTo(t, e, 1)
	testenv.WaitGone(t, suite.Client, ns, "webserver-beta", &policyv1.PodDisruptionBudget{})

	// Asked for, a one-proxy fleet gets the spec's budget.
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.PodDisruptionBudget = &examplev1.EnvoyDisruptionBudget{MinAvailable: ptr.To(intstr.FromString("100%"))}
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &policyv1.PodDisruptionBudget{}, func(p *policyv1.PodDisruptionBudget) bool {
		return p.DeletionTimestamp == nil && p.Spec.MinAvailable != nil && p.Spec.MinAvailable.String() == "100%" && p.Spec.MaxUnavailable == nil
	})
	got := settled(t, e)
	suite.ExpectNoWrites(t, ControllerName, got, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
}

// spec.autoscaling renders an autoscaler of the Envoy. The autoscaler
// writes spec.replicas through the Envoy's scale subresource; the operator
// follows it with the Deployment and never writes it back: each change of
// the autoscaler settles, and a settled fleet costs no write. Envtest runs
// no kube-controller-manager: the test writes the scale subresource as its
// autoscaler does.
func TestAutoscalerNeverFought(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: examplev1.EnvoySpec{
			XDS:         &examplev1.XDS{Host: "xds", Port: 18000},
			Resources:   corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			Autoscaling: &examplev1.EnvoyAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6},
		},
	}
	if err := suite.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	hpa := testenv.WaitFor(t, suite.Client, ns, "scaled", &autoscalingv2.HorizontalPodAutoscaler{}, nil)
	if !metav1.IsControlledBy(hpa, e) || hpa.Spec.ScaleTargetRef.Kind != "Envoy" || hpa.Spec.ScaleTargetRef.Name != "scaled" ||
		*hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 6 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 {
		t.Errorf("autoscaler = %+v", hpa.Spec)
	}
	// A budget comes with the autoscaler's maximum of six.
	testenv.WaitFor(t, suite.Client, ns, "scaled", &policyv1.PodDisruptionBudget{}, nil)

	for _, n := range []int32{2, 5, 3} {
		// What the autoscaler does: update the scale subresource, and its
		// own status (which the operator watches).
		scaleTo(t, e, n)
		hpa := testenv.WaitFor(t, suite.Client, ns, "scaled", &autoscalingv2.HorizontalPodAutoscaler{}, nil)
		hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: n, DesiredReplicas: n}
		if err := suite.Client.Status().Update(ctx, hpa); err != nil {
			t.Fatal(err)
		}
		d := testenv.WaitFor(t, suite.Client, ns, "scaled", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == n })
		suite.PlayDeploymentController(t, d)
		got := testenv.WaitSettled(t, suite.Client, e.DeepCopy(), func(e *examplev1.Envoy) bool {
			return e.Status.Replicas == n && e.Status.AvailableReplicas == n && conditions.IsTrue(e.Status.Conditions, examplev1.EnvoyConditionAvailable)
		})
		if *got.Spec.Replicas != n {
			t.Fatalf("spec.replicas = %d, the autoscaler's %d was written over", *got.Spec.Replicas, n)
		}
		suite.ExpectNoWrites(t, ControllerName, got, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
	}

	// Without spec.autoscaling, the autoscaler goes.
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.Autoscaling = nil
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, suite.Client, ns, "scaled", &autoscalingv2.HorizontalPodAutoscaler{})
}

// A new operator process (an upgrade to a build that renders the same, or a
// restart) writes nothing to fleets that are settled: it starts with empty
// caches, reads every child afresh and finds them as it would render them.
func TestNewOperatorWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	seed := applySample(t, ns)
	full := &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "production", Namespace: ns},
		Spec: examplev1.EnvoySpec{
			Replicas:                      ptr.To[int32](4),
			DrainSeconds:                  ptr.To[int32](30),
			TerminationGracePeriodSeconds: ptr.To[int64](60),
			PodDisruptionBudget:           &examplev1.EnvoyDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("25%"))},
			TopologySpreadConstraints: []examplev1.EnvoySpreadConstraint{
				{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: ptr.To[int32](2)},
			},
			Autoscaling: &examplev1.EnvoyAutoscaling{MaxReplicas: 8},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
		},
	}
	if err := suite.Client.Create(ctx, full); err != nil {
		t.Fatal(err)
	}
	fleets := []*examplev1.Envoy{settled(t, seed), settled(t, full)}
	testenv.WaitFor(t, suite.Client, ns, "production", &autoscalingv2.HorizontalPodAutoscaler{}, nil)
	testenv.WaitFor(t, suite.Client, ns, "production-xds-client", &corev1.Secret{}, nil)
	suite.Quiet(t)

	var writes testenv.RequestCounter
	mgr, err := manager.New(writes.Wrap(suite.Manager.GetConfig()), manager.Options{MetricsAddr: "0", PanicOnReconcilePanic: true, SkipControllerNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	store := &authority.Store{Reader: mgr.GetClient(), Key: ca.Key, Options: ca.Options, Hosts: ca.Hosts}
	r := NewReconciler(mgr, builtin, store)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the new operator's cache did not sync")
	}
	// Its own reconciles run as the manager starts; these are more of them,
	// on caches that have synced, and the window counts what any sent.
	for _, e := range fleets {
		for range 3 {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	testenv.Consistently(t, testenv.SettledWindow, func() error {
		if w := writes.WritesTo("/namespaces/" + ns + "/"); len(w) != 0 {
			return fmt.Errorf("a new operator sent %d write requests to settled fleets: %v", len(w), w)
		}
		return nil
	})
}

// A Deployment paused by hand (kubectl rollout pause) stays paused: the
// operator writes its new template, and the pods roll when it is resumed.
func TestPausedDeploymentStaysPaused(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := applySample(t, ns)
	settled(t, e)
	d := testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, nil)
	d.Spec.Paused = true
	if err := suite.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.DrainSeconds = ptr.To[int32](20)
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	d = testenv.WaitFor(t, suite.Client, ns, "webserver-beta", &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
		return *d.Spec.Template.Spec.TerminationGracePeriodSeconds == 35
	})
	if !d.Spec.Paused {
		t.Error("the operator resumed a paused Deployment")
	}
}
