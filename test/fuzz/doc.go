// Package fuzz holds the native Go fuzz targets of the operator's pure parts:
// every controller's render functions, and the sidecar injection. Each
// target decodes its input as a user's spec, keeps only what the API server
// would admit (the CRDs' own validation, run in process by
// internal/testing/crdschema), and requires that rendering never panics and that
// what it renders is valid (internal/testing/objcheck).
//
// `go test` runs the seed corpora (f.Add, and testdata/fuzz when a run found
// something); `make fuzz` runs each target for FUZZTIME. The targets live
// here, not beside the controllers, because the controllers' test packages
// start an API server in TestMain, which every fuzz worker would run again.
package fuzz
