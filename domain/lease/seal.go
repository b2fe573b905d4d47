package lease

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
)

// MinKeyBytes is the shortest accepted sealing key.
const MinKeyBytes = 32

// sealDomain separates lease seals from every other HMAC a key might be
// (mis)used for.
const sealDomain = "syncd auth lease v1\x00"

// KeySet seals lease records at rest (SPEC §7.3.1: the record is
// host-signed; the server verifies its own signature on read). The first
// key seals; every key verifies, so a new key is rolled out by putting it
// first and keeping the old ones until the leases they sealed expired.
// SetKeys replaces the keys while the set is in use.
type KeySet struct {
	keys atomic.Pointer[[][]byte]
}

// NewKeySet returns a KeySet over keys, newest first. Each key has at
// least MinKeyBytes bytes, and no key appears twice.
func NewKeySet(keys ...[]byte) (*KeySet, error) {
	ks := &KeySet{}
	if err := ks.SetKeys(keys...); err != nil {
		return nil, err
	}
	return ks, nil
}

// SetKeys replaces the keys (newest first) at once; a failed call changes
// nothing.
func (ks *KeySet) SetKeys(keys ...[]byte) error {
	if len(keys) == 0 {
		return errors.New("lease: no sealing key")
	}
	set := make([][]byte, 0, len(keys))
	for i, k := range keys {
		if len(k) < MinKeyBytes {
			return fmt.Errorf("lease: key %d has %d bytes, want at least %d", i+1, len(k), MinKeyBytes)
		}
		for j, prev := range set {
			if bytes.Equal(prev, k) {
				return fmt.Errorf("lease: keys %d and %d are the same", j+1, i+1)
			}
		}
		set = append(set, bytes.Clone(k))
	}
	ks.keys.Store(&set)
	return nil
}

// Len is the number of keys.
func (ks *KeySet) Len() int { return len(*ks.keys.Load()) }

// Sign returns the seal of r under the newest key.
func (ks *KeySet) Sign(r Record) []byte { return seal((*ks.keys.Load())[0], r) }

// Verify reports whether sig is the seal of r under any key of the set.
func (ks *KeySet) Verify(r Record, sig []byte) bool {
	ok := false
	for _, k := range *ks.keys.Load() {
		// Every key is tried, so the time taken does not say which matched.
		if hmac.Equal(seal(k, r), sig) {
			ok = true
		}
	}
	return ok
}

// seal is HMAC-SHA256 over a length-prefixed encoding of every field of
// r, the scope map in key order: one byte sequence per record.
func seal(key []byte, r Record) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = m.Write([]byte(sealDomain))
	var n [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint32(n[:4], uint32(len(s)))
		_, _ = m.Write(n[:4])
		_, _ = m.Write([]byte(s))
	}
	i64 := func(v int64) {
		binary.LittleEndian.PutUint64(n[:], uint64(v))
		_, _ = m.Write(n[:])
	}
	str(r.Partition)
	str(r.ClientID)
	str(r.LeaseID)
	str(r.ActorID)
	i64(r.IssuedAtMs)
	i64(r.ExpiresAtMs)
	keys := make([]string, 0, len(r.AllowedScopes))
	for k := range r.AllowedScopes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	i64(int64(len(keys)))
	for _, k := range keys {
		str(k)
		vs := r.AllowedScopes[k]
		i64(int64(len(vs)))
		for _, v := range vs {
			str(v)
		}
	}
	return m.Sum(nil)
}
