package xds

import (
	"crypto/sha256"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// decoded remembers what Decode returned for the resources decoded lately:
// 16,384 results or 16 MiB of their JSON per generation.
var decoded = newDecodeCache(1<<14, 16<<20)

// decodeCache remembers decoding results by kind and content. It holds two
// generations of at most size entries and bytes bytes of input each: a result
// used in the older one moves to the newer, and when the newer is full the
// older is dropped. So the resources in use stay, whatever was decoded once
// and never again goes, and at most 2×size results of 2×bytes of input are
// held, however many or large the resources that users write.
type decodeCache struct {
	size, bytes int

	mu              sync.Mutex
	current, former map[decodeKey]decodeResult
	currentBytes    int
}

type decodeKey struct {
	typeURL string
	sum     [sha256.Size]byte
}

type decodeResult struct {
	msg   types.Resource
	name  string
	err   error
	bytes int // of the input
}

func newDecodeCache(size, bytes int) *decodeCache {
	return &decodeCache{size: size, bytes: bytes, current: map[decodeKey]decodeResult{}, former: map[decodeKey]decodeResult{}}
}

// get returns what decode returns for k and raw, calling it only when the
// cache does not hold the result. Two callers may both decode the same new
// content at once; both get a correct result.
func (c *decodeCache) get(k Kind, raw []byte, decode func(Kind, []byte) (types.Resource, string, error)) (types.Resource, string, error) {
	key := decodeKey{typeURL: k.TypeURL, sum: sha256.Sum256(raw)}
	c.mu.Lock()
	r, ok := c.current[key]
	if !ok {
		if r, ok = c.former[key]; ok {
			c.putLocked(key, r)
		}
	}
	c.mu.Unlock()
	if ok {
		return r.msg, r.name, r.err
	}
	msg, name, err := decode(k, raw)
	if len(raw) <= c.bytes {
		c.mu.Lock()
		c.putLocked(key, decodeResult{msg, name, err, len(raw)})
		c.mu.Unlock()
	}
	return msg, name, err
}

func (c *decodeCache) putLocked(key decodeKey, r decodeResult) {
	if len(c.current) >= c.size || c.currentBytes+r.bytes > c.bytes {
		c.former, c.current, c.currentBytes = c.current, make(map[decodeKey]decodeResult), 0
	}
	c.current[key] = r
	c.currentBytes += r.bytes
}
