// Package names holds the names the operator's objects share: the labels
// it sets and selects by, the kinds of Secret the xDS control plane reads,
// and where the xDS certificate authority publishes its certificates. Every package that needs them, the pure stages of the control
// plane among them, imports this one, which imports nothing: no client of
// the API server, no metric.
package names

// ManagedByLabel marks every object the operator creates. The manager's cache
// keeps only objects that carry it (see internal/manager.CacheOptions).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "kube-envoy-controller"
)

// ComponentLabel marks the ConfigMaps of the xDS control plane; its value
// says which (a fleet's history, a replica's report).
const ComponentLabel = "app.kubernetes.io/component"

// XDSSecretLabel marks the Secrets the xDS control plane reads; the manager's
// cache keeps no other Secret. Its value says what the Secret is for, and only
// XDSSecretTLS may be served to proxies over SDS:
//   - XDSSecretTLS: a user's kubernetes.io/tls Secret, which an EnvoyConfig's
//     tlsSecrets may name (the label is the Secret owner's consent);
//   - XDSSecretClient: a fleet's client certificate for the xDS server, which
//     the operator issues and its proxies mount;
//   - XDSSecretCA: the operator's xDS certificate authority, in its namespace.
const (
	XDSSecretLabel  = "kube-envoy-controller.io/xds-secret"
	XDSSecretTLS    = "tls"
	XDSSecretClient = "client-certificate"
	XDSSecretCA     = "ca"
)

// The ConfigMap, in the operator's namespace, that holds the xDS
// certificate authority's certificates (the public part only, under
// CABundleKey, as the CA's Secret holds them): clients of the operator's
// debug endpoint, kubectl envoy among them, verify its certificate with
// them. internal/xds/authority publishes it.
const (
	CAConfigMap = "kube-envoy-controller-xds-ca"
	CABundleKey = "ca.crt"
)

// FieldOwner is the field manager name of the operator's writes.
const FieldOwner = "kube-envoy-controller"
