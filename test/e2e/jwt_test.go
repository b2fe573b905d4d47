package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

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
			"forged":  good[:len(good)-2] + "xx",
		} {
			rep := s.post(call{bearer: tok}, body)
			if rep.status != http.StatusUnauthorized {
				t.Fatalf("%s token: %d %s", name, rep.status, rep.body)
			}
			s.jsonError(rep, http.StatusUnauthorized, syncerr.AuthRequired)
		}
	})
}
