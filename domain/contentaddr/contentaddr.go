// Package contentaddr is the content address of SPEC §5.1 shared by
// segments and blobs: "sha256:" followed by the lowercase hex SHA-256 of
// the uncompressed bytes.
package contentaddr

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
)

// Prefix starts every content address.
const Prefix = "sha256:"

// Len is the length of a content address: the prefix and 64 hex digits.
const Len = len(Prefix) + 2*sha256.Size

// Of returns the content address of b.
func Of(b []byte) string {
	sum := sha256.Sum256(b)
	return Prefix + hex.EncodeToString(sum[:])
}

// Valid reports whether s is a well-formed content address (lowercase hex).
func Valid(s string) bool {
	if len(s) != Len || !strings.HasPrefix(s, Prefix) {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Hasher computes a content address over streamed bytes.
type Hasher struct{ h hash.Hash }

// NewHasher returns an empty Hasher.
func NewHasher() *Hasher { return &Hasher{h: sha256.New()} }

// Write adds p to the hash; it never fails.
func (h *Hasher) Write(p []byte) (int, error) { return h.h.Write(p) }

// Sum returns the content address of everything written so far.
func (h *Hasher) Sum() string { return Prefix + hex.EncodeToString(h.h.Sum(nil)) }
