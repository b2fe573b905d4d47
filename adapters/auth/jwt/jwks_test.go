package jwt_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/auth/jwt"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// jwksServer serves a JWK set that a test swaps, or a failure status.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	hits   int
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits++
		w.WriteHeader(s.status)
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(body []byte, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.status = body, status
}

func (s *jwksServer) fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// entry is one key of a served set.
type entry struct {
	kid string
	key any    // public key, or []byte for an oct key
	alg string // declared alg; "" leaves it out
	use string
}

func jwksBody(t *testing.T, entries ...entry) []byte {
	t.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, e := range entries {
		opts := jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: e.kid, ALG: jwkset.ALG(e.alg), USE: jwkset.USE(e.use)}}
		if _, oct := e.key.([]byte); oct {
			opts.Marshal.Private = true
		}
		k, err := jwkset.NewJWKFromKey(e.key, opts)
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, k.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signKID(t *testing.T, m gojwt.SigningMethod, key any, kid string, claims gojwt.MapClaims) string {
	t.Helper()
	tok := gojwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sleeper hands the refresh loop's waits to the test: each Sleep call
// reports its duration and returns when the test wakes it, so "the next
// refresh has finished" is "the loop asked to sleep again".
type sleeper struct {
	calls chan time.Duration
	wake  chan struct{}
}

func newSleeper() *sleeper {
	return &sleeper{calls: make(chan time.Duration), wake: make(chan struct{})}
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case s.calls <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// started builds and starts an Authenticator on url, stopped at cleanup.
func started(t *testing.T, opts jwt.Options) *jwt.Authenticator {
	t.Helper()
	a, err := jwt.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return a
}

func authenticate(a *jwt.Authenticator, token string) error {
	r := httptest.NewRequest("POST", "/sync", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	_, err := a.Authenticate(r)
	return err
}

func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestJWKSKeySelection(t *testing.T) {
	k := fixtures(t)
	ec := ecKey(t, elliptic.P256())
	ec384 := ecKey(t, elliptic.P384())
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	several := jwksBody(t,
		entry{kid: "rs-1", key: k.rsa.Public(), alg: "RS256", use: "sig"},
		entry{kid: "rs-2", key: k.otherRSA.Public()},
		entry{kid: "ed-1", key: k.ed.Public()},
		entry{kid: "ec-1", key: ec.Public(), alg: "ES256"},
		entry{kid: "hs-1", key: k.secret, alg: "HS256"},
		entry{kid: "rs-384", key: k.otherRSA.Public(), alg: "RS384"},
		entry{kid: "rs-enc", key: k.rsa.Public(), use: "enc"},
		entry{kid: "rs-small", key: small.Public()},
		entry{kid: "ec-384", key: ec384.Public()},
	)
	oneRSA := jwksBody(t, entry{key: k.rsa.Public()})
	tests := []struct {
		name   string
		set    []byte
		alg    string // Options.Algorithm
		method gojwt.SigningMethod
		key    any
		kid    string
		header map[string]any
		ok     bool
	}{
		{name: "RS256 by kid", set: several, method: gojwt.SigningMethodRS256, key: k.rsa, kid: "rs-1", ok: true},
		{name: "the second RSA key by its kid", set: several, method: gojwt.SigningMethodRS256, key: k.otherRSA, kid: "rs-2", ok: true},
		{name: "EdDSA by kid", set: several, method: gojwt.SigningMethodEdDSA, key: k.ed, kid: "ed-1", ok: true},
		{name: "ES256 by kid", set: several, method: gojwt.SigningMethodES256, key: ec, kid: "ec-1", ok: true},
		{name: "signed by another key than its kid names", set: several, method: gojwt.SigningMethodRS256, key: k.otherRSA, kid: "rs-1"},
		{name: "kid of a key of another type", set: several, method: gojwt.SigningMethodEdDSA, key: k.ed, kid: "rs-1"},
		{name: "HS256 with the JWKS oct key", set: several, method: gojwt.SigningMethodHS256, key: k.secret, kid: "hs-1"},
		{name: "alg none", set: several, method: gojwt.SigningMethodNone, key: gojwt.UnsafeAllowNoneSignatureType, kid: "rs-1"},
		{name: "RS256 against a key declared RS384", set: several, method: gojwt.SigningMethodRS256, key: k.otherRSA, kid: "rs-384"},
		{name: "RS384 is not accepted", set: several, method: gojwt.SigningMethodRS384, key: k.otherRSA, kid: "rs-384"},
		{name: "encryption key", set: several, method: gojwt.SigningMethodRS256, key: k.rsa, kid: "rs-enc"},
		{name: "RSA key under 2048 bits", set: several, method: gojwt.SigningMethodRS256, key: small, kid: "rs-small"},
		{name: "P-384 key", set: several, method: gojwt.SigningMethodES384, key: ec384, kid: "ec-384"},
		{name: "no kid, two keys for the alg", set: several, method: gojwt.SigningMethodRS256, key: k.rsa},
		{name: "no kid, the one key for the alg among several", set: several, method: gojwt.SigningMethodEdDSA, key: k.ed, ok: true},
		{name: "no kid, one key for the alg", set: oneRSA, method: gojwt.SigningMethodRS256, key: k.rsa, ok: true},
		{name: "kid header not a string", set: oneRSA, method: gojwt.SigningMethodRS256, key: k.rsa, header: map[string]any{"kid": 7}},
		{name: "algorithm narrowed to EdDSA refuses RS256", set: several, alg: jwt.EdDSA, method: gojwt.SigningMethodRS256, key: k.rsa, kid: "rs-1"},
		{name: "algorithm narrowed to EdDSA accepts EdDSA", set: several, alg: jwt.EdDSA, method: gojwt.SigningMethodEdDSA, key: k.ed, kid: "ed-1", ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newJWKSServer(t, tc.set)
			clk := &fakeClock{t: now}
			a := started(t, jwt.Options{JWKSURL: srv.URL, Algorithm: tc.alg, Now: clk.Now, Sleep: newSleeper().Sleep})
			tok := gojwt.NewWithClaims(tc.method, base(nil))
			if tc.kid != "" {
				tok.Header["kid"] = tc.kid
			}
			for h, v := range tc.header {
				tok.Header[h] = v
			}
			raw, err := tok.SignedString(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			err = authenticate(a, raw)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err != nil && syncerr.CodeOf(err) != syncerr.AuthRequired {
				t.Fatalf("err = %v, want sync.auth_required", err)
			}
		})
	}
}

// TestJWKSRotation: a token whose kid is not cached prompts one refetch,
// which picks up a rotated key; further unknown kids within the
// refetch window are refused without asking the issuer again.
func TestJWKSRotation(t *testing.T) {
	k := fixtures(t)
	srv := newJWKSServer(t, jwksBody(t, entry{kid: "old", key: k.rsa.Public()}))
	clk := &fakeClock{t: now}
	a := started(t, jwt.Options{JWKSURL: srv.URL, Now: clk.Now, Sleep: newSleeper().Sleep})
	rotated := jwksBody(t, entry{kid: "new", key: k.otherRSA.Public()}, entry{kid: "ed", key: k.ed.Public()})
	steps := []struct {
		name    string
		advance time.Duration
		serve   []byte
		token   string
		ok      bool
		fetches int // total JWKS requests after the step
	}{
		{name: "cached kid", token: signKID(t, gojwt.SigningMethodRS256, k.rsa, "old", base(nil)), ok: true, fetches: 1},
		{name: "unknown kid within the window after start: refused, not refetched", advance: 5 * time.Second, serve: rotated,
			token: signKID(t, gojwt.SigningMethodRS256, k.otherRSA, "new", base(nil)), fetches: 1},
		{name: "unknown kid after the window: one refetch finds the rotated key", advance: 5 * time.Second,
			token: signKID(t, gojwt.SigningMethodRS256, k.otherRSA, "new", base(nil)), ok: true, fetches: 2},
		{name: "another key of the refetched set, no fetch", token: signKID(t, gojwt.SigningMethodEdDSA, k.ed, "ed", base(nil)), ok: true, fetches: 2},
		{name: "rotated-out kid within the window: refused, not refetched", advance: 9 * time.Second,
			token: signKID(t, gojwt.SigningMethodRS256, k.rsa, "old", base(nil)), fetches: 2},
		{name: "made-up kid within the window: refused, not refetched",
			token: signKID(t, gojwt.SigningMethodRS256, k.rsa, "forged", base(nil)), fetches: 2},
		{name: "made-up kid after the window: one refetch, still refused", advance: time.Second,
			token: signKID(t, gojwt.SigningMethodRS256, k.rsa, "forged", base(nil)), fetches: 3},
	}
	for _, s := range steps {
		clk.advance(s.advance)
		if s.serve != nil {
			srv.serve(s.serve, http.StatusOK)
		}
		err := authenticate(a, s.token)
		if s.ok != (err == nil) {
			t.Fatalf("%s: err = %v, want ok %v", s.name, err, s.ok)
		}
		if got := srv.fetches(); got != s.fetches {
			t.Fatalf("%s: %d JWKS fetches, want %d", s.name, got, s.fetches)
		}
	}
}

// TestJWKSUnknownKIDFlood: many requests at once with made-up kids cost
// the issuer one fetch.
func TestJWKSUnknownKIDFlood(t *testing.T) {
	k := fixtures(t)
	srv := newJWKSServer(t, jwksBody(t, entry{kid: "a", key: k.ed.Public()}))
	clk := &fakeClock{t: now}
	a := started(t, jwt.Options{JWKSURL: srv.URL, Now: clk.Now, Sleep: newSleeper().Sleep})
	clk.advance(time.Minute)
	var wg sync.WaitGroup
	for i := range 50 {
		tok := signKID(t, gojwt.SigningMethodEdDSA, k.ed, fmt.Sprintf("kid-%d", i), base(nil))
		wg.Go(func() {
			if err := authenticate(a, tok); err == nil {
				t.Error("made-up kid accepted")
			}
		})
	}
	wg.Wait()
	if got := srv.fetches(); got != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (start and one refetch)", got)
	}
}

// TestJWKSBackgroundRefresh: the refresh loop picks up a rotated set
// without any token asking, keeps the cached set while the issuer is
// down, and waits the jittered refresh interval between fetches.
func TestJWKSBackgroundRefresh(t *testing.T) {
	k := fixtures(t)
	srv := newJWKSServer(t, jwksBody(t, entry{kid: "one", key: k.ed.Public()}))
	clk := &fakeClock{t: now}
	sl := newSleeper()
	a := started(t, jwt.Options{JWKSURL: srv.URL, JWKSRefresh: time.Minute, Now: clk.Now, Sleep: sl.Sleep})
	one := signKID(t, gojwt.SigningMethodEdDSA, k.ed, "one", base(nil))
	two := signKID(t, gojwt.SigningMethodEdDSA, k.otherEd, "two", base(nil))
	rotated := jwksBody(t, entry{kid: "two", key: k.otherEd.Public()})
	steps := []struct {
		name     string
		serve    []byte
		status   int
		accepted []string
		refused  []string
	}{
		{name: "issuer down: cached key keeps verifying", status: http.StatusServiceUnavailable, accepted: []string{one}},
		{name: "issuer serves garbage: cached key keeps verifying", serve: []byte("<html>"), status: http.StatusOK, accepted: []string{one}},
		{name: "rotation picked up by the refresh", serve: rotated, status: http.StatusOK, accepted: []string{two}, refused: []string{one}},
		{name: "issuer down again: the rotated key stays", status: http.StatusInternalServerError, accepted: []string{two}},
	}
	checkWait := func(d time.Duration) {
		t.Helper()
		if d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("refresh wait %s, want 1m ±10%%", d)
		}
	}
	checkWait(<-sl.calls) // the loop is idle, waiting for the first refresh
	for i, s := range steps {
		srv.mu.Lock()
		if s.serve != nil {
			srv.body = s.serve
		}
		srv.status = s.status
		srv.mu.Unlock()
		sl.wake <- struct{}{}
		checkWait(<-sl.calls) // the refresh is done, the loop waits for the next
		if got := srv.fetches(); got != i+2 {
			t.Fatalf("%s: %d fetches, want %d", s.name, got, i+2)
		}
		for _, tok := range s.accepted {
			if err := authenticate(a, tok); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		for _, tok := range s.refused {
			if err := authenticate(a, tok); err == nil {
				t.Fatalf("%s: a rotated-out key still verifies", s.name)
			}
		}
	}
}

func TestJWKSStart(t *testing.T) {
	k := fixtures(t)
	good := jwksBody(t, entry{kid: "a", key: k.rsa.Public()})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	tests := []struct {
		name    string
		body    []byte
		status  int
		url     string // overrides the test server
		lazy    bool
		wantErr string
	}{
		{name: "reachable", body: good, status: http.StatusOK},
		{name: "unreachable", url: down.URL + "/jwks.json", wantErr: down.URL + "/jwks.json"},
		{name: "unreachable, lazy", url: down.URL + "/jwks.json", lazy: true},
		{name: "error status", body: good, status: http.StatusNotFound, wantErr: "HTTP status 404"},
		{name: "not JSON", body: []byte("<html>"), status: http.StatusOK, wantErr: "not a JWK set"},
		{name: "only an HS256 key", body: jwksBody(t, entry{kid: "hs", key: k.secret, alg: "HS256"}), status: http.StatusOK,
			wantErr: "no usable signing key"},
		{name: "body over 1 MiB", body: []byte(`{"keys":[],"pad":"` + strings.Repeat("x", 1<<20) + `"}`), status: http.StatusOK,
			wantErr: "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			if url == "" {
				srv := newJWKSServer(t, tc.body)
				srv.serve(tc.body, tc.status)
				url = srv.URL
			}
			a, err := jwt.New(jwt.Options{JWKSURL: url, JWKSLazy: tc.lazy, Sleep: newSleeper().Sleep})
			if err != nil {
				t.Fatal(err)
			}
			err = a.Start(t.Context())
			t.Cleanup(func() { _ = a.Stop(context.Background()) })
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), url) {
				t.Fatalf("Start: %v, want an error naming %s and %q", err, url, tc.wantErr)
			}
		})
	}
}

