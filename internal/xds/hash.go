package xds

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
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
