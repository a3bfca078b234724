package gateway

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.GatewayAPI = true
	suite.MainWith(m, func(mgr ctrl.Manager) testenv.Controller { return NewReconciler(mgr) })
}

func newClass(t *testing.T, controller gwv1.GatewayController, params *gwv1.ParametersReference) *gwv1.GatewayClass {
	t.Helper()
	c := &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kec-"},
		Spec:       gwv1.GatewayClassSpec{ControllerName: controller, ParametersRef: params},
	}
	if err := suite.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), c) })
	return c
}

func newGateway(t *testing.T, ns, class string, ports ...gwv1.PortNumber) *gwv1.Gateway {
	t.Helper()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec:       gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class)},
	}
	for i, p := range ports {
		name := "l" + string(rune('a'+i))
		gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{
			Name: gwv1.SectionName(name), Port: p, Protocol: gwv1.HTTPProtocolType, Hostname: ptr.To(gwv1.Hostname(name + ".example.com")),
		})
	}
	if err := suite.Client.Create(context.Background(), gw); err != nil {
		t.Fatal(err)
	}
	return gw
}

// waitClass waits until the class's status has a condition typ with status.
func waitClass(t *testing.T, name, typ string, status metav1.ConditionStatus) *gwv1.GatewayClass {
	t.Helper()
	return testenv.WaitFor(t, suite.Client, "", name, &gwv1.GatewayClass{}, func(c *gwv1.GatewayClass) bool {
		got := meta.FindStatusCondition(c.Status.Conditions, typ)
		return got != nil && got.Status == status && got.ObservedGeneration == c.Generation
	})
}

func TestClassIsAcceptedWithItsFeatures(t *testing.T) {
	c := newClass(t, gateway.ControllerName, nil)
	got := waitClass(t, c.Name, string(gwv1.GatewayClassConditionStatusAccepted), metav1.ConditionTrue)
	if sv := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayClassConditionStatusSupportedVersion)); sv == nil || sv.Status != metav1.ConditionTrue {
		t.Errorf("SupportedVersion = %+v", sv)
	}
	var features []gwv1.FeatureName
	for _, f := range got.Status.SupportedFeatures {
		features = append(features, f.Name)
	}
	if !slices.Equal(features, gateway.SupportedFeatures) || !slices.Contains(features, "HTTPRoute") {
		t.Errorf("supportedFeatures = %v, want %v", features, gateway.SupportedFeatures)
	}
	// A class of another controller is left alone.
	other := newClass(t, "example.com/other", nil)
	suite.Touch(t, ControllerName+"class", other)
	if err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	for _, c := range other.Status.Conditions {
		if c.Reason != string(gwv1.GatewayClassReasonPending) {
			t.Errorf("another controller's class got condition %+v", c)
		}
	}
}

func TestClassWithMissingTemplateIsNotAccepted(t *testing.T) {
	ns := suite.Namespace(t)
	c := newClass(t, gateway.ControllerName, &gwv1.ParametersReference{
		Group: gwv1.Group(examplev1.GroupVersion.Group), Kind: "Envoy", Name: "template", Namespace: ptr.To(gwv1.Namespace(ns)),
	})
	got := waitClass(t, c.Name, string(gwv1.GatewayClassConditionStatusAccepted), metav1.ConditionFalse)
	if a := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)); a.Reason != string(gwv1.GatewayClassReasonInvalidParameters) ||
		!strings.Contains(a.Message, "Envoy "+ns+"/template, which does not exist") {
		t.Errorf("Accepted = %+v", a)
	}
	// The Envoy appears: the class is accepted.
	tmpl := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "template"}, Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](3)}}
	if err := suite.Client.Create(context.Background(), tmpl); err != nil {
		t.Fatal(err)
	}
	waitClass(t, c.Name, string(gwv1.GatewayClassConditionStatusAccepted), metav1.ConditionTrue)
}

func TestGatewayGetsAFleetFromItsClassTemplate(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tmpl := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "template"},
		Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](3), LogLevel: "debug", ServiceType: corev1.ServiceTypeClusterIP}}
	if err := suite.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	c := newClass(t, gateway.ControllerName, &gwv1.ParametersReference{
		Group: gwv1.Group(examplev1.GroupVersion.Group), Kind: "Envoy", Name: "template", Namespace: ptr.To(gwv1.Namespace(ns)),
	})
	gw := newGateway(t, ns, c.Name, 80, 443, 80, 8080)
	e := testenv.WaitFor(t, suite.Client, ns, gateway.FleetName(gw.Name), &examplev1.Envoy{}, nil)
	if !metav1.IsControlledBy(e, gw) {
		t.Errorf("the fleet is not controlled by its Gateway: %+v", e.OwnerReferences)
	}
	if e.Labels[GatewayNameLabel] != gw.Name {
		t.Errorf("labels = %v", e.Labels)
	}
	if ptr.Deref(e.Spec.Replicas, 0) != 3 || e.Spec.LogLevel != "debug" {
		t.Errorf("the template's settings were not taken: replicas %v, log level %q", e.Spec.Replicas, e.Spec.LogLevel)
	}
	if e.Spec.ServiceType != corev1.ServiceTypeLoadBalancer {
		t.Errorf("service type = %q, want LoadBalancer", e.Spec.ServiceType)
	}
	want := []examplev1.EnvoyPort{{Name: "gw-80", Port: 80, TargetPort: 10080}, {Name: "gw-443", Port: 443, TargetPort: 10443}, {Name: "gw-8080", Port: 8080, TargetPort: 8080}}
	if len(e.Spec.Ports) != len(want) {
		t.Fatalf("ports = %+v, want %+v", e.Spec.Ports, want)
	}
	for i := range want {
		if e.Spec.Ports[i] != want[i] {
			t.Errorf("port %d = %+v, want %+v", i, e.Spec.Ports[i], want[i])
		}
	}
	suite.ExpectNoWrites(t, ControllerName, gw, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: gw.Name}})

	// A listener's port changes: the fleet follows.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
		t.Fatal(err)
	}
	gw.Spec.Listeners = gw.Spec.Listeners[:1]
	if err := suite.Client.Update(ctx, gw); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, e.Name, &examplev1.Envoy{}, func(e *examplev1.Envoy) bool {
		return len(e.Spec.Ports) == 1 && e.Spec.Ports[0].Port == 80
	})
}

func TestGatewayLeavesAForeignEnvoyAlone(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foreign := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](2)}}
	if err := suite.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	c := newClass(t, gateway.ControllerName, nil)
	gw := newGateway(t, ns, c.Name, 80)
	got := testenv.WaitFor(t, suite.Client, ns, gw.Name, &gwv1.Gateway{}, func(g *gwv1.Gateway) bool {
		// The CRD's default is Unknown, "Waiting for controller".
		p := meta.FindStatusCondition(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		return p != nil && p.Status != metav1.ConditionUnknown
	})
	p := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
	if p.Status != metav1.ConditionFalse || !strings.Contains(p.Message, "does not control") || p.ObservedGeneration != got.Generation {
		t.Errorf("Programmed = %+v", p)
	}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatal(err)
	}
	if len(foreign.OwnerReferences) != 0 || foreign.Generation != 1 || *foreign.Spec.Replicas != 2 {
		t.Errorf("the foreign Envoy was changed: %+v", foreign)
	}
}
