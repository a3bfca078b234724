package resource

import (
	"crypto/sha256"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// decoded remembers what Decode returned for the resources decoded lately:
// 16,384 results or 16 MiB of their JSON per generation.
var decoded = newDecodeCache(1<<14, 16<<20)

// decodeCache remembers decoding results by kind and content, in two
// Generations of at most size entries and bytes bytes of input each: the
// resources in use stay, whatever was decoded once and never again goes,
// and at most 2×size results of 2×bytes of input are held, however many or
// large the resources that users write.
type decodeCache struct {
	results *Generations[decodeKey, decodeResult]
}

type decodeKey struct {
	typeURL string
	sum     [sha256.Size]byte
}

type decodeResult struct {
	msg  types.Resource
	name string
	err  error
}

func newDecodeCache(size, bytes int) *decodeCache {
	return &decodeCache{results: NewGenerations[decodeKey, decodeResult](size, bytes)}
}

// get returns what decode returns for k and raw, calling it only when the
// cache does not hold the result. Two callers may both decode the same new
// content at once; both get a correct result.
func (c *decodeCache) get(k Kind, raw []byte, decode func(Kind, []byte) (types.Resource, string, error)) (types.Resource, string, error) {
	key := decodeKey{typeURL: k.TypeURL, sum: sha256.Sum256(raw)}
	if r, ok := c.results.Get(key); ok {
		return r.msg, r.name, r.err
	}
	msg, name, err := decode(k, raw)
	c.results.Put(key, decodeResult{msg, name, err}, len(raw))
	return msg, name, err
}
