package signedurl

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Blob URLs (SPEC §5.9.3, §5.9.5) carry the native blob token's fields as
// query parameters of <base>/blob-objects/{blobId}:
//
//	op=get&aud=<audience>&exp=<unix seconds>&sig=<base64url MAC>
//	op=put&len=<byteLength>[&type=<media type>]&aud=<audience>&exp=<unix seconds>&sig=<base64url MAC>
//
// The MAC is HMAC-SHA256 under the signer's key over the token payload
// rebuilt from them and the path's blob id; a download's payload is the
// spec's {"v":1,"blob":"<blobId>","aud":"<audience>","exp":<seconds>}, an
// upload's adds the operation, the one length it accepts and the media
// type the grant was asked for (omitted when none):
// {"v":1,"op":"put","blob":…,"len":<n>,"type":"…","aud":…,"exp":…}.
//
// A blob lives in one partition and the URL must lead back to it, so a
// blob audience is the partition sealed under the signer's key
// (deterministic authenticated encryption): stable per partition, opaque
// to clients, and opened only by the host that minted it. A segment
// audience, by contrast, is a one-way derivation matched against the
// publications' partitions.

// BlobObjectPath is the path, below the sync API base, of the native blob
// URLs: the URL is <base>/blob-objects/{blobId}?<query>.
const BlobObjectPath = "/blob-objects/"

// Blob URL query parameters.
const (
	ParamOp       = "op"
	ParamLength   = "len"
	ParamType     = "type"
	ParamAudience = "aud"
	ParamExpires  = "exp"
	ParamSig      = "sig"
)

// BlobOp is what a blob URL grants.
type BlobOp string

// Blob URL operations.
const (
	BlobGet BlobOp = "get"
	BlobPut BlobOp = "put"
)

// BlobGrant is a blob URL's grant.
type BlobGrant struct {
	Op   BlobOp
	Blob string
	// ByteLength is the exact body length a put accepts (0 for get).
	ByteLength int64
	// MediaType is the media type a put stores ("" for get, or none).
	MediaType string
	// Partition is the partition the blob lives in (sealed in the URL).
	Partition string
	// Expires is the expiry in unix seconds.
	Expires int64
}

type blobGetPayload struct {
	V    int    `json:"v"`
	Blob string `json:"blob"`
	Aud  string `json:"aud"`
	Exp  int64  `json:"exp"`
}

type blobPutPayload struct {
	V    int    `json:"v"`
	Op   string `json:"op"`
	Blob string `json:"blob"`
	Len  int64  `json:"len"`
	Type string `json:"type,omitempty"`
	Aud  string `json:"aud"`
	Exp  int64  `json:"exp"`
}

func blobPayload(g BlobGrant, aud string, exp int64) []byte {
	var pj []byte
	if g.Op == BlobPut {
		pj, _ = json.Marshal(blobPutPayload{V: Version, Op: string(BlobPut), Blob: g.Blob, Len: g.ByteLength, Type: g.MediaType, Aud: aud, Exp: exp})
	} else {
		pj, _ = json.Marshal(blobGetPayload{V: Version, Blob: g.Blob, Aud: aud, Exp: exp})
	}
	return pj
}

// MintBlob returns the query of a blob URL granting g, its parameters in
// the order above (its Expires is ignored: the URL expires ttl after now,
// ttl capped at MaxTTL; a ttl of 0 or less mints a URL that expires at
// now). It also returns the expiry in unix milliseconds, second-aligned
// (the urlExpiresAtMs of the answer).
func (s *Signer) MintBlob(g BlobGrant, now time.Time, ttl time.Duration) (query string, expiresAtMs int64) {
	exp := now.Unix()
	if ttl > 0 {
		exp = now.Add(min(ttl, MaxTTL)).Unix()
	}
	if g.Op != BlobPut {
		g.ByteLength, g.MediaType = 0, ""
	}
	aud := s.SealPartition(g.Partition)
	var b strings.Builder
	param := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k + "=" + url.QueryEscape(v))
	}
	param(ParamOp, string(g.Op))
	if g.Op == BlobPut {
		param(ParamLength, strconv.FormatInt(g.ByteLength, 10))
		if g.MediaType != "" {
			param(ParamType, g.MediaType)
		}
	}
	param(ParamAudience, aud)
	param(ParamExpires, strconv.FormatInt(exp, 10))
	param(ParamSig, base64.RawURLEncoding.EncodeToString(s.mac(blobPayload(g, aud, exp))))
	return b.String(), exp * 1000
}

