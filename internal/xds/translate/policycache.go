package translate

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// checked remembers the policy's verdicts on the resources judged lately,
// 16,384 per generation: every reconcile of a fleet, and every admission of
// one of its EnvoyConfigs, judges all of the fleet's resources again, and an
// edit changes few of them. Decoded resources are shared and never changed
// (resource.Decode), so a message is judged once per policy.
var checked = verdictCache{resource.NewGenerations[verdictKey, []string](1<<14, 1<<14)}

type verdictKey struct {
	msg     types.Resource
	typeURL string
	// policy is Policy.identity; operatorNamespace, whether the resource's
	// EnvoyConfig is in the operator's namespace, where names without a
	// dot are the operator's.
	policy            string
	operatorNamespace bool
}

type verdictCache struct {
	verdicts *resource.Generations[verdictKey, []string]
}

// get returns judge's verdict for k, calling it only when the cache does
// not hold it.
func (c verdictCache) get(k verdictKey, judge func() []string) []string {
	if v, ok := c.verdicts.Get(k); ok {
		return v
	}
	v := judge()
	c.verdicts.Put(k, v, 1)
	return v
}
