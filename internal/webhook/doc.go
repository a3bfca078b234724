// Package webhook serves the operator's admission webhooks on the manager's
// webhook server, over TLS, on every replica, leader or not:
//
//   - the sidecar injector (package inject) at /mutate-v1-pod, for pods as
//     they are created;
//   - the EnvoyConfig validator (package validate) at
//     /validate-example-com-v1-envoyconfig, for EnvoyConfigs as they are
//     created, updated and deleted;
//   - and, unless it comes from elsewhere (cert-manager, say), their serving
//     certificate and CA, generated and rotated by package certificates.
//
// Setup registers both webhooks; BindFlags and Flags.Options are the
// command line that configures them. A handler that panics answers the API
// server with an error instead of stopping the operator. Neither
// configuration sends requests from kube-system or the operator's own
// namespace, so that an outage of the operator blocks nothing there, and
// the injector leaves those namespaces' pods alone whatever a configuration
// sends it.
//
// This package wires the three rooms below it together; they import
// nothing of it, nor of each other.
package webhook
