package realenvoy

import (
	"context"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
)

// Resources are xDS resources for one Envoy to load (envoyload.Resources).
type Resources = envoyload.Resources

// Load has Envoy validate r as the fleet's proxies would load it
// (envoyload.Validate), in dir.
func Load(envoy, dir string, r Resources) error {
	return envoyload.Validate(context.Background(), envoy, dir, r)
}

// Said returns what Envoy said in err (envoyload.Said).
func Said(err error) string { return envoyload.Said(err) }
