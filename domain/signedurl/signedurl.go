// Package signedurl is the native signed-URL token of SPEC §5.4 (and the
// blob URLs of §5.9, blob.go):
//
//	st = base64url(payloadJSON) "." base64url(HMAC-SHA256(key, payloadJSON))
//	payloadJSON = {"v":1,"seg":"<segmentId>","sd":"<scopeDigest>","aud":"<audience>","exp":<unix seconds>}
//
// base64url is RFC 4648 §5 without padding. The audience is a keyed
// derivation of the partition id, stable per partition, from which a
// client cannot recover the partition. Signing and verification are pure;
// the caller supplies the clock. Whether sd and aud name a stored
// publication of seg is the verifier's caller's check (Claims only says
// what the token grants).
package signedurl

import (
	"bytes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Version is the only payload version ("v").
const Version = 1

// MaxTTL is the longest lifetime a token may be minted with (SPEC §5.4:
// TTL SHOULD be ≤ 15 minutes, the revocation window of issued URLs).
const MaxTTL = 15 * time.Minute

// Skew is the clock-error allowance past exp (SPEC §5.4: ≤ 60 s).
const Skew = 60 * time.Second

// MinKeyBytes is the shortest accepted key.
const MinKeyBytes = 32

// Verification failures. Every one is a refusal; ErrExpired is the only
// one a well-behaved client can hit.
var (
	ErrMalformed = errors.New("signed url token is malformed")
	ErrSignature = errors.New("signed url token signature does not verify")
	ErrExpired   = errors.New("signed url token has expired")
)

// Claims are a token's grant.
type Claims struct {
	// Segment is the segment id ("seg").
	Segment string
	// ScopeDigest is the §3.5 digest authorized at issuance ("sd").
	ScopeDigest string
	// Audience is the partition token ("aud"), see Signer.Audience.
	Audience string
	// Expires is the expiry in unix seconds ("exp").
	Expires int64

	key *signingKey // the key that verified the token (Verify)
}

// payload fixes the JSON key order of the spec.
type payload struct {
	V   int    `json:"v"`
	Seg string `json:"seg"`
	SD  string `json:"sd"`
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
}

// Signer mints and verifies tokens with a set of keys: the newest (the
// first) signs, every key verifies, so keys rotate without refusing the
// URLs already handed out: add the new key first, keep the old one until
// its URLs expired (MaxTTL), then drop it. SetKeys replaces the set while
// the Signer is in use.
type Signer struct {
	ring atomic.Pointer[[]*signingKey]
}

// signingKey is one key and what is derived from it.
type signingKey struct {
	key []byte
	aud []byte // the audience derivation key

	blobOnce  sync.Once // blob audience keys (blob.go), derived on first use
	blobAEAD  cipher.AEAD
	blobNonce []byte
}

// NewSigner returns a Signer over keys, newest first (at least one, each
// at least MinKeyBytes bytes, none twice).
func NewSigner(keys ...[]byte) (*Signer, error) {
	s := &Signer{}
	if err := s.SetKeys(keys...); err != nil {
		return nil, err
	}
	return s, nil
}

// SetKeys replaces the key set (newest first) at once: tokens minted from
// then on use the new first key; a failed call changes nothing.
func (s *Signer) SetKeys(keys ...[]byte) error {
	if len(keys) == 0 {
		return errors.New("signedurl: no key")
	}
	ring := make([]*signingKey, 0, len(keys))
	for i, key := range keys {
		if len(key) < MinKeyBytes {
			return fmt.Errorf("signedurl: key %d has %d bytes, want at least %d", i+1, len(key), MinKeyBytes)
		}
		for j, prev := range ring {
			if bytes.Equal(prev.key, key) {
				return fmt.Errorf("signedurl: keys %d and %d are the same", j+1, i+1)
			}
		}
		k := bytes.Clone(key)
		m := hmac.New(sha256.New, k)
		m.Write([]byte("syncd segment audience v1"))
		ring = append(ring, &signingKey{key: k, aud: m.Sum(nil)})
	}
	s.ring.Store(&ring)
	return nil
}

// Len is the number of keys.
func (s *Signer) Len() int { return len(s.keys()) }

func (s *Signer) keys() []*signingKey { return *s.ring.Load() }

func (s *Signer) newest() *signingKey { return s.keys()[0] }

// Audience returns the partition token of partition under the newest key:
// HMAC-SHA256 under a key derived from the signing key, base64url,
// truncated to 128 bits.
func (s *Signer) Audience(partition string) string { return s.newest().audience(partition) }

// MatchesAudience reports whether c's audience is partition's under the
// key that verified c (the newest for claims Verify did not return).
func (s *Signer) MatchesAudience(c Claims, partition string) bool {
	k := c.key
	if k == nil {
		k = s.newest()
	}
	return hmac.Equal([]byte(k.audience(partition)), []byte(c.Audience))
}

func (k *signingKey) audience(partition string) string {
	m := hmac.New(sha256.New, k.aud)
	m.Write([]byte(partition))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// Sign returns the token for c, under the newest key.
func (s *Signer) Sign(c Claims) string {
	pj, _ := json.Marshal(payload{V: Version, Seg: c.Segment, SD: c.ScopeDigest, Aud: c.Audience, Exp: c.Expires})
	return base64.RawURLEncoding.EncodeToString(pj) + "." + base64.RawURLEncoding.EncodeToString(s.mac(pj))
}

// Mint signs a token for segment, digest and partition that expires ttl
// after now (ttl is capped at MaxTTL). It returns the token and its expiry
// in unix milliseconds, second-aligned (the urlExpiresAtMs of SEGMENT_REF).
func (s *Signer) Mint(segment, digest, partition string, now time.Time, ttl time.Duration) (token string, expiresAtMs int64) {
	if ttl <= 0 || ttl > MaxTTL {
		ttl = MaxTTL
	}
	exp := now.Add(ttl).Unix()
	return s.Sign(Claims{Segment: segment, ScopeDigest: digest, Audience: s.Audience(partition), Expires: exp}), exp * 1000
}

// mac is the newest key's MAC of pj.
func (s *Signer) mac(pj []byte) []byte { return s.newest().mac(pj) }

func (k *signingKey) mac(pj []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write(pj)
	return m.Sum(nil)
}

// verifying returns the key whose MAC of pj is mac, nil when none is.
// Every key is tried, so the time taken does not say which matched.
func (s *Signer) verifying(pj, mac []byte) *signingKey {
	var found *signingKey
	for _, k := range s.keys() {
		if hmac.Equal(mac, k.mac(pj)) && found == nil {
			found = k
		}
	}
	return found
}

// Verify checks the token's MAC, its payload and its expiry (with Skew)
// at now, and returns its claims. It does not check the claims against a
// request; see Claims.
func (s *Signer) Verify(token string, now time.Time) (Claims, error) {
	p64, m64, ok := strings.Cut(token, ".")
	if !ok || p64 == "" || m64 == "" {
		return Claims{}, ErrMalformed
	}
	pj, err := base64.RawURLEncoding.DecodeString(p64)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	mac, err := base64.RawURLEncoding.DecodeString(m64)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	k := s.verifying(pj, mac)
	if k == nil {
		return Claims{}, ErrSignature
	}
	dec := json.NewDecoder(bytes.NewReader(pj))
	dec.DisallowUnknownFields()
	var p payload
	if err := dec.Decode(&p); err != nil || dec.More() {
		return Claims{}, ErrMalformed
	}
	if p.V != Version || p.Seg == "" || p.SD == "" || p.Aud == "" || p.Exp <= 0 {
		return Claims{}, ErrMalformed
	}
	if now.Unix() > p.Exp+int64(Skew/time.Second) {
		return Claims{}, ErrExpired
	}
	return Claims{Segment: p.Seg, ScopeDigest: p.SD, Audience: p.Aud, Expires: p.Exp, key: k}, nil
}
