package translate

import (
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// checked remembers the policy's verdicts on the resources judged lately:
// every reconcile of a fleet, and every admission of one of its
// EnvoyConfigs, judges all of the fleet's resources again, and an edit
// changes few of them. Decoded resources are shared and never changed
// (xds.Decode), so a message is judged once per policy.
var checked = newVerdictCache(1 << 14)

type verdictKey struct {
	msg     types.Resource
	typeURL string
	// policy is Policy.identity; operatorNamespace, whether the resource's
	// EnvoyConfig is in the operator's namespace, where names without a
	// dot are the operator's.
	policy            string
	operatorNamespace bool
}

// verdictCache holds two generations of at most size verdicts: a verdict
// used in the older one moves to the newer, and when the newer is full the
// older is dropped, so the verdicts in use stay and at most 2×size are held.
type verdictCache struct {
	size int

	mu              sync.Mutex
	current, former map[verdictKey][]string
}

func newVerdictCache(size int) *verdictCache {
	return &verdictCache{size: size, current: map[verdictKey][]string{}, former: map[verdictKey][]string{}}
}

// get returns judge's verdict for k, calling it only when the cache does
// not hold it.
func (c *verdictCache) get(k verdictKey, judge func() []string) []string {
	c.mu.Lock()
	v, ok := c.current[k]
	if !ok {
		if v, ok = c.former[k]; ok {
			c.putLocked(k, v)
		}
	}
	c.mu.Unlock()
	if ok {
		return v
	}
	v = judge()
	c.mu.Lock()
	c.putLocked(k, v)
	c.mu.Unlock()
	return v
}

func (c *verdictCache) putLocked(k verdictKey, v []string) {
	if len(c.current) >= c.size {
		c.former, c.current = c.current, map[verdictKey][]string{}
	}
	c.current[k] = v
}
