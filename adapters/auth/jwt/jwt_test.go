package jwt_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/auth/jwt"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

type keys struct {
	secret, otherSecret []byte
	rsa, otherRSA       *rsa.PrivateKey
	ed, otherEd         ed25519.PrivateKey
	dir                 string
	rsaPEM, edPEM       []byte
}

var (
	keysOnce sync.Once
	testKeys keys
)

// fixtures generates keys once (RSA generation is slow) and writes the
// key files the Authenticator loads.
func fixtures(t *testing.T) keys {
	t.Helper()
	keysOnce.Do(func() {
		k := keys{
			secret:      []byte("0123456789abcdef0123456789abcdef"),
			otherSecret: []byte("ffffffffffffffffffffffffffffffff"),
		}
		var err error
		if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if k.otherRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if _, k.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
		if _, k.otherEd, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
		k.rsaPEM = pubPEM(k.rsa.Public())
		k.edPEM = pubPEM(k.ed.Public())
		testKeys = k
	})
	k := testKeys
	k.dir = t.TempDir()
	write(t, filepath.Join(k.dir, "hs.key"), append(append([]byte{}, k.secret...), '\n'))
	write(t, filepath.Join(k.dir, "rs.pem"), k.rsaPEM)
	write(t, filepath.Join(k.dir, "ed.pem"), k.edPEM)
	return k
}

