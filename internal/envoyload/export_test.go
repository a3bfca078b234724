package envoyload

import "github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"

// SetKinds makes k the kinds Envoy loads, until the returned func is called.
func SetKinds(k []resource.Kind) (restore func()) {
	was := kinds
	kinds = k
	return func() { kinds = was }
}
