package resource

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
)

// Hash hashes a sequence of strings and byte strings unambiguously (each is
// length-prefixed): the versions of the control plane are such hashes.
type Hash struct{ h hash.Hash }

// NewHash returns an empty Hash.
func NewHash() *Hash { return &Hash{h: sha256.New()} }

// Add adds parts, each a string or a []byte.
func (c *Hash) Add(parts ...any) {
	for _, p := range parts {
		var b []byte
		switch v := p.(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		}
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		c.h.Write(n[:])
		c.h.Write(b)
	}
}

// Sum returns the hash so far, in 16 hex digits.
func (c *Hash) Sum() string { return hex.EncodeToString(c.h.Sum(nil))[:16] }

// MarshalKind marshals the resources of type typeURL, deterministically and
// in the order of their names, adds each with its type and name to h (the
// version of their content), and hands each to each.
func MarshalKind(h *Hash, typeURL string, rs []types.Resource, each func(name string, r types.Resource, wire []byte, err error)) {
	k := KindOf(typeURL)
	sorted := make([]types.Resource, len(rs))
	copy(sorted, rs)
	sort.Slice(sorted, func(i, j int) bool { return k.name(sorted[i]) < k.name(sorted[j]) })
	for _, r := range sorted {
		name := k.name(r)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		h.Add(typeURL, name, b)
		each(name, r, b, err)
	}
}
