package callout_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/callout"
)

// TestVerifyAcceptsWhatSignMade walks a backend's verification of the
// Syncd-Signature header: any key of the backend's set that signed
// verifies, within the tolerance either side; a changed body, a key the
// server does not hold, a stale timestamp or a malformed header does not.
func TestVerifyAcceptsWhatSignMade(t *testing.T) {
	oldKey := []byte(strings.Repeat("o", 32))
	newKey := []byte(strings.Repeat("n", 40))
	other := []byte(strings.Repeat("x", 32))
	at := time.Unix(1_800_000_000, 0)
	body := []byte(`{"actorId":"alice","partition":"acme","clientId":""}`)
	rotating := callout.Sign([][]byte{newKey, oldKey}, at, body)
	tests := []struct {
		name    string
		header  string
		body    []byte
		keys    [][]byte
		now     time.Time
		wantErr error
	}{
		{"the backend holds the old key", rotating, body, [][]byte{oldKey}, at, nil},
		{"the backend holds the new key", rotating, body, [][]byte{newKey}, at, nil},
		{"within the tolerance after", rotating, body, [][]byte{oldKey}, at.Add(5 * time.Minute), nil},
		{"within the tolerance before", rotating, body, [][]byte{oldKey}, at.Add(-5 * time.Minute), nil},
		{"past the tolerance", rotating, body, [][]byte{oldKey}, at.Add(5*time.Minute + time.Second), callout.ErrStaleSignature},
		{"another body", rotating, []byte(`{"actorId":"mallory"}`), [][]byte{oldKey}, at, callout.ErrBadSignature},
		{"another key", rotating, body, [][]byte{other}, at, callout.ErrBadSignature},
		{"a later scheme beside v1 is skipped", rotating + ",v2=zz", body, [][]byte{newKey}, at, nil},
		{"no header", "", body, [][]byte{oldKey}, at, callout.ErrMalformedSignature},
		{"no timestamp", "v1=" + strings.Repeat("ab", 32), body, [][]byte{oldKey}, at, callout.ErrMalformedSignature},
		{"no signature", "t=1800000000", body, [][]byte{oldKey}, at, callout.ErrMalformedSignature},
		{"two timestamps", rotating + ",t=1800000000", body, [][]byte{oldKey}, at, callout.ErrMalformedSignature},
		{"short signature", "t=1800000000,v1=abcd", body, [][]byte{oldKey}, at, callout.ErrMalformedSignature},
		{"not hex", "t=1800000000,v1=" + strings.Repeat("zz", 32), body, [][]byte{oldKey}, at, callout.ErrMalformedSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := callout.Verify(tt.header, tt.body, tt.keys, tt.now, 5*time.Minute)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestSignIsTheDocumentedHMAC pins the signed string, so a backend in
// another language can be checked against the same vector
// (docs/callout.md shows it).
func TestSignIsTheDocumentedHMAC(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	got := callout.Sign([][]byte{key}, time.Unix(1_800_000_000, 0), []byte(`{"accept":true}`))
	const want = "t=1800000000,v1=" + vectorSignature
	if got != want {
		t.Fatalf("Sign = %s\nwant   %s", got, want)
	}
}

func TestCheckKeys(t *testing.T) {
	for _, tt := range []struct {
		name string
		keys [][]byte
		ok   bool
	}{
		{"none", nil, false},
		{"short", [][]byte{[]byte("short")}, false},
		{"one long enough", [][]byte{[]byte(strings.Repeat("k", 32))}, true},
		{"a short one among them", [][]byte{[]byte(strings.Repeat("k", 32)), []byte("k")}, false},
	} {
		if err := callout.CheckKeys(tt.keys); (err == nil) != tt.ok {
			t.Errorf("%s: CheckKeys = %v", tt.name, err)
		}
	}
}

// vectorSignature is HMAC-SHA256("0123456789abcdef0123456789abcdef",
// `1800000000.{"accept":true}`), computed outside Go (Python's hmac).
const vectorSignature = "bee32adf779ad2c4e0c4b41f9cf8e1d11f3b1feb4494878fc20e59b7e51739fa"

// TestEscapeHeaderKeyRoundTrips: a key of printable ASCII without "%"
// travels as it is; any other key is percent-decoded back exactly.
func TestEscapeHeaderKeyRoundTrips(t *testing.T) {
	tests := []struct{ key, want string }{
		{`["acme","phone","c-1","welcome:p-1"]`, `["acme","phone","c-1","welcome:p-1"]`},
		{`["acme","ph one","50%","é"]`, `["acme","ph%20one","50%25","%C3%A9"]`},
		{"a\nb\x7f", "a%0Ab%7F"},
	}
	for _, tt := range tests {
		got := callout.EscapeHeaderKey(tt.key)
		if got != tt.want {
			t.Errorf("EscapeHeaderKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
		if back, err := url.PathUnescape(got); err != nil || back != tt.key {
			t.Errorf("PathUnescape(%q) = %q, %v", got, back, err)
		}
	}
	if p := callout.ReactionPath("mail/send"); p != "reactions/mail%2Fsend" {
		t.Errorf("ReactionPath = %q", p)
	}
	if p := callout.CommandPath("tasks.complete"); p != "commands/tasks.complete" {
		t.Errorf("CommandPath = %q", p)
	}
}
