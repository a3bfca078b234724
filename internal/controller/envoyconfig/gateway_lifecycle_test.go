package envoyconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	envoyctrl "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	gwctrl "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// renderedGateway creates the Gateway edge in ns, of this operator's class,
// with one HTTP listener on port 80, and the fleet the Gateway controller
// (which does not run here) renders for it from template: the Envoy the
// Gateway controls. It returns the Gateway, the Envoy and the fleet's id.
func renderedGateway(t *testing.T, ns string, template *examplev1.Envoy) (*gwv1.Gateway, *examplev1.Envoy, string) {
	t.Helper()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(gatewayClass(t)), Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	}
	create(t, gw)
	e := gwctrl.Fleet(gw, template)
	create(t, e)
	// The Service the Envoy controller would make, with a load-balancer
	// address: a Gateway is programmed only with an address.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.Name, Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "gw-80", Port: 80, TargetPort: intstr.FromInt32(10080)}}},
	}
	create(t, svc)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.1.0.8"}}
	if err := suite.Client.Status().Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	return gw, e, ns + "/" + e.Name
}

// untilClusters has the proxy take responses until one's clusters satisfy
// cond, and returns that response's version and names.
func untilClusters(t *testing.T, p *xdstest.Proxy, what string, cond func([]string) bool) (string, []string) {
	t.Helper()
	for range 5 {
		if v, names := clusterNames(t, p, ""); cond(names) {
			return v, names
		}
	}
	t.Fatalf("no response in five with %s", what)
	return "", nil
}

func hasClusterOf(backend string) func([]string) bool {
	return func(names []string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, backend) })
	}
}

// A route change of a Gateway whose class's Envoy template has a rollout
// policy (one proxy, then all, each step baking an hour) rolls out in
// steps: the first step's proxy alone is served the change while the
// others keep the previous version; promoted by hand, every proxy gets it.
// The Gateway's Programmed says where the rollout stands, in the words of
// an EnvoyConfig's Published: not programmed while it rolls out, then
// programmed when every proxy acknowledged the new version.
func TestGatewayRouteChangeRollsOutInSteps(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	backend(t, ns, "blue")
	backend(t, ns, "green")
	rt := httpRoute(ns, "app", "app.example.com", "blue")
	create(t, rt)
	template := &examplev1.Envoy{Spec: examplev1.EnvoySpec{ConfigRollout: &examplev1.EnvoyConfigRollout{
		Steps: []examplev1.EnvoyConfigRolloutStep{{Proxies: ptr.To[int32](1)}}, BakeSeconds: ptr.To[int32](3600),
	}}}
	gw, e, fleetID := renderedGateway(t, ns, template)
	if e.Spec.ConfigRollout == nil || len(e.Spec.ConfigRollout.Steps) != 1 {
		t.Fatalf("the rendered fleet's configRollout = %+v, want the template's", e.Spec.ConfigRollout)
	}
	routeParent(t, rt, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, ""))

	nodes, proxies := connectProxies(t, fleetID, 3, overTLS(t, fleetID))
	var v1 string
	for _, node := range nodes {
		v1, _ = untilClusters(t, proxies[node], "the blue backend's cluster", hasClusterOf("blue"))
	}
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions)
	})

	// The route now sends its traffic to green.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
		t.Fatal(err)
	}
	rt.Spec.Rules[0].BackendRefs[0].Name = "green"
	if err := suite.Client.Update(ctx, rt); err != nil {
		t.Fatal(err)
	}
	first := publish.SelectProxies([]publish.RolloutStep{{Proxies: 1}}, 0, nodes)[0]
	v2, names := clusterNames(t, proxies[first], "")
	if v2 == v1 || !hasClusterOf("green")(names) || hasClusterOf("blue")(names) {
		t.Fatalf("the first step's proxy %s was sent %s %v, want a new version with green's cluster alone", first, v2, names)
	}
	id := fleet.ID{Namespace: ns, Name: e.Name}
	baking := readHistory(t, id, "the first step to bake", func(h publish.History) bool {
		return h.Rollout != nil && h.Rollout.Phase == publish.RolloutProgressing && h.Rollout.Cut != ""
	})
	rev, prev := baking.Rollout.Revision, baking.Rollout.Previous
	// While the step bakes, the other proxies keep the previous version,
	// and the Gateway is not programmed: the rollout's words say why.
	// (The proxies' count comes from the replicas' reports, which may
	// follow the step's start.)
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		c := meta.FindStatusCondition(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(gwv1.GatewayReasonPending) &&
			strings.Contains(c.Message, "rolling out as version "+rev) && strings.Contains(c.Message, "served to 1 of 3 connected proxies") &&
			strings.Contains(c.Message, "the others keep version "+prev)
	})
	for node, sent := range sentClusters(fleetID) {
		if want := map[bool]string{true: v2, false: v1}[node == first]; sent != want {
			t.Errorf("while the first step bakes, proxy %s was last sent %s, want %s", node, sent, want)
		}
	}

	// Promoted by hand (as an operator would, or the bake's end), every
	// proxy is served the change.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(e), e); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(e.DeepCopy())
	metav1.SetMetaDataAnnotation(&e.ObjectMeta, examplev1.RolloutPromoteAnnotation, fmt.Sprintf("%s/%d", rev, baking.Rollout.Step+1))
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		if node == first {
			continue
		}
		if v, names := clusterNames(t, proxies[node], ""); v != v2 || !hasClusterOf("green")(names) {
			t.Fatalf("after the promotion %s was sent %s %v, want %s", node, v, names, v2)
		}
	}
	got := waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayConditionProgrammed)); !strings.Contains(c.Message, "every connected proxy (3) acknowledged version "+rev) {
		t.Errorf("Programmed = %+v", c)
	}
	readHistory(t, id, "the rollout to complete", func(h publish.History) bool {
		return h.Current == rev && (h.Rollout == nil || h.Rollout.Phase == publish.RolloutComplete)
	})
	suite.WaitEvent(t, ns, e.Name, "Normal RolloutCompleted")
}

