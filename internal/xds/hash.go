package xds

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// contentHash hashes a sequence of byte strings unambiguously (each is
// length-prefixed).
type contentHash struct{ h hash.Hash }

func newHash() *contentHash { return &contentHash{h: sha256.New()} }

func (c *contentHash) add(parts ...any) {
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

func (c *contentHash) sum() string { return hex.EncodeToString(c.h.Sum(nil))[:16] }
