package envoyconfig

import (
	"context"
	"fmt"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// servedCertificate returns the certificate chain the fleet is served in
// the SDS secret name.
func servedCertificate(fleetID, name string) string {
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.SecretType] {
		if s := r.(*tlsv3.Secret); s.GetName() == name {
			return string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes())
		}
	}
	return ""
}

// A new certificate in the Secret a Gateway's HTTPS listener names, one
// labelled for the control plane (which the manager's cache holds),
// reaches the fleet at once: the Secret's change queues the Gateway's
// fleet, as it does the fleets of the EnvoyConfigs that name it.
func TestGatewayListenerSecretChangeIsServed(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	secret := tlsSecret(t, ns, "cert", names.XDSSecretTLS, "edge.example.com")
	create(t, secret)
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(gatewayClass(t)), Listeners: []gwv1.Listener{{
			Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
			TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}},
		}}},
	}
	create(t, gw)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gateway.FleetName(gw.Name),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(gw, gwv1.SchemeGroupVersion.WithKind("Gateway"))}}}
	create(t, e)
	create(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.Name, Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "gw-443", Port: 443, TargetPort: intstr.FromInt32(10443)}}},
	})
	fleetID := ns + "/" + e.Name
	backend(t, ns, "web")
	create(t, httpRoute(ns, "web", "edge.example.com", "web"))

	sds := ns + "/edge/" + ns + "/cert"
	testenv.Eventually(t, "the fleet to serve the listener's certificate", func() (bool, error) {
		got := servedCertificate(fleetID, sds)
		return got == string(secret.Data[corev1.TLSCertKey]), fmt.Errorf("served %q", got)
	})
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return len(g.Status.Listeners) == 1 && g.Status.Listeners[0].AttachedRoutes == 1
	})

	// The certificate is renewed in the Secret.
	crt, key := certificate(t, "edge.example.com")
	secret.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
	if err := suite.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the fleet to serve the renewed certificate", func() (bool, error) {
		got := servedCertificate(fleetID, sds)
		return got == string(crt), fmt.Errorf("served %.40q", got)
	})
}
