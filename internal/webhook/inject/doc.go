// Package inject is the operator's mutating admission webhook for pods: it
// injects the sidecars of Watchers, and Envoy sidecars that join a fleet,
// into pods as they are created, once per pod (reinvocationPolicy Never).
//
// What it changes. Only pods created in a namespace labelled
// kube-envoy-controller.io/injection=enabled, never in kube-system or the
// operator's own namespace: the generated configuration's namespaceSelector
// says so, and the injector checks both again itself, so that a
// configuration installed or edited without the selector injects nowhere
// else. Such a pod gets:
//
//   - the Watchers that its annotation watch.my.domain/inject names;
//   - the Watchers whose spec.selector matches its labels, only those that
//     the namespace's annotation watch.my.domain/selector-watchers lists (or
//     "*"): a pod consents to what it names, and whoever governs the
//     namespace decides which Watchers may add containers to other people's
//     pods;
//   - the sidecar of the Envoy fleet that its annotation
//     example.com/envoy-sidecar names: a native sidecar that reads the
//     fleet's bootstrap and, over mutual TLS, mounts its client certificate.
//
// The annotations watch.my.domain/injected and
// example.com/envoy-sidecar-injected record what it got; only the injector
// writes them, and a value the pod brings is replaced.
//
// What it refuses, with a message that names the annotation and the object:
// a pod that names a Watcher or an Envoy that does not exist in its
// namespace; a Watcher whose ConfigMap is another object's (its sidecar
// would take its environment from someone else's data); and a sidecar whose
// container or volume would take a name the pod already uses differently.
// Everything else is admitted unchanged.
//
// What it trusts: the namespace's labels and annotations, and the Watchers
// and Envoys of the pod's namespace, read from the manager's cache and, for
// one created a moment ago, from the API server. Never the pod's own
// records: whether a pod already has a sidecar is decided from its
// containers and volumes, allowing only what the API server itself adds
// (carries.go), so a pod cannot skip a sidecar by bringing the annotation
// that records it.
//
// inject.go holds the pure part: which Watchers a pod asks for, and the pod
// with their sidecars added. handler.go reads the Watchers, Envoys and
// namespaces and answers the API server.
package inject
