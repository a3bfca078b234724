// Package history is the format of the fleets' revision histories
// (publish.History) as the API server keeps them: configmap.go is the
// ConfigMap that holds a fleet's history, in the operator's namespace, and
// the checks of what is read back; legacy.go, the history as the previous
// release kept it, in the fleet's namespace, and how much of it may be
// adopted. It reads and writes nothing, and links no client of the API
// server and no metric, so that kubectl envoy and the pure stages can read
// a history as the operator does; history/store reads and writes them.
package history
