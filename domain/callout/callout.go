// Package callout is the contract between syncd and a team's backend that
// answers the server's callbacks over HTTP (docs/callout.md): its
// version, the callbacks' paths and headers, and the signing rule a
// backend checks every request with. It is pure: the time is an argument
// and the keys are bytes, so a backend's verification can be shown and
// tested with the same functions the server signs with.
package callout

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Version is the contract's version, sent with every callout in
// HeaderVersion. A change a backend written against it could misread
// (a field's meaning, a required field, a status) takes a new version.
const Version = 1

// The callbacks' paths under --callout-url.
const (
	PathAuthenticate  = "authenticate"
	PathResolveScopes = "resolve-scopes"
	PathValidate      = "validate"
	// PathCommands and PathReactions are the parents of one path per
	// command name and reaction type (CommandPath, ReactionPath).
	PathCommands  = "commands"
	PathReactions = "reactions"
)

// CommandPath is the path of the callout of the remote command name:
// commands/<name>, the name path-escaped (RFC 3986: a "/" in it is %2F),
// so every name is one path segment.
func CommandPath(name string) string { return PathCommands + "/" + url.PathEscape(name) }

// ReactionPath is the path of the callout of the reaction type typ:
// reactions/<type>, path-escaped like CommandPath.
func ReactionPath(typ string) string { return PathReactions + "/" + url.PathEscape(typ) }

// Headers of every callout.
const (
	// HeaderVersion carries Version.
	HeaderVersion = "Syncd-Callout-Version"
	// HeaderSignature carries the signature (Sign) when keys are set.
	HeaderSignature = "Syncd-Signature"
	// HeaderRequestID carries the id of the sync API request the callout
	// serves, when there is one (the same id the server logs).
	HeaderRequestID = "Syncd-Request-Id"
	// HeaderFeatures lists, comma-separated, the additions to Version the
	// callout may use. An addition is something a backend that ignores it
	// never meets, such as an answer it may choose to give; a backend
	// gives it only when this header lists it, so it runs against servers
	// from before the addition too.
	HeaderFeatures = "Syncd-Callout-Features"
)

// Features of HeaderFeatures.
const (
	// FeatureValidateQueries: a validate callout may be answered by asking
	// for registered queries ({"queries": [...]}), and is then asked again
	// with their results.
	FeatureValidateQueries = "validate-queries"
)

// Headers of a reaction's callout.
const (
	// HeaderIdempotencyKey carries the reaction's idempotency key, stable
	// across its attempts, escaped by EscapeHeaderKey.
	HeaderIdempotencyKey = "Syncd-Idempotency-Key"
	// HeaderReactionAttempt carries the attempt, counting from 1.
	HeaderReactionAttempt = "Syncd-Reaction-Attempt"
)

// EscapeHeaderKey renders an idempotency key as a header value: every
// byte outside printable ASCII (space included) and every "%" as %XX, so
// a key that holds neither (the usual case) travels as it is, and any key
// is recovered by percent-decoding (decodeURIComponent in JavaScript,
// url.PathUnescape in Go). A header cannot carry control characters, and
// servers read the bytes past ASCII in differing charsets.
func EscapeHeaderKey(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c <= ' ' || c >= 0x7f || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// MinKeyBytes is the least length of a signing key: HMAC-SHA256 keys
// shorter than its output weaken it (RFC 2104 §3).
const MinKeyBytes = 32

// maxSignatures bounds the v1 entries Verify reads from one header.
const maxSignatures = 16

// CheckKeys refuses an empty key set and keys shorter than MinKeyBytes.
func CheckKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("callout: no signing key")
	}
	for i, k := range keys {
		if len(k) < MinKeyBytes {
			return fmt.Errorf("callout: signing key %d has %d bytes, want at least %d", i+1, len(k), MinKeyBytes)
		}
	}
	return nil
}

// Sign returns the HeaderSignature value for body sent at t:
//
//	t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<unix seconds>.<body>")>
//
// with one v1 entry per key, in the keys' order. Signing with every key
// lets a key rotate in either order: a backend that holds any one of them
// verifies.
func Sign(keys [][]byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(ts)
	for _, k := range keys {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(k, ts, body)))
	}
	return b.String()
}

func mac(key []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Errors of Verify.
var (
	// ErrMalformedSignature: the header is absent or not of Sign's form.
	ErrMalformedSignature = errors.New("callout signature: malformed header")
	// ErrStaleSignature: the timestamp is further from now than the
	// tolerance (a replayed or badly delayed request, or a skewed clock).
	ErrStaleSignature = errors.New("callout signature: timestamp outside the tolerance")
	// ErrBadSignature: no v1 entry matches any key.
	ErrBadSignature = errors.New("callout signature: no signature matches a key")
)

// Verify checks a HeaderSignature value against the body as received:
// its timestamp within tolerance of now (either side), and a v1 entry
// that one of keys made. Entries of other schemes are skipped, so a
// later scheme can be sent beside v1.
func Verify(header string, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformedSignature
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrMalformedSignature
			}
			ts = v
		case "v1":
			s, err := hex.DecodeString(v)
			if err != nil || len(s) != sha256.Size || len(sigs) == maxSignatures {
				return ErrMalformedSignature
			}
			sigs = append(sigs, s)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformedSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStaleSignature
	}
	for _, k := range keys {
		want := mac(k, ts, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return nil
			}
		}
	}
	return ErrBadSignature
}