// VerifyBlob checks a blob URL's query for the blob of its path: the MAC,
// the operation, and the expiry (with Skew) at now. It returns the grant.
func (s *Signer) VerifyBlob(blob string, q url.Values, now time.Time) (BlobGrant, error) {
	for _, k := range []string{ParamOp, ParamAudience, ParamExpires, ParamSig} {
		if len(q[k]) != 1 || q.Get(k) == "" {
			return BlobGrant{}, ErrMalformed
		}
	}
	g := BlobGrant{Op: BlobOp(q.Get(ParamOp)), Blob: blob}
	switch g.Op {
	case BlobGet:
		if q.Has(ParamLength) || q.Has(ParamType) {
			return BlobGrant{}, ErrMalformed
		}
	case BlobPut:
		n, err := strconv.ParseInt(q.Get(ParamLength), 10, 64)
		if err != nil || n < 0 || len(q[ParamLength]) != 1 || strconv.FormatInt(n, 10) != q.Get(ParamLength) {
			return BlobGrant{}, ErrMalformed
		}
		g.ByteLength = n
		if len(q[ParamType]) > 1 || (q.Has(ParamType) && q.Get(ParamType) == "") {
			return BlobGrant{}, ErrMalformed
		}
		g.MediaType = q.Get(ParamType)
	default:
		return BlobGrant{}, ErrMalformed
	}
	exp, err := strconv.ParseInt(q.Get(ParamExpires), 10, 64)
	if err != nil || exp <= 0 || strconv.FormatInt(exp, 10) != q.Get(ParamExpires) {
		return BlobGrant{}, ErrMalformed
	}
	g.Expires = exp
	mac, err := base64.RawURLEncoding.DecodeString(q.Get(ParamSig))
	if err != nil {
		return BlobGrant{}, ErrMalformed
	}
	aud := q.Get(ParamAudience)
	k := s.verifying(blobPayload(g, aud, exp), mac)
	if k == nil {
		return BlobGrant{}, ErrSignature
	}
	if g.Partition, err = k.openPartition(aud); err != nil {
		return BlobGrant{}, err
	}
	if now.Unix() > exp+int64(Skew/time.Second) {
		return BlobGrant{}, ErrExpired
	}
	return g, nil
}

// audience keys, derived from the signing key so one key file serves
// segments and blobs without reusing a key across purposes.
func (k *signingKey) audienceKeys() (aead cipher.AEAD, nonceKey []byte) {
	k.blobOnce.Do(func() {
		enc := hmac.New(sha256.New, k.key)
		enc.Write([]byte("syncd blob audience encryption v1"))
		block, _ := aes.NewCipher(enc.Sum(nil)) // a 32-byte key: AES-256
		k.blobAEAD, _ = cipher.NewGCM(block)
		n := hmac.New(sha256.New, k.key)
		n.Write([]byte("syncd blob audience nonce v1"))
		k.blobNonce = n.Sum(nil)
	})
	return k.blobAEAD, k.blobNonce
}

var audienceAD = []byte("syncd blob audience")

// SealPartition returns the blob audience of partition under the newest
// key: the partition encrypted with AES-256-GCM under a nonce derived from
// it by HMAC (a synthetic IV), so the same partition always seals to the
// same value.
func (s *Signer) SealPartition(partition string) string {
	aead, nk := s.newest().audienceKeys()
	m := hmac.New(sha256.New, nk)
	m.Write([]byte(partition))
	nonce := m.Sum(nil)[:aead.NonceSize()]
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(partition), audienceAD))
}

// ErrAudience refuses a blob audience this signer did not seal.
var ErrAudience = errors.New("signed url audience does not open")

// OpenPartition returns the partition a blob audience seals, under any
// key of the set.
func (s *Signer) OpenPartition(aud string) (string, error) {
	err := error(ErrAudience)
	for _, k := range s.keys() {
		var p string
		if p, err = k.openPartition(aud); err == nil {
			return p, nil
		}
	}
	return "", err
}

func (k *signingKey) openPartition(aud string) (string, error) {
	aead, nk := k.audienceKeys()
	b, err := base64.RawURLEncoding.DecodeString(aud)
	if err != nil || len(b) < aead.NonceSize()+aead.Overhead() {
		return "", ErrMalformed
	}
	nonce := b[:aead.NonceSize()]
	p, err := aead.Open(nil, nonce, b[aead.NonceSize():], audienceAD)
	if err != nil {
		return "", ErrAudience
	}
	m := hmac.New(sha256.New, nk)
	m.Write(p)
	if !hmac.Equal(m.Sum(nil)[:aead.NonceSize()], nonce) {
		return "", ErrAudience
	}
	return string(p), nil
}
