package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestJWTAuthentication(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		secret := []byte("a test secret of reasonable length!")
		keyFile := filepath.Join(t.TempDir(), "hs256.key")
		if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, e, serverOpts{config: func(c *config.Config) {
			c.Auth, c.JWT.Algorithm, c.JWT.KeyFile = config.AuthJWT, "HS256", keyFile
		}})
		token := func(claims gojwt.MapClaims) string {
			tok, err := gojwt.NewWithClaims(gojwt.SigningMethodHS256, claims).SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		now := time.Now()
		good := token(gojwt.MapClaims{"sub": "alice", "partition": "acme", "exp": now.Add(time.Hour).Unix(),
			"scopes": map[string]any{"owner": []any{"alice"}, "project_id": []any{"*"}}})
		c := call{bearer: good}
		ep := s.epoch(c)
		resp, _ := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)),
			ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "bob", "Two"), -1)),
		}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("own scope %+v", resp.Results[0])
		}
		rejected(t, resp.Results[1], 0, "sync.forbidden")
		if row, _ := s.store.GetRow(t.Context(), "acme", "projects", "p-1"); row == nil {
			t.Fatal("write not in the token's partition")
		}
		body := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true}.Encode(t)
		for name, tok := range map[string]string{
			"none":    "",
			"expired": token(gojwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Hour).Unix()}),
			"not yet": token(gojwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(time.Hour).Unix()}),
			"forged":  alterSignature(good),
		} {
			rep := s.post(call{bearer: tok}, body)
			if rep.status != http.StatusUnauthorized {
				t.Fatalf("%s token: %d %s", name, rep.status, rep.body)
			}
			s.jsonError(rep, http.StatusUnauthorized, syncerr.AuthRequired)
		}
	})
}

// TestJWTFromJWKS: with --jwt-jwks-url the server fetches the issuer's
// key set at start and verifies tokens by their kid; a key the issuer
// adds later is picked up by the refetch an unknown kid prompts.
func TestJWTFromJWKS(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		first, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		_, second, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		served := []jwkset.JWKMarshal{publicJWK(t, first.Public(), "rs-1")}
		issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: served})
		}))
		defer issuer.Close()
		s := start(t, e, serverOpts{config: func(c *config.Config) {
			c.Auth, c.JWT.JWKSURL = config.AuthJWT, issuer.URL+"/.well-known/jwks.json"
			c.JWT.JWKSMinRefetch = time.Nanosecond // every unknown kid may refetch: the test adds a key
		}})
		claims := gojwt.MapClaims{"sub": "alice", "partition": "acme", "exp": time.Now().Add(time.Hour).Unix(),
			"scopes": map[string]any{"owner": []any{"alice"}, "project_id": []any{"*"}}}
		token := func(m gojwt.SigningMethod, key any, kid string) string {
			tok := gojwt.NewWithClaims(m, claims)
			tok.Header["kid"] = kid
			raw, err := tok.SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		rs := call{bearer: token(gojwt.SigningMethodRS256, first, "rs-1")}
		ep := s.epoch(rs)
		body := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true}.Encode(t)
		ed := call{bearer: token(gojwt.SigningMethodEdDSA, second, "ed-1")}
		if rep := s.post(ed, body); rep.status != http.StatusUnauthorized {
			t.Fatalf("token of a key the issuer does not publish: %d %s", rep.status, rep.body)
		}
		mu.Lock()
		served = append(served, publicJWK(t, second.Public(), "ed-1"))
		mu.Unlock()
		for name, c := range map[string]call{"RS256": rs, "EdDSA after the issuer added its key": ed} {
			if rep := s.post(c, body); rep.status != http.StatusOK {
				t.Fatalf("%s: %d %s", name, rep.status, rep.body)
			}
		}
		forged := call{bearer: alterSignature(rs.bearer)}
		rep := s.post(forged, body)
		s.jsonError(rep, http.StatusUnauthorized, syncerr.AuthRequired)
	})
}

func publicJWK(t *testing.T, pub any, kid string) jwkset.JWKMarshal {
	t.Helper()
	k, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid}})
	if err != nil {
		t.Fatal(err)
	}
	return k.Marshal()
}

// alterSignature changes one character well inside a JWT's signature:
// the last characters of a base64url signature carry padding bits, so
// changing those may change nothing.
func alterSignature(tok string) string {
	i := strings.LastIndexByte(tok, '.') + 10
	flip := "A"
	if tok[i] == 'A' {
		flip = "B"
	}
	return tok[:i] + flip + tok[i+1:]
}
