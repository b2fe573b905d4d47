package jwt_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/syncd-dev/syncd/adapters/auth/jwt"
)

// verifies reports whether a accepts tok.
func verifies(t *testing.T, a *jwt.Authenticator, tok string) bool {
	t.Helper()
	r := httptest.NewRequest("POST", "/sync", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	_, err := a.Authenticate(r)
	return err == nil
}

// A key file may hold several keys, every one of which verifies, and
// ReloadKeyFile swaps them without a restart: a key rotates by adding the
// new one, moving issuers over, then dropping the old one.
func TestKeyFileSetsRotate(t *testing.T) {
	k := fixtures(t)
	clock := func() time.Time { return now }
	hsFile, rsFile := filepath.Join(k.dir, "hs.keys"), filepath.Join(k.dir, "rs.keys")
	write(t, hsFile, []byte("# current, then previous\n"+string(k.secret)+"\r\n\n"+string(k.otherSecret)+"\n"))
	write(t, rsFile, append(append([]byte{}, k.rsaPEM...), pubPEM(k.otherRSA.Public())...))
	third := []byte("3333333333333333333333333333333333")

	cases := []struct {
		name           string
		opts           jwt.Options
		old, cur, none string
		rotated        []byte // the file after dropping the old key
		broken         []byte // a file that does not load
	}{
		{"HS256 secrets, one per line", jwt.Options{Algorithm: jwt.HS256, KeyFile: hsFile},
			sign(t, gojwt.SigningMethodHS256, k.otherSecret, base(nil)), sign(t, gojwt.SigningMethodHS256, k.secret, base(nil)),
			sign(t, gojwt.SigningMethodHS256, third, base(nil)), append([]byte{}, k.secret...), []byte("short\n")},
		{"RS256 PEM blocks", jwt.Options{Algorithm: jwt.RS256, KeyFile: rsFile},
			sign(t, gojwt.SigningMethodRS256, k.otherRSA, base(nil)), sign(t, gojwt.SigningMethodRS256, k.rsa, base(nil)),
			sign(t, gojwt.SigningMethodHS256, third, base(nil)), k.rsaPEM, k.edPEM},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Now = clock
			a, err := jwt.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if !verifies(t, a, tc.old) || !verifies(t, a, tc.cur) || verifies(t, a, tc.none) {
				t.Fatal("a key of the file does not verify, or a foreign one does")
			}
			write(t, opts.KeyFile, tc.broken)
			if _, err := a.ReloadKeyFile(); err == nil {
				t.Fatal("a broken key file reloaded")
			}
			if !verifies(t, a, tc.old) || !verifies(t, a, tc.cur) {
				t.Fatal("a failed reload dropped the keys in use")
			}
			write(t, opts.KeyFile, tc.rotated)
			if n, err := a.ReloadKeyFile(); err != nil || n != 1 {
				t.Fatalf("reload: %d keys, %v", n, err)
			}
			if verifies(t, a, tc.old) || !verifies(t, a, tc.cur) {
				t.Fatal("after the reload the dropped key still verifies, or the kept one does not")
			}
		})
	}
	t.Run("a configured key has no file to reload", func(t *testing.T) {
		a, err := jwt.New(jwt.Options{Algorithm: jwt.HS256, Key: k.secret, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := a.ReloadKeyFile(); n != 0 || err != nil {
			t.Fatalf("ReloadKeyFile = %d, %v", n, err)
		}
	})
	t.Run("every key is checked", func(t *testing.T) {
		write(t, hsFile, []byte(string(k.secret)+"\nshort\n"))
		if _, err := jwt.New(jwt.Options{Algorithm: jwt.HS256, KeyFile: hsFile}); err == nil {
			t.Fatal("a short second secret was accepted")
		}
		write(t, hsFile, []byte("# nothing but a comment\n"))
		if _, err := jwt.New(jwt.Options{Algorithm: jwt.HS256, KeyFile: hsFile}); err == nil {
			t.Fatal("a file without a key was accepted")
		}
	})
}
