package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestKeysRotateWithoutARestart: the HS256 key file of a running server
// is rotated in place (add the new secret first, move the issuer over,
// drop the old one); each step is picked up by the key reloader, so no
// token is refused while both issuers' tokens are live, and the old key
// stops verifying once it is dropped.
func TestKeysRotateWithoutARestart(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		oldKey, newKey := strings.Repeat("o", 40), strings.Repeat("n", 40)
		keyFile := filepath.Join(t.TempDir(), "jwt.keys")
		writeKeys := func(lines ...string) {
			if err := os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		writeKeys(oldKey)
		var keys *platform.KeyReloader
		s := start(t, e, serverOpts{
			config: func(c *config.Config) {
				c.Auth, c.JWT.Algorithm, c.JWT.KeyFile = config.AuthJWT, "HS256", keyFile
				c.KeyReloadInterval = 0 // the test runs each pass itself
			},
			extra: []fx.Option{fx.Populate(&keys)},
		})
		token := func(secret string) string {
			tok, err := gojwt.NewWithClaims(gojwt.SigningMethodHS256, gojwt.MapClaims{"sub": "alice", "partition": "rot",
				"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		body := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, NoEpoch: true, Pull: true}.Encode(t)
		status := func(secret string) int { return s.post(call{bearer: token(secret)}, body).status }
		if status(oldKey) != http.StatusOK || status(newKey) != http.StatusUnauthorized {
			t.Fatal("before the rotation")
		}
		writeKeys("# the new secret first, the old one until its tokens expire", newKey, oldKey)
		keys.Check()
		if status(oldKey) != http.StatusOK || status(newKey) != http.StatusOK {
			t.Fatal("during the rotation both secrets must verify")
		}
		// A broken edit is refused and changes nothing.
		writeKeys(newKey, "short")
		keys.Check()
		if status(oldKey) != http.StatusOK || status(newKey) != http.StatusOK {
			t.Fatal("a refused key file changed the keys in use")
		}
		writeKeys(newKey)
		keys.Check()
		if status(oldKey) != http.StatusUnauthorized || status(newKey) != http.StatusOK {
			t.Fatal("after the rotation only the new secret verifies")
		}
		m := scrape(t, s)
		for _, want := range []string{`syncd_key_reloads_total{flag="--jwt-key-file",result="loaded"} 2`,
			`syncd_key_reloads_total{flag="--jwt-key-file",result="refused"} 1`} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}
