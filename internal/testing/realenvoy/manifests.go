package realenvoy

import "fmt"

// TLSListener begins, in an EnvoyConfig manifest's list of listeners, the
// listener name on 0.0.0.0:port whose one filter chain terminates TLS with
// the certificate of secret, sent over SDS. The manifest goes on with the
// chain's filters, at the indent of "        - name: …".
func TLSListener(name string, port int, secret string) string {
	return fmt.Sprintf(`    - name: %s
      address: {socket_address: {address: 0.0.0.0, port_value: %d}}
      filter_chains:
      - transport_socket:
          name: envoy.transport_sockets.tls
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
            common_tls_context:
              tls_certificate_sds_secret_configs:
              - {name: %s, sds_config: {ads: {}, resource_api_version: V3}}
        filters:
`, name, port, secret)
}

// DirectResponse is the manifest of an EnvoyConfig name of fleet: a
// listener on 127.0.0.1:port whose route configuration, also called name
// and sent by RDS, answers every request itself with status 200 and body.
// Its proxies need no upstream, and its stats are under http.<name>.
func DirectResponse(name, fleet string, port int, body string) string {
	return fmt.Sprintf(`apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: %[1]s}
spec:
  envoyRef: %[2]s
  resources:
    listeners:
    - name: http
      address: {socket_address: {address: 127.0.0.1, port_value: %[3]d}}
      filter_chains:
      - filters:
        - name: envoy.filters.network.http_connection_manager
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
            stat_prefix: %[1]s
            rds: {route_config_name: %[1]s, config_source: {ads: {}, resource_api_version: V3}}
            http_filters:
            - name: envoy.filters.http.router
              typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
    routes:
    - name: %[1]s
      virtual_hosts:
      - name: all
        domains: ["*"]
        routes:
        - match: {prefix: /}
          direct_response: {status: 200, body: {inline_string: %[4]q}}
`, name, fleet, port, body)
}