// isControllerRef reports whether refs hold the controller reference to
// owner (its kind and UID) that has the garbage collector delete the
// dependent, foreground deletions wait for it.
func isControllerRef(refs []metav1.OwnerReference, kind string, owner types.UID) bool {
	c := metav1.OwnerReference{}
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			c = r
		}
	}
	return c.Kind == kind && c.UID == owner && c.BlockOwnerDeletion != nil && *c.BlockOwnerDeletion
}

// A Gateway deleted while its fleet serves its route: the operator stops
// building the Gateway's Config, so the fleet is served no listener nor
// route of it, and writes the route's status for it no more. The Envoy the
// Gateway controls, and the Envoy's children, carry the controller
// reference that has a cluster's garbage collector delete them; envtest
// runs no garbage collector (no kube-controller-manager), so the test
// deletes the Envoy as it would. Then the operator's own leftovers go: the
// fleet's history in the operator's namespace, which nothing owns, and
// what the xDS server serves the fleet.
//
// What a real cluster adds that envtest cannot show: the garbage collector
// deleting the Envoy once its Gateway is gone (or before it, in a
// foreground deletion, which blockOwnerDeletion makes wait), and then the
// Envoy's Deployment, Service, bootstrap ConfigMap and client certificate
// Secret, whose controller references are asserted here.
func TestGatewayDeletedWhileServing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	backend(t, ns, "blue")
	rt := httpRoute(ns, "app", "app.example.com", "blue")
	create(t, rt)
	gw, e, fleetID := renderedGateway(t, ns, nil)
	id := fleet.ID{Namespace: ns, Name: e.Name}
	if !isControllerRef(e.OwnerReferences, "Gateway", gw.UID) {
		t.Errorf("the fleet's Envoy has ownerReferences %+v, want the Gateway as its controller, blocking its deletion", e.OwnerReferences)
	}
	// The children the Envoy controller (which does not run here) makes of
	// it are its, likewise; the client certificate Secret has the same
	// metadata (objectMeta).
	children, err := envoyctrl.Desired(e, fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "builtin.svc", Port: 18000, MutualTLS: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{children.Deployment, children.Service, children.ConfigMap} {
		if !isControllerRef(o.GetOwnerReferences(), "Envoy", e.UID) {
			t.Errorf("the fleet's %T %s has ownerReferences %+v, want the Envoy as its controller", o, o.GetName(), o.GetOwnerReferences())
		}
	}

	before := routeParent(t, rt, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, ""))
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	untilClusters(t, p, "the blue backend's cluster", hasClusterOf("blue"))
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions)
	})
	readHistory(t, id, "the Gateway's content recorded", func(h publish.History) bool { return h.Current != "" })

	if err := suite.Client.Delete(ctx, gw, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Gateway to be gone", func() (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(gw), &gwv1.Gateway{})
		return apierrors.IsNotFound(err), err
	})
	// The fleet is served without the Gateway's listener, route and backend.
	testenv.Eventually(t, "the fleet to stop serving the Gateway", func() (bool, error) {
		rs := xdsServer.Resources(fleetID)
		return len(rs[resourcev3.ListenerType]) == 0 && len(servedHosts(t, fleetID)) == 0,
			fmt.Errorf("listeners %d, hosts %v", len(rs[resourcev3.ListenerType]), servedHosts(t, fleetID))
	})
	untilClusters(t, p, "no cluster of the gone Gateway", func(names []string) bool { return !hasClusterOf("blue")(names) })
	// The route's entry for the gone Gateway is not written again. (The
	// operator writes a route's parent status only while it builds the
	// Gateway's Config; the entry stays as last written.)
	testenv.Consistently(t, 2*time.Second, func() error {
		now := &gwv1.HTTPRoute{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(rt), now); err != nil {
			return err
		}
		for _, p := range now.Status.Parents {
			if p.ControllerName == before.ControllerName && p.ParentRef.Name == "edge" && !equality.Semantic.DeepEqual(p, before) {
				return fmt.Errorf("the entry for the gone Gateway was written again: %+v, was %+v", p, before)
			}
		}
		return nil
	})

	// The garbage collector's part: the Envoy goes.
	if err := suite.Client.Delete(ctx, e, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the fleet's history to be deleted", func() (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: history.Name(id)}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), err
	})
	testenv.Eventually(t, "the xDS server to forget the fleet", func() (bool, error) {
		rs := xdsServer.Resources(fleetID)
		n := 0
		for _, r := range rs {
			n += len(r)
		}
		return n == 0, fmt.Errorf("still served %d resources", n)
	})
}
