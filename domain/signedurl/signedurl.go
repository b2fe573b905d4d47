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
}

// payload fixes the JSON key order of the spec.
type payload struct {
	V   int    `json:"v"`
	Seg string `json:"seg"`
	SD  string `json:"sd"`
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
}

// Signer mints and verifies tokens with one key.
type Signer struct {
	key []byte
	aud []byte // the audience derivation key

	blobOnce  sync.Once // blob audience keys (blob.go), derived on first use
	blobAEAD  cipher.AEAD
	blobNonce []byte
}

// NewSigner returns a Signer over key (at least MinKeyBytes bytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("signedurl: key has %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	k := bytes.Clone(key)
	m := hmac.New(sha256.New, k)
	m.Write([]byte("syncd segment audience v1"))
	return &Signer{key: k, aud: m.Sum(nil)}, nil
}

// Audience returns the partition token of partition: HMAC-SHA256 under a
// key derived from the signing key, base64url, truncated to 128 bits.
func (s *Signer) Audience(partition string) string {
	m := hmac.New(sha256.New, s.aud)
	m.Write([]byte(partition))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// Sign returns the token for c.
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

func (s *Signer) mac(pj []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(pj)
	return m.Sum(nil)
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
	if !hmac.Equal(mac, s.mac(pj)) {
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
	return Claims{Segment: p.Seg, ScopeDigest: p.SD, Audience: p.Aud, Expires: p.Exp}, nil
}
