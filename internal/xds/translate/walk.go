package translate

import (
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// walk is resource.Walk: every message inside m, with its field path.
func walk(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	resource.Walk(m, path, visit)
}

// walkRewriting is resource.WalkRewriting, for a visit that changes the messages.
func walkRewriting(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	resource.WalkRewriting(m, path, visit)
}
