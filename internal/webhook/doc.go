// Package webhook serves the operator's admission webhooks on the manager's
// webhook server, over TLS, on every replica, leader or not:
//
//   - the sidecar injector (package inject) at /mutate-v1-pod, for pods as
//     they are created;
//   - the EnvoyConfig validator (package validate) at
//     /validate-example-com-v1-envoyconfig, for EnvoyConfigs as they are
//     created, updated and deleted;
//   - the Watcher, PodSet and Envoy validators (package podtemplate) at
//     /validate-watch-my-domain-v1alpha1-watcher,
//     /validate-demo-k8s-io-v1alpha1-podset and
//     /validate-example-com-v1-envoy, for Watchers, PodSets and Envoys as
//     they are created and updated: pod content the API server would
//     refuse in every pod made from them;
//   - and, unless it comes from elsewhere (cert-manager, say), their serving
//     certificate and CA, generated and rotated by package certificates.
//
// Setup registers the webhooks; BindFlags and Flags.Options are the
// command line that configures them. A handler that panics answers the API
// server with an error instead of stopping the operator. No
// configuration sends requests from kube-system or the operator's own
// namespace, so that an outage of the operator blocks nothing there, and
// the injector leaves those namespaces' pods alone whatever a configuration
// sends it.
//
// This package wires the four rooms below it together; they import
// nothing of it, nor of each other.
package webhook
