// Package version says which build of the operator is running. The values are
// stamped at link time (make build, make image):
//
//	-ldflags '-X github.com/kube-envoy-controller/kube-envoy-controller/internal/version.version=v0.1.0
//	          -X github.com/kube-envoy-controller/kube-envoy-controller/internal/version.revision=<commit>'
//
// A plain `go build` leaves them at "devel" and "unknown".
package version

import (
	"fmt"
	"runtime"
)

// Stamped with -ldflags -X; unexported so that nothing changes them at run time.
var (
	version  = "devel"
	revision = "unknown"
)

// Version is `git describe --tags --always --dirty` of the source the binary was built from.
func Version() string { return version }

// Revision is the full commit hash of that source.
func Revision() string { return revision }

// String is what --version prints: the version first, so that scripts can cut it.
func String() string {
	return fmt.Sprintf("%s (revision %s, %s, %s/%s)", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
