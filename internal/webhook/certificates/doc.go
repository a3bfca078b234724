// Package certificates keeps the serving certificate of the operator's
// webhooks, with open-policy-agent/cert-controller's rotator.
//
// It keeps a CA and a serving certificate for the name the API server calls
// the webhooks by in one Secret of the operator's namespace, renews them
// before they expire or when they are no longer valid, and puts the CA into
// the caBundle of the mutating and the validating webhook configuration,
// back again when someone changes it. Every replica runs it, leader or not,
// since every replica serves the webhooks; the webhook server starts only
// once the certificate is in place and the CA in both configurations, and
// until then the readiness check "webhook" fails. On the host, where no
// kubelet mounts the Secret, it copies the certificate into the server's
// directory itself.
//
// Least privilege: the operator reads and writes that one Secret and those
// two configurations, each named in its RBAC rules (resourceNames). The
// rotator lists and watches whole collections, which resourceNames do not
// authorize, so its manager is narrowed (narrow.go): its list and watch
// requests select the one object by name, and an update that would change
// nothing is not sent, so a restarted operator writes nothing. It creates
// the Secret when it is missing, the one write that cannot be limited by
// name.
package certificates
