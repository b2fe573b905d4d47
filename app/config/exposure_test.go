package config_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
)

// TestExposureAndIgnoredSettings: unsafe exposure is refused at start, not
// warned about, and so is every setting the chosen modes would ignore;
// each refusal names the flag that resolves it.
func TestExposureAndIgnoredSettings(t *testing.T) {
	jwt := []string{"--schema", "x.json", "--auth", "jwt", "--jwt-algorithm", "HS256", "--jwt-key-file", "/k"}
	tests := []struct {
		name    string
		args    []string
		wantErr []string // fragments of the error; nil: accepted
	}{
		{"dev auth on loopback", []string{"--listen", "127.0.0.1:9000"}, nil},
		{"dev auth on localhost", []string{"--listen", "localhost:9000"}, nil},
		{"dev auth on IPv6 loopback", []string{"--listen", "[::1]:9000"}, nil},
		{"dev auth on every interface", []string{"--listen", "0.0.0.0:8787"}, []string{"--auth dev", "--allow-insecure-dev-auth"}},
		{"dev auth on an empty host", []string{"--listen", ":8787"}, []string{"--allow-insecure-dev-auth"}},
		{"dev auth on a public address", []string{"--listen", "192.0.2.7:8787"}, []string{"--allow-insecure-dev-auth"}},
		{"dev auth on a host name", []string{"--listen", "sync.internal:8787"}, []string{"--allow-insecure-dev-auth"}},
		{"dev auth exposed on purpose", []string{"--listen", "0.0.0.0:8787", "--allow-insecure-dev-auth"}, nil},
		{"jwt on every interface", append([]string{"--listen", "0.0.0.0:8787"}, jwt...), nil},
		{"insecure dev flag with jwt", append([]string{"--allow-insecure-dev-auth"}, jwt...), []string{"--allow-insecure-dev-auth", "--auth dev"}},

		{"admin on every interface without a token", []string{"--admin-listen", "0.0.0.0:8788"}, []string{"--admin-listen", "--admin-token-file"}},
		{"admin on every interface with a token", []string{"--admin-listen", "0.0.0.0:8788", "--admin-token-file", "/t"}, nil},
		{"admin token on loopback", []string{"--admin-token-file", "/t", "--pprof"}, nil},
		{"admin API without a token", []string{"--admin-api"}, []string{"--admin-api", "--admin-token-file"}},
		{"admin API with a token", []string{"--admin-api", "--admin-token-file", "/t"}, nil},

		{"jwt flags with dev auth", []string{"--jwt-issuer", "i", "--jwt-key-file", "/k"}, []string{"--jwt-key-file", "--jwt-issuer", "--auth jwt"}},
		{"jwt leeway with dev auth", []string{"--jwt-leeway", "5s"}, []string{"--jwt-leeway"}},
		{"JWKS flags with dev auth", []string{"--jwt-jwks-url", "https://id.example/jwks", "--jwt-jwks-lazy"},
			[]string{"--jwt-jwks-url", "--jwt-jwks-lazy", "--auth jwt"}},
		{"dev actor with jwt", append([]string{"--dev-actor", "alice"}, jwt...), []string{"--dev-actor", "--auth dev"}},
		{"dev partition with jwt", append([]string{"--dev-partition", "p"}, jwt...), []string{"--dev-partition"}},
		{"negative jwt leeway", append([]string{"--jwt-leeway", "-1s"}, jwt...), []string{"--jwt-leeway"}},

		{"segment dir without the fs store", []string{"--segment-dir", "/seg"}, []string{"--segment-dir", "--segment-store fs"}},
		{"segment dir with the fs store", []string{"--segment-store", "fs", "--segment-dir", "/seg"}, nil},
		{"public url without signed urls", []string{"--public-url", "https://s.example"}, []string{"--public-url", "--signed-url-key-file"}},
		{"signed url ttl without signed urls", []string{"--signed-url-ttl", "1m"}, []string{"--signed-url-ttl"}},
		{"signed urls", []string{"--signed-url-key-file", "/k", "--public-url", "https://s.example", "--signed-url-ttl", "1m"}, nil},

		{"limits", []string{"--max-id-bytes", "64", "--max-scope-value-bytes", "128", "--max-scope-values", "10", "--max-subscriptions", "5"}, nil},
		{"zero id limit", []string{"--max-id-bytes", "0"}, []string{"--max-id-bytes"}},
		{"negative subscription limit", []string{"--max-subscriptions", "-1"}, []string{"--max-subscriptions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantLoad(t, tt.args, tt.wantErr) })
	}
}

// wantLoad loads args: accepted when wantErr is nil, else refused with
// an error holding every fragment of wantErr.
func wantLoad(t *testing.T, args, wantErr []string) {
	t.Helper()
	_, err := config.Load(args, nil, &bytes.Buffer{})
	if wantErr == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted, want an error naming %q", wantErr)
	}
	for _, f := range wantErr {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q lacks %q", err, f)
		}
	}
}

func TestNewSettingDefaults(t *testing.T) {
	c := config.Default()
	if c.JWT.Leeway != 60*time.Second || c.Admin.Pprof || c.Admin.TokenFile != "" || c.DevAuth.AllowInsecure {
		t.Fatalf("defaults %+v", c)
	}
	if l := c.Limits; l.MaxIDBytes != 256 || l.MaxScopeValueBytes != 1024 || l.MaxScopeValues != 1000 || l.MaxSubscriptions != 200 {
		t.Fatalf("limits %+v", l)
	}
	for _, addr := range []string{"127.0.0.1:1", "127.9.9.9:1", "[::1]:1", "LOCALHOST:1"} {
		if !config.IsLoopback(addr) {
			t.Errorf("%s is loopback", addr)
		}
	}
	for _, addr := range []string{":1", "0.0.0.0:1", "[::]:1", "10.0.0.1:1", "example.com:1", "nonsense"} {
		if config.IsLoopback(addr) {
			t.Errorf("%s is not loopback", addr)
		}
	}
}
