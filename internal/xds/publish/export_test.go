package publish

// The scope names, for the external test that compares them with the
// stats receiver's (scopenames_test.go): package stats imports this one,
// so only a test outside this package may import it.
var ScopeHTTP, ScopeCluster = scopeHTTP, scopeCluster