// TestJWKSLazy: a lazy start fetches in the background; until a fetch
// succeeds tokens are refused, then they verify.
func TestJWKSLazy(t *testing.T) {
	k := fixtures(t)
	srv := newJWKSServer(t, nil)
	srv.serve(nil, http.StatusServiceUnavailable)
	clk := &fakeClock{t: now}
	sl := newSleeper()
	a := started(t, jwt.Options{JWKSURL: srv.URL, JWKSLazy: true, Now: clk.Now, Sleep: sl.Sleep})
	tok := signKID(t, gojwt.SigningMethodRS256, k.rsa, "a", base(nil))
	if d := <-sl.calls; d > 11*time.Second { // first fetch failed; retry at the refetch interval
		t.Fatalf("retry after %s, want about 10s", d)
	}
	if err := authenticate(a, tok); err == nil {
		t.Fatal("token accepted with no key loaded")
	}
	srv.serve(jwksBody(t, entry{kid: "a", key: k.rsa.Public()}), http.StatusOK)
	sl.wake <- struct{}{}
	if d := <-sl.calls; d < 4*time.Minute {
		t.Fatalf("after a successful fetch the loop waits %s, want the 5m refresh", d)
	}
	if err := authenticate(a, tok); err != nil {
		t.Fatal(err)
	}
}

