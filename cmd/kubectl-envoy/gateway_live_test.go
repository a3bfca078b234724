package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// clusterAdmin is a kubeconfig of a ServiceAccount of ns bound to the
// ClusterRole cluster-admin, with ns as its context's namespace: a
// platform team's, who may read the Gateway API objects of every namespace.
func clusterAdmin(t *testing.T, ns string) string {
	t.Helper()
	kubeconfig := user(t, ns, "platform")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-platform"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "platform", Namespace: ns}}}
	if err := suite.Client.Create(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), binding) })
	return kubeconfig
}

// A Gateway of this operator's class with its fleet, and a route to a
// Service with endpoints, served to a connected proxy that accepted them:
// proxy-status shows the proxy for the Gateway and for the route; diff of
// a route edit shows what the fleet would be served, and is exactly what
// the operator serves once it is applied.
func TestGatewayLive(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fleetID := ns + "/edge"

	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "kec-" + ns}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	if err := suite.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), class) })
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gwv1.ObjectName(class.Name),
		Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
	}}
	if err := suite.Client.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	// The fleet the Gateway controller makes: an Envoy named after the
	// Gateway, controlled by it.
	envoy := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gateway.FleetName(gw.Name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID, Controller: ptr.To(true)}}},
		Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1)}}
	route := &gwv1.HTTPRoute{}
	routeYAML := fmt.Sprintf(strings.Replace(webRoute, "metadata: {name: web}", "metadata: {name: web, namespace: %s}", 1), ns)
	if err := yamlUnmarshal(routeYAML, route); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		envoy, route,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}},
	} {
		if err := suite.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, suite.Client, ns, "web", &gwv1.HTTPRoute{}, func(rt *gwv1.HTTPRoute) bool {
		for _, p := range rt.Status.Parents {
			if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); p.ControllerName == gateway.ControllerName && c != nil && c.Status == metav1.ConditionTrue {
				return true
			}
		}
		return false
	})

	// A proxy of the fleet takes its clusters and accepts them.
	addr, err := xdsServer.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy := xdstest.Connect(t, xdstest.Dial(t, addr.String()), fleetID, "edge-pod-1", resourcev3.ClusterType)
	for names := []string(nil); len(names) == 0; {
		if _, names, err = proxy.NextNames(""); err != nil {
			t.Fatal(err)
		}
	}
	admin := clusterAdmin(t, ns)
	operator := operatorAddress(t)
	args := func(more ...string) []string {
		return append([]string{"--kubeconfig", admin, "--operator-address", operator}, more...)
	}
	var status string
	testenv.Eventually(t, "proxy-status of the Gateway to show the proxy SYNCED", func() (bool, error) {
		code, stdout, stderr := runPlugin(t, "", args("proxy-status", "gateway/edge")...)
		status = stdout
		return code == 0 && strings.Contains(stdout, " SYNCED "), fmt.Errorf("exit %d, %q, stderr %q", code, stdout, stderr)
	})

	t.Run("proxy-status of the Gateway: its fleet, then its proxies", func(t *testing.T) {
		lines := strings.Split(status, "\n")
		if len(lines) != 5 || lines[0] != fmt.Sprintf("Gateway %s/edge, fleet %s", ns, fleetID) || lines[1] != "" ||
			!strings.HasPrefix(lines[2], "NODE ") || !strings.HasPrefix(lines[3], "edge-pod-1 ") || !strings.Contains(lines[3], " "+fleetID+" ") || lines[4] != "" {
			t.Errorf("%q", status)
		}
	})

	t.Run("proxy-status of the route: its Gateway, then the proxies of its fleet", func(t *testing.T) {
		code, stdout, stderr := runPlugin(t, "", args("proxy-status", "httproute/web")...)
		lines := strings.Split(stdout, "\n")
		if code != 0 || stderr != "" || len(lines) != 5 || lines[0] != fmt.Sprintf("HTTPRoute %s/web: Gateway %s/edge, Accepted, fleet %s", ns, ns, fleetID) ||
			!strings.HasPrefix(lines[3], "edge-pod-1 ") || !strings.Contains(lines[3], " SYNCED ") {
			t.Errorf("exit %d, %q, stderr %q", code, stdout, stderr)
		}
		code, stdout, stderr = runPlugin(t, "", args("proxy-status", "httproutes.gateway.networking.k8s.io/web", "-o", "json")...)
		var got struct {
			Attachments []attachment
			Proxies     []debug.ProxyRow
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
			t.Fatalf("exit %d, %v: %q, stderr %q", code, err, stdout, stderr)
		}
		want := attachment{Route: "HTTPRoute " + ns + "/web", Gateway: ns + "/edge", Accepted: "True", Reason: "Accepted", Fleet: fleetID}
		if len(got.Attachments) != 1 || got.Attachments[0].Route != want.Route || got.Attachments[0].Gateway != want.Gateway ||
			got.Attachments[0].Accepted != want.Accepted || got.Attachments[0].Fleet != want.Fleet ||
			len(got.Proxies) != 1 || got.Proxies[0].Node != "edge-pod-1" || got.Proxies[0].State != debug.Synced {
			t.Errorf("%+v", got)
		}
	})

	t.Run("proxy-status of a Gateway without a fleet, and of a route attached to none", func(t *testing.T) {
		lone := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lone"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "another", Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
		if err := suite.Client.Create(ctx, lone); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runPlugin(t, "", args("proxy-status", "gateway/lone")...)
		if want := fmt.Sprintf("error: Gateway %s/lone has no fleet: no Envoy %[1]s/lone: the Gateway's class (another) is not served by kube-envoy-controller", ns); code != 1 || !strings.HasPrefix(stderr, want) {
			t.Errorf("exit %d, %q, stderr %q, want %q", code, stdout, stderr, want)
		}
		stray := &gwv1.HTTPRoute{}
		if err := yamlUnmarshal(strings.NewReplacer("name: web}", "name: stray, namespace: "+ns+"}", "{name: edge}", "{name: lone}").Replace(webRoute), stray); err != nil {
			t.Fatal(err)
		}
		if err := suite.Client.Create(ctx, stray); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr = runPlugin(t, "", args("proxy-status", "httproute/stray")...)
		if want := fmt.Sprintf("HTTPRoute %s/stray is attached to no Gateway of %s (its status.parents)\n\n", ns, gateway.ControllerName); code != 0 || stdout != want || stderr != "" {
			t.Errorf("exit %d, %q, stderr %q, want %q", code, stdout, stderr, want)
		}
	})

	t.Run("diff of a route edit: what the Gateway's fleet would be served, which the operator then serves", func(t *testing.T) {
		served := xdsServer.Version(fleetID)
		edited := strings.Replace(routeYAML, "/app", "/v2", 1)
		files := writeFiles(t, map[string]string{"route.yaml": edited})
		code, stdout, stderr := runPlugin(t, "", args("diff", "-f", files)...)
		for _, want := range []string{
			fmt.Sprintf("fleet %s: version %s -> ", fleetID, served[:versionWidth]),
			"  routes: 1 changed\n    ~ " + ns + "/edge/80\n",
			fmt.Sprintf(`.routes[name=HTTPRoute/%s/web/rule/0/match/0].match.path_separated_prefix: "/app" -> "/v2"`, ns),
		} {
			if code != exitChanges || stderr != "" || !strings.Contains(stdout, want) {
				t.Errorf("exit %d, stderr %q, want %d and %q in:\n%s", code, stderr, exitChanges, want, stdout)
			}
		}
		code, stdout, _ = runPlugin(t, "", args("diff", "-f", files, "-o", "json")...)
		var report diffReport
		if err := json.Unmarshal([]byte(stdout), &report); err != nil || code != exitChanges || len(report.Fleets) != 1 {
			t.Fatalf("exit %d, %v: %s", code, err, stdout)
		}
		if f := report.Fleets[0]; f.Version != served || f.NewVersion == served || f.NewVersion == "" {
			t.Fatalf("%+v", f)
		}
		// Nothing was written: the route is as it was.
		live := &gwv1.HTTPRoute{}
		if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, live); err != nil || live.Spec.Rules[0].Matches[0].Path.Value == nil || *live.Spec.Rules[0].Matches[0].Path.Value != "/app" {
			t.Fatalf("diff changed the route: %+v, %v", live.Spec, err)
		}
		// Applied, the edit is served in the version diff predicted: the
		// same content, to the byte of its hash.
		live.Spec.Rules[0].Matches[0].Path.Value = ptr.To("/v2")
		if err := suite.Client.Update(ctx, live); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "version "+report.Fleets[0].NewVersion+" of "+fleetID, func() (bool, error) {
			return xdsServer.Version(fleetID) == report.Fleets[0].NewVersion, fmt.Errorf("serving %q", xdsServer.Version(fleetID))
		})
		code, stdout, stderr = runPlugin(t, "", args("diff", "-f", files)...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "no change to what its proxies are served") {
			t.Errorf("once applied: exit %d, %q, stderr %q", code, stdout, stderr)
		}
	})

	t.Run("a route's author, who may read only their namespace, is told what is left out, and sees the same diff", func(t *testing.T) {
		author := tenant(t, ns, "author")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "route-author"}, Rules: []rbacv1.PolicyRule{
			rule(gwv1.GroupName, "httproutes", "get", "list", "update"), rule(gwv1.GroupName, "grpcroutes", "list"),
			rule(gwv1.GroupName, "referencegrants", "list"), rule(gwv1.GroupName, "gateways", "get"), rule("", "services", "get"),
		}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "route-author"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "author", Namespace: ns}}}
		for _, o := range []client.Object{role, binding} {
			if err := suite.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		files := writeFiles(t, map[string]string{"route.yaml": strings.Replace(routeYAML, "/app", "/author", 1)})
		code, theirs, stderr := runPlugin(t, "", "diff", "--kubeconfig", author, "--operator-address", operator, "-f", files, "-o", "json")
		for _, want := range []string{
			"warning: HTTPRoutes are read in namespaces [" + ns + "] only: ",
			"warning: ReferenceGrants are read in namespaces [" + ns + "] only: ",
			"warning: the namespaces' labels, which listeners select routes by, are left out: ",
			"warning: GatewayClass " + class.Name + " is taken to be served by " + string(gateway.ControllerName) + ": ",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
		}
		_, ours, _ := runPlugin(t, "", args("diff", "-f", files, "-o", "json")...)
		if code != exitChanges || theirs != ours {
			t.Errorf("exit %d; the author's diff:\n%s\nthe platform team's:\n%s", code, theirs, ours)
		}
	})

	t.Run("diff of a route the API server would refuse", func(t *testing.T) {
		bad := strings.Replace(routeYAML, "type: PathPrefix", "type: Sideways", 1)
		code, stdout, stderr := runPlugin(t, "", args("diff", "-f", writeFiles(t, map[string]string{"route.yaml": bad}))...)
		if code != exitRefused || !strings.Contains(stdout, "HTTPRoute "+ns+"/web: ") || !strings.Contains(stdout, "Unsupported value: \"Sideways\"") {
			t.Errorf("exit %d, %q, stderr %q", code, stdout, stderr)
		}
	})
}

// yamlUnmarshal decodes content into o strictly.
func yamlUnmarshal(content string, o any) error { return yaml.UnmarshalStrict([]byte(content), o) }
