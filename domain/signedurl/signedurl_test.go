package signedurl

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestFormat(t *testing.T) {
	s, err := NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	tok := s.Sign(Claims{Segment: "sha256:ab", ScopeDigest: "dd", Audience: "aa", Expires: 1700000000})
	p64, _, _ := strings.Cut(tok, ".")
	pj, err := base64.RawURLEncoding.DecodeString(p64)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"seg":"sha256:ab","sd":"dd","aud":"aa","exp":1700000000}`; string(pj) != want {
		t.Fatalf("payload %s, want %s", pj, want)
	}
	if strings.ContainsAny(tok, "+/=") {
		t.Fatalf("token %q is not unpadded base64url", tok)
	}
}

func TestShortKey(t *testing.T) {
	if _, err := NewSigner(key[:31]); err == nil {
		t.Fatal("31-byte key accepted")
	}
}

func TestAudience(t *testing.T) {
	s, _ := NewSigner(key)
	other, _ := NewSigner([]byte(strings.Repeat("k", 32)))
	again, _ := NewSigner(key)
	if s.Audience("p1") != again.Audience("p1") || s.Audience("p1") == s.Audience("p2") {
		t.Fatal("audience not stable per partition")
	}
	if s.Audience("p1") == other.Audience("p1") || strings.Contains(s.Audience("p1"), "p1") {
		t.Fatal("audience does not depend on the key")
	}
}

func TestMint(t *testing.T) {
	s, _ := NewSigner(key)
	now := time.Unix(1000, 500e6)
	tok, expMs := s.Mint("sha256:x", "d", "p", now, time.Hour)
	if expMs != (1000+900)*1000 {
		t.Fatalf("expiry %d: TTL not capped at 15 min", expMs)
	}
	c, err := s.Verify(tok, now)
	if err != nil || c.Segment != "sha256:x" || c.ScopeDigest != "d" || c.Audience != s.Audience("p") || c.Expires*1000 != expMs {
		t.Fatalf("Verify = %+v %v", c, err)
	}
}

func TestVerify(t *testing.T) {
	s, _ := NewSigner(key)
	now := time.Unix(10_000, 0)
	good := Claims{Segment: "sha256:seg", ScopeDigest: "digest", Audience: s.Audience("p1"), Expires: 10_300}
	tok := s.Sign(good)
	p64, m64, _ := strings.Cut(tok, ".")
	forged := func(json string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(json)) + "." + m64
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	resign := func(json string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(json)) + "." + base64.RawURLEncoding.EncodeToString(s.mac([]byte(json)))
	}
	for _, tc := range []struct {
		name  string
		token string
		now   time.Time
		want  error
	}{
		{"valid", tok, now, nil},
		{"valid within skew", tok, time.Unix(10_360, 0), nil},
		{"expired past skew", tok, time.Unix(10_361, 0), ErrExpired},
		{"altered payload", forged(`{"v":1,"seg":"sha256:other","sd":"digest","aud":"` + good.Audience + `","exp":10300}`), now, ErrSignature},
		{"extended exp", forged(`{"v":1,"seg":"sha256:seg","sd":"digest","aud":"` + good.Audience + `","exp":99999}`), now, ErrSignature},
		{"altered mac", p64 + "." + flip(m64, 3), now, ErrSignature},
		{"truncated mac", p64 + "." + m64[:20], now, ErrSignature},
		{"foreign key", mustSigner(t, strings.Repeat("z", 32)).Sign(good), now, ErrSignature},
		{"no dot", p64, now, ErrMalformed},
		{"empty", "", now, ErrMalformed},
		{"bad base64", p64 + "." + m64 + "!", now, ErrMalformed},
		{"padded", p64 + "=." + m64, now, ErrMalformed},
		{"version 2", resign(`{"v":2,"seg":"s","sd":"d","aud":"a","exp":10300}`), now, ErrMalformed},
		{"missing sd", resign(`{"v":1,"seg":"s","aud":"a","exp":10300}`), now, ErrMalformed},
		{"unknown field", resign(`{"v":1,"seg":"s","sd":"d","aud":"a","exp":10300,"x":1}`), now, ErrMalformed},
		{"not json", resign(`nope`), now, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.Verify(tc.token, tc.now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tc.want)
			}
			if c.key = nil; tc.want == nil && c != good {
				t.Fatalf("claims %+v, want %+v", c, good)
			}
		})
	}
}

// A rotated set signs with its new key and still verifies what the old
// one signed, segment tokens and blob URLs alike, with the audience the
// signing key derived.
func TestRotationKeepsIssuedURLsValid(t *testing.T) {
	oldKey, newKey := key, []byte(strings.Repeat("n", 32))
	old := mustSigner(t, string(oldKey))
	now := time.Unix(10_000, 0)
	tok, _ := old.Mint("sha256:seg", "digest", "p1", now, time.Minute)
	q, _ := old.MintBlob(BlobGrant{Op: BlobGet, Blob: "b1", Partition: "tenant"}, now, time.Minute)

	rotated, err := NewSigner(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rotated.Verify(tok, now)
	if err != nil || !rotated.MatchesAudience(c, "p1") || rotated.MatchesAudience(c, "p2") {
		t.Fatalf("an old key's token after the rotation: %+v, %v", c, err)
	}
	if c.Audience == rotated.Audience("p1") {
		t.Fatal("the rotated set derives the audience from its old key")
	}
	qv, _ := url.ParseQuery(q)
	if g, err := rotated.VerifyBlob("b1", qv, now); err != nil || g.Partition != "tenant" {
		t.Fatalf("an old key's blob URL after the rotation: %+v, %v", g, err)
	}
	// New URLs are the new key's: a server that has not rotated yet
	// refuses them, one that dropped the old key refuses the old ones.
	fresh, _ := rotated.Mint("sha256:seg", "digest", "p1", now, time.Minute)
	if _, err := old.Verify(fresh, now); !errors.Is(err, ErrSignature) {
		t.Fatalf("the old set verified the new key's token: %v", err)
	}
	if err := rotated.SetKeys(newKey); err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Verify(tok, now); !errors.Is(err, ErrSignature) {
		t.Fatalf("a dropped key still verifies: %v", err)
	}
	if c, err := rotated.Verify(fresh, now); err != nil || !rotated.MatchesAudience(c, "p1") {
		t.Fatalf("after dropping the old key: %v", err)
	}
	// A failed SetKeys changes nothing.
	if err := rotated.SetKeys([]byte("short")); err == nil || rotated.Len() != 1 {
		t.Fatalf("SetKeys(short) = %v, %d keys", err, rotated.Len())
	}
	if _, err := NewSigner(oldKey, newKey, oldKey); err == nil {
		t.Fatal("a repeated key was accepted")
	}
	if _, err := NewSigner(); err == nil {
		t.Fatal("no key was accepted")
	}
}

func mustSigner(t *testing.T, k string) *Signer {
	t.Helper()
	s, err := NewSigner([]byte(k))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func FuzzVerify(f *testing.F) {
	s, _ := NewSigner(key)
	f.Add(s.Sign(Claims{Segment: "a", ScopeDigest: "b", Audience: "c", Expires: 5}))
	f.Add("x.y")
	f.Fuzz(func(t *testing.T, tok string) {
		_, _ = s.Verify(tok, time.Unix(0, 0))
	})
}