func TestJWKSNewValidates(t *testing.T) {
	k := fixtures(t)
	tests := []struct {
		name string
		opts jwt.Options
	}{
		{"JWKS URL and key", jwt.Options{JWKSURL: "https://id.example/jwks", Algorithm: jwt.RS256, Key: &k.rsa.PublicKey}},
		{"JWKS URL and key file", jwt.Options{JWKSURL: "https://id.example/jwks", KeyFile: "/k"}},
		{"HS256 from a JWKS", jwt.Options{JWKSURL: "https://id.example/jwks", Algorithm: jwt.HS256}},
		{"not an http URL", jwt.Options{JWKSURL: "file:///etc/jwks.json"}},
		{"no host", jwt.Options{JWKSURL: "https:///jwks"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := jwt.New(tc.opts); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

// TestJWKSLogs: an unknown kid is logged at info with the reason; token
// bytes never reach the log.
func TestJWKSLogs(t *testing.T) {
	k := fixtures(t)
	srv := newJWKSServer(t, jwksBody(t, entry{kid: "a", key: k.ed.Public()}))
	core, logs := observer.New(zapcore.DebugLevel)
	clk := &fakeClock{t: now}
	a := started(t, jwt.Options{JWKSURL: srv.URL, Now: clk.Now, Sleep: newSleeper().Sleep, Log: zap.New(core)})
	logs.TakeAll()
	tok := signKID(t, gojwt.SigningMethodEdDSA, k.ed, "b", base(nil))
	if err := authenticate(a, tok); err == nil {
		t.Fatal("unknown kid accepted")
	}
	refused := logs.FilterMessage("bearer token refused").TakeAll()
	if len(refused) != 1 || refused[0].Level != zapcore.InfoLevel {
		t.Fatalf("want one info line, got %+v", refused)
	}
	line := fmt.Sprint(refused[0].ContextMap())
	if !strings.Contains(line, `kid "b"`) || !strings.Contains(line, "refetched less than 10s ago") {
		t.Fatalf("reason %q", line)
	}
	for _, part := range strings.Split(tok, ".") {
		if strings.Contains(line, part) {
			t.Fatalf("line %q carries the token", line)
		}
	}
}
