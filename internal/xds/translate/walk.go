package translate

import (
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
)

// walk is xds.Walk: every message inside m, with its field path.
func walk(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	xds.Walk(m, path, visit)
}

// walkRewriting is xds.WalkRewriting, for a visit that changes the messages.
func walkRewriting(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	xds.WalkRewriting(m, path, visit)
}
