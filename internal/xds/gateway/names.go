package gateway

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// The names of what a Gateway's Config serves all start with the Gateway's
// namespace/name, so that two Gateways served by one fleet never share one:
//
//   - listener and route configuration of a port:  <ns>/<gateway>/<port>
//   - cluster of a Service's port:                 <ns>/<gateway>/<svc-ns>/<svc>/<port>
//   - SDS secret of a listener's certificate:      <ns>/<gateway>/<secret-ns>/<secret>
//
// where <port> is the Gateway listener's port and the Service port's
// number.

// prefix is what every name of gw's Config starts with.
func prefix(gw types.NamespacedName) string { return gw.Namespace + "/" + gw.Name }

// portName names the Envoy listener, and the route configuration, of a
// Gateway listener port.
func portName(gw types.NamespacedName, port int32) string {
	return fmt.Sprintf("%s/%d", prefix(gw), port)
}

// clusterName names the EDS cluster of a Service's port.
func clusterName(gw types.NamespacedName, svc types.NamespacedName, port int32) string {
	return fmt.Sprintf("%s/%s/%s/%d", prefix(gw), svc.Namespace, svc.Name, port)
}

// secretName names the SDS secret of a listener certificate's Secret.
func secretName(gw types.NamespacedName, secret types.NamespacedName) string {
	return fmt.Sprintf("%s/%s/%s", prefix(gw), secret.Namespace, secret.Name)
}

// localRef is how a Config names a Service or a Secret in its
// serviceEndpoints and tlsSecrets: by name in the Gateway's namespace,
// "namespace/name" in another.
func localRef(gwNamespace string, ref types.NamespacedName) string {
	if ref.Namespace == gwNamespace {
		return ref.Name
	}
	return ref.Namespace + "/" + ref.Name
}