func pubPEM(pub any) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func sign(t *testing.T, m gojwt.SigningMethod, key any, claims gojwt.MapClaims) string {
	t.Helper()
	s, err := gojwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signHeader signs claims with extra protected header parameters.
func signHeader(t *testing.T, key []byte, header map[string]any, claims gojwt.MapClaims) string {
	t.Helper()
	tok := gojwt.NewWithClaims(gojwt.SigningMethodHS256, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func base(extra gojwt.MapClaims) gojwt.MapClaims {
	c := gojwt.MapClaims{
		"sub": "alice",
		"exp": now.Add(time.Hour).Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func TestAuthenticate(t *testing.T) {
	k := fixtures(t)
	hs := jwt.Options{Algorithm: jwt.HS256, KeyFile: filepath.Join(k.dir, "hs.key")}
	rs := jwt.Options{Algorithm: jwt.RS256, KeyFile: filepath.Join(k.dir, "rs.pem")}
	ed := jwt.Options{Algorithm: jwt.EdDSA, KeyFile: filepath.Join(k.dir, "ed.pem")}
	custom := hs
	custom.ActorClaim, custom.PartitionClaim, custom.ScopesClaim = "uid", "tenant", "grants"
	custom.DefaultPartition = "main"
	aud := hs
	aud.Issuer, aud.Audience = "https://id.example", "syncd"
	noExp := hs
	noExp.AllowMissingExpiry = true
	strict := hs
	strict.Leeway = -1

	tests := []struct {
		name  string
		opts  jwt.Options
		token func() string
		auth  string // Authorization header override; "" uses Bearer token()
		want  ports.Identity
		fail  bool
	}{
		{name: "HS256", opts: hs, token: func() string { return sign(t, gojwt.SigningMethodHS256, k.secret, base(nil)) },
			want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "RS256", opts: rs, token: func() string { return sign(t, gojwt.SigningMethodRS256, k.rsa, base(nil)) },
			want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "EdDSA", opts: ed, token: func() string { return sign(t, gojwt.SigningMethodEdDSA, k.ed, base(nil)) },
			want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "partition and scopes claims", opts: hs, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{
				"partition": "acme", "scopes": map[string]any{"workspace_id": []any{"w1", "w2"}, "project_id": []any{"*"}},
			}))
		}, want: ports.Identity{ActorID: "alice", Partition: "acme", Scopes: scopes.Allowed{
			"workspace_id": {"w1", "w2"}, "project_id": {"*"},
		}}},
		{name: "configured claim names and default partition", opts: custom, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{
				"sub": nil, "uid": "u7", "grants": map[string]any{"org_id": []any{}},
			}))
		}, want: ports.Identity{ActorID: "u7", Partition: "main", Scopes: scopes.Allowed{"org_id": {}}}},
		{name: "expired", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}))
		}},
		{name: "expired within leeway", opts: hs, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix()}))
		}, want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "expired within the default 60s leeway", opts: hs, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"exp": now.Add(-50 * time.Second).Unix()}))
		}, want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "issued in the future beyond the leeway", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iat": now.Add(2 * time.Minute).Unix()}))
		}},
		{name: "issued in the future within the leeway", opts: hs, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iat": now.Add(30 * time.Second).Unix()}))
		}, want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "issued in the past", opts: hs, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iat": now.Add(-time.Hour).Unix()}))
		}, want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "no leeway: issued a few seconds ahead", opts: strict, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iat": now.Add(5 * time.Second).Unix()}))
		}},
		{name: "no leeway: expired a few seconds ago", opts: strict, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"exp": now.Add(-5 * time.Second).Unix()}))
		}},
		{name: "crit names an extension the server does not understand", opts: hs, fail: true, token: func() string {
			return signHeader(t, k.secret, map[string]any{"crit": []string{"b64"}, "b64": false}, base(nil))
		}},
		{name: "crit names a registered header", opts: hs, fail: true, token: func() string {
			return signHeader(t, k.secret, map[string]any{"crit": []string{"exp"}}, base(nil))
		}},
		{name: "malformed crit: a string", opts: hs, fail: true, token: func() string {
			return signHeader(t, k.secret, map[string]any{"crit": "b64"}, base(nil))
		}},
		{name: "malformed crit: empty", opts: hs, fail: true, token: func() string {
			return signHeader(t, k.secret, map[string]any{"crit": []string{}}, base(nil))
		}},
		{name: "malformed crit: not strings", opts: hs, fail: true, token: func() string {
			return signHeader(t, k.secret, map[string]any{"crit": []any{1}}, base(nil))
		}},
		{name: "not yet valid", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}))
		}},
		{name: "missing exp is refused by default", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"exp": nil}))
		}},
		{name: "missing exp allowed when configured", opts: noExp, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"exp": nil}))
		}, want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "wrong HMAC secret", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.otherSecret, base(nil))
		}},
		{name: "wrong RSA key", opts: rs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodRS256, k.otherRSA, base(nil))
		}},
		{name: "wrong Ed25519 key", opts: ed, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodEdDSA, k.otherEd, base(nil))
		}},
		{name: "alg confusion: HS256 signed with the RSA public key PEM", opts: rs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.rsaPEM, base(nil))
		}},
		{name: "wrong alg: RS512 against an RS256 key", opts: rs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodRS512, k.rsa, base(nil))
		}},
		{name: "alg none", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodNone, gojwt.UnsafeAllowNoneSignatureType, base(nil))
		}},
		{name: "missing actor claim", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"sub": nil}))
		}},
		{name: "non-string actor claim", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"sub": 42}))
		}},
		{name: "empty partition claim", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"partition": ""}))
		}},
		{name: "malformed scopes claim: string", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"scopes": "workspace_id:w1"}))
		}},
		{name: "malformed scopes claim: scalar value", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"scopes": map[string]any{"workspace_id": "w1"}}))
		}},
		{name: "malformed scopes claim: non-string element", opts: hs, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"scopes": map[string]any{"workspace_id": []any{1}}}))
		}},
		{name: "issuer and audience match", opts: aud, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iss": "https://id.example", "aud": "syncd"}))
		}, want: ports.Identity{ActorID: "alice", Partition: "default"}},
		{name: "audience mismatch", opts: aud, fail: true, token: func() string {
			return sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iss": "https://id.example", "aud": "other"}))
		}},
		{name: "no authorization header", opts: hs, fail: true, token: func() string { return "" }, auth: "-"},
		{name: "basic scheme", opts: hs, fail: true, token: func() string { return "" }, auth: "Basic YTpi"},
		{name: "garbage token", opts: hs, fail: true, token: func() string { return "not.a.jwt" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Now = func() time.Time { return now }
			a, err := jwt.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", "/sync", nil)
			switch tc.auth {
			case "":
				r.Header.Set("Authorization", "Bearer "+tc.token())
			case "-":
			default:
				r.Header.Set("Authorization", tc.auth)
			}
			got, err := a.Authenticate(r)
			if tc.fail {
				if syncerr.CodeOf(err) != syncerr.AuthRequired {
					t.Fatalf("err = %v, want sync.auth_required", err)
				}
				if pub := syncerr.Public(err); pub.Message != syncerr.Lookup(syncerr.AuthRequired).Message {
					t.Fatalf("client message leaks internals: %q", pub.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			// The verified claims ride along for claim-reading resolvers.
			if got.Claims["nbf"] == nil || got.Claims[orDefault(opts.ActorClaim, "sub")] != got.ActorID {
				t.Fatalf("claims = %v", got.Claims)
			}
			got.Claims = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("identity = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTokenQueryParam(t *testing.T) {
	k := fixtures(t)
	a, err := jwt.New(jwt.Options{Algorithm: jwt.HS256, Key: k.secret, TokenQueryParam: "access_token",
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, gojwt.SigningMethodHS256, k.secret, base(nil))
	r := httptest.NewRequest("GET", "/realtime?access_token="+tok, nil)
	if _, err := a.Authenticate(r); err != nil {
		t.Fatalf("query token: %v", err)
	}
	b, _ := jwt.New(jwt.Options{Algorithm: jwt.HS256, Key: k.secret, Now: func() time.Time { return now }})
	if _, err := b.Authenticate(r); err == nil {
		t.Fatal("query token accepted without TokenQueryParam")
	}
}

func TestNewValidates(t *testing.T) {
	k := fixtures(t)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	tests := []struct {
		name string
		opts jwt.Options
	}{
		{"no key", jwt.Options{Algorithm: jwt.HS256}},
		{"unknown algorithm", jwt.Options{Algorithm: "HS512", Key: k.secret}},
		{"short HMAC secret", jwt.Options{Algorithm: jwt.HS256, Key: []byte("short")}},
		{"RSA key for HS256", jwt.Options{Algorithm: jwt.HS256, Key: &k.rsa.PublicKey}},
		{"HMAC secret for RS256", jwt.Options{Algorithm: jwt.RS256, Key: k.secret}},
		{"small RSA key", jwt.Options{Algorithm: jwt.RS256, Key: &small.PublicKey}},
		{"Ed25519 PEM for RS256", jwt.Options{Algorithm: jwt.RS256, KeyFile: filepath.Join(k.dir, "ed.pem")}},
		{"RSA PEM for EdDSA", jwt.Options{Algorithm: jwt.EdDSA, KeyFile: filepath.Join(k.dir, "rs.pem")}},
		{"missing key file", jwt.Options{Algorithm: jwt.EdDSA, KeyFile: filepath.Join(k.dir, "absent.pem")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := jwt.New(tc.opts); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestResolver(t *testing.T) {
	r := jwt.NewResolver()
	req := ports.ScopeRequest{Partition: "p", ActorID: "a"}
	grant := scopes.Allowed{"workspace_id": {"w1"}}
	tests := []struct {
		name    string
		ctx     context.Context
		want    scopes.Allowed
		wantErr bool
	}{
		{"scopes claim", ports.WithIdentity(context.Background(), ports.Identity{ActorID: "a", Partition: "p", Scopes: grant}), grant, false},
		{"no scopes claim grants nothing", ports.WithIdentity(context.Background(), ports.Identity{ActorID: "a", Partition: "p"}), scopes.Allowed{}, false},
		{"no identity fails closed", context.Background(), nil, true},
		{"another actor's identity fails closed", ports.WithIdentity(context.Background(), ports.Identity{ActorID: "b", Partition: "p", Scopes: grant}), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.ResolveScopes(tc.ctx, req)
			if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v (err %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestRefusedTokenIsLogged: a presented token that is refused is logged at
// info with the reason and never the token; a request without a token is
// not a refused token.
func TestRefusedTokenIsLogged(t *testing.T) {
	k := fixtures(t)
	core, logs := observer.New(zapcore.DebugLevel)
	a, err := jwt.New(jwt.Options{Algorithm: jwt.HS256, Key: k.secret, Now: func() time.Time { return now }, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ token, reason string }{
		{signHeader(t, k.secret, map[string]any{"crit": []string{"b64"}, "b64": false}, base(nil)), `crit header names extension "b64"`},
		{signHeader(t, k.secret, map[string]any{"crit": "b64"}, base(nil)), "malformed crit header"},
		{sign(t, gojwt.SigningMethodHS256, k.secret, base(gojwt.MapClaims{"iat": now.Add(time.Hour).Unix()})), "used before issued"},
		{sign(t, gojwt.SigningMethodHS256, k.otherSecret, base(nil)), "signature"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("POST", "/sync", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		if _, err := a.Authenticate(r); syncerr.CodeOf(err) != syncerr.AuthRequired {
			t.Fatalf("accepted: %v", err)
		}
		all := logs.TakeAll()
		if len(all) != 1 || all[0].Level != zapcore.InfoLevel {
			t.Fatalf("want one info line, got %+v", all)
		}
		line := fmt.Sprint(all[0].Message, all[0].ContextMap())
		if !strings.Contains(line, tc.reason) {
			t.Errorf("line %q lacks the reason %q", line, tc.reason)
		}
		for _, part := range strings.Split(tc.token, ".") {
			if strings.Contains(line, part) {
				t.Fatalf("line %q carries the token", line)
			}
		}
	}
	if _, err := a.Authenticate(httptest.NewRequest("POST", "/sync", nil)); err == nil {
		t.Fatal("no token accepted")
	}
	if n := logs.FilterLevelExact(zapcore.InfoLevel).Len(); n != 0 {
		t.Fatalf("a request without a token logged %d info lines", n)
	}
}
