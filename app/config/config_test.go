package config_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
)

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "syncd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPrecedence(t *testing.T) {
	yml := writeYAML(t, "listen: 127.0.0.1:9000\nadmin-listen: 127.0.0.1:9001\nmount: /yaml\ndev: true\nshutdown-timeout: 3s\n")
	tests := []struct {
		name    string
		args    []string
		env     []string
		check   func(t *testing.T, c config.Config)
		wantErr string
	}{
		{"defaults", nil, nil, func(t *testing.T, c config.Config) {
			want := config.Default()
			want.Auth = config.AuthDev
			if !reflect.DeepEqual(c, want) {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"yaml via flag", []string{"--config", yml}, nil, func(t *testing.T, c config.Config) {
			if c.Listen != "127.0.0.1:9000" || c.Mount != "/yaml" || !c.Dev || c.ShutdownTimeout != 3*time.Second || c.ConfigFile != yml {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"env beats yaml", []string{"--config", yml}, []string{"SYNCD_MOUNT=/env", "SYNCD_DEV=false", "OTHER=x"}, func(t *testing.T, c config.Config) {
			if c.Mount != "/env" || c.Dev || c.Listen != "127.0.0.1:9000" {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"flag beats env", []string{"--mount=/flag"}, []string{"SYNCD_CONFIG=" + yml, "SYNCD_MOUNT=/env"}, func(t *testing.T, c config.Config) {
			if c.Mount != "/flag" || c.Listen != "127.0.0.1:9000" {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"postgres database", []string{"--database", "postgres://u:p@h/db", "--schema", "x.json", "--auth", "jwt",
			"--jwt-algorithm", "HS256", "--jwt-key-file", "/secret"}, nil, func(t *testing.T, c config.Config) {
			if c.Auth != config.AuthJWT || c.Redacted().Database != "postgres://u:xxxxx@h/db" {
				t.Fatalf("got %+v", c.Redacted())
			}
		}, ""},
		{"wire 1 admitted", []string{"--min-wire-version", "1"}, nil, func(t *testing.T, c config.Config) {
			if c.Round.MinWireVersion != 1 {
				t.Fatalf("got %+v", c.Round)
			}
		}, ""},
		{"no wire 0", []string{"--min-wire-version", "0"}, nil, nil, "--min-wire-version 0: want 1, 2 or 3"},
		{"no wire 4", []string{"--min-wire-version", "4"}, nil, nil, "--min-wire-version 4: want 1, 2 or 3"},
		{"schema needs auth", []string{"--schema", "x.json"}, nil, nil, "--auth is required"},
		{"bad auth", []string{"--auth", "none"}, nil, nil, `--auth "none"`},
		{"jwt needs algorithm", []string{"--auth", "jwt", "--jwt-key-file", "k"}, nil, nil, "--jwt-algorithm"},
		{"jwt needs a key file or a JWKS URL", []string{"--auth", "jwt", "--jwt-algorithm", "RS256"}, nil, nil,
			"needs --jwt-key-file or --jwt-jwks-url"},
		{"jwt key file and JWKS URL", []string{"--auth", "jwt", "--jwt-algorithm", "RS256", "--jwt-key-file", "k",
			"--jwt-jwks-url", "https://id.example/jwks.json"}, nil, nil, "exclusive"},
		{"jwt JWKS", []string{"--schema", "x.json", "--auth", "jwt", "--jwt-jwks-url", "https://id.example/jwks.json"},
			[]string{"SYNCD_JWT_JWKS_REFRESH=1m", "SYNCD_JWT_JWKS_LAZY=true"}, func(t *testing.T, c config.Config) {
				j := c.JWT
				if j.JWKSURL != "https://id.example/jwks.json" || j.Algorithm != "" || j.JWKSRefresh != time.Minute ||
					j.JWKSMinRefetch != config.DefaultJWKSMinRefetch || !j.JWKSLazy {
					t.Fatalf("got %+v", j)
				}
			}, ""},
		{"jwt JWKS narrowed to EdDSA", []string{"--schema", "x.json", "--auth", "jwt", "--jwt-jwks-url", "https://id.example/jwks.json",
			"--jwt-algorithm", "EdDSA"}, nil, func(t *testing.T, c config.Config) {
			if c.JWT.Algorithm != "EdDSA" {
				t.Fatalf("got %+v", c.JWT)
			}
		}, ""},
		{"jwt JWKS refuses HS256", []string{"--auth", "jwt", "--jwt-jwks-url", "https://id.example/jwks.json",
			"--jwt-algorithm", "HS256"}, nil, nil, "never supplies HMAC keys"},
		{"jwt key file refuses ES256", []string{"--auth", "jwt", "--jwt-key-file", "k", "--jwt-algorithm", "ES256"}, nil, nil,
			`--jwt-algorithm "ES256"`},
		{"jwt JWKS URL not http", []string{"--auth", "jwt", "--jwt-jwks-url", "/etc/jwks.json"}, nil, nil, "want an http(s) URL"},
		{"jwt JWKS zero refresh", []string{"--auth", "jwt", "--jwt-jwks-url", "https://id.example/jwks.json",
			"--jwt-jwks-refresh", "0s"}, nil, nil, "--jwt-jwks-refresh 0s"},
		{"jwt JWKS zero refetch window", []string{"--auth", "jwt", "--jwt-jwks-url", "https://id.example/jwks.json",
			"--jwt-jwks-min-refetch", "0s"}, nil, nil, "--jwt-jwks-min-refetch 0s"},
		{"dev auth settings", []string{"--dev-actor", "alice"}, []string{"SYNCD_DEV_PARTITION=p1"}, func(t *testing.T, c config.Config) {
			if c.DevAuth.Actor != "alice" || c.DevAuth.Partition != "p1" {
				t.Fatalf("got %+v", c)
			}
		}, ""},
		{"http bounds", []string{"--body-read-timeout", "5s", "--idle-timeout", "10s", "--max-inflight-requests", "8",
			"--max-inflight-body-bytes", "100000000", "--shutdown-delay", "0"}, nil, func(t *testing.T, c config.Config) {
			if c.HTTP != (config.HTTP{BodyReadTimeout: 5 * time.Second, IdleTimeout: 10 * time.Second, MaxInflightRequests: 8,
				MaxInflightBodyBytes: 100000000, AccessLog: true}) || c.ShutdownDelay != 0 {
				t.Fatalf("got %+v delay %s", c.HTTP, c.ShutdownDelay)
			}
		}, ""},
		{"http defaults", nil, nil, func(t *testing.T, c config.Config) {
			if c.HTTP != config.DefaultHTTP() || c.HTTP.MaxInflightBodyBytes != 64<<20 || c.ShutdownDelay != 5*time.Second {
				t.Fatalf("got %+v delay %s", c.HTTP, c.ShutdownDelay)
			}
		}, ""},
		{"cors origins", []string{"--cors-origins", " https://app.example.com/, http://localhost:5173", "--cors-headers", "X-App-Version", "--access-log=false"}, nil, func(t *testing.T, c config.Config) {
			if got := c.HTTP.CORSOriginList(); len(got) != 2 || got[0] != "https://app.example.com" || got[1] != "http://localhost:5173" ||
				len(c.HTTP.CORSHeaderList()) != 1 || c.HTTP.AccessLog {
				t.Fatalf("got %+v", c.HTTP)
			}
		}, ""},
		{"cors any origin with dev auth", []string{"--cors-origins", "*"}, nil, func(t *testing.T, c config.Config) {
			if got := c.HTTP.CORSOriginList(); len(got) != 1 || got[0] != "*" {
				t.Fatalf("got %v", got)
			}
		}, ""},
		{"cors any origin with jwt", []string{"--cors-origins", "*", "--auth", "jwt", "--jwt-algorithm", "HS256", "--jwt-key-file", "/k"}, nil, nil, "only with --auth dev"},
		{"cors any origin among others", []string{"--cors-origins", "*,https://a.example.com"}, nil, nil, "* stands alone"},
		{"cors origin with a path", []string{"--cors-origins", "https://a.example.com/app"}, nil, nil, "want an origin like"},
		{"cors origin without a scheme", []string{"--cors-origins", "a.example.com"}, nil, nil, "want an origin like"},
		{"body bound below the body limit", []string{"--max-inflight-body-bytes", "1000"}, nil, nil, "--max-inflight-body-bytes 1000"},
		{"no inflight requests", []string{"--max-inflight-requests", "0"}, nil, nil, "--max-inflight-requests 0"},
		{"negative shutdown delay", []string{"--shutdown-delay", "-1s"}, nil, nil, "--shutdown-delay"},
		{"client record refresh", []string{"--client-record-refresh", "0"}, nil, func(t *testing.T, c config.Config) {
			if c.Pull.ClientRecordRefresh != 0 {
				t.Fatalf("got %s", c.Pull.ClientRecordRefresh)
			}
		}, ""},
		{"client record refresh past a tenth of the active window", []string{"--retention-active-window", "336h", "--client-record-refresh", "34h"}, nil, nil, "--client-record-refresh 34h"},
		{"negative client record refresh", []string{"--client-record-refresh", "-1s"}, nil, nil, "--client-record-refresh"},
		{"retention to the active floors on loopback", []string{"--prune-to-active-floors-UNSAFE-for-tests", "--retention-active-window", "1m",
			"--client-record-refresh", "5s", "--retention-keep-commits", "0"}, nil, func(t *testing.T, c config.Config) {
			if !c.Retention.ToActiveFloorsUnsafe || c.Retention.ActiveWindow != time.Minute {
				t.Fatalf("got %+v", c.Retention)
			}
		}, ""},
		{"retention to the active floors from the environment", nil, []string{"SYNCD_PRUNE_TO_ACTIVE_FLOORS_UNSAFE_FOR_TESTS=true"}, func(t *testing.T, c config.Config) {
			if !c.Retention.ToActiveFloorsUnsafe {
				t.Fatalf("got %+v", c.Retention)
			}
		}, ""},
		{"retention to the active floors on a production listener", []string{"--prune-to-active-floors-UNSAFE-for-tests", "--listen", "0.0.0.0:8787",
			"--allow-insecure-dev-auth"}, nil, nil, "refused on a listener that is not a loopback address"},
		{"retention to the active floors needs a window", []string{"--prune-to-active-floors-UNSAFE-for-tests", "--retention-active-window", "0s",
			"--client-record-refresh", "0"}, nil, nil, "must be positive with --prune-to-active-floors-UNSAFE-for-tests"},
		{"short retention window without the switch", []string{"--retention-active-window", "1m", "--client-record-refresh", "5s"}, nil, nil, "retention below the protocol floors"},
		{"watch bounds by default", nil, nil, func(t *testing.T, c config.Config) {
			if c.Watches != (config.Watches{MaxPerSocket: 64, MaxPerActor: 256, Evaluations: 2}) {
				t.Fatalf("got %+v", c.Watches)
			}
		}, ""},
		{"watch bounds", []string{"--operations-max-watches", "8", "--operations-watch-evaluations", "2"},
			[]string{"SYNCD_OPERATIONS_MAX_WATCHES_PER_ACTOR=20"}, func(t *testing.T, c config.Config) {
				if c.Watches != (config.Watches{MaxPerSocket: 8, MaxPerActor: 20, Evaluations: 2}) {
					t.Fatalf("got %+v", c.Watches)
				}
			}, ""},
		{"no watches per socket", []string{"--operations-max-watches", "0"}, nil, nil, "--operations-max-watches"},
		{"no watches per actor", []string{"--operations-max-watches-per-actor", "-1"}, nil, nil, "--operations-max-watches-per-actor"},
		{"no watch evaluations", []string{"--operations-watch-evaluations", "0"}, nil, nil, "--operations-watch-evaluations"},
		{"auth leases off by default", nil, nil, func(t *testing.T, c config.Config) {
			if c.Leases != (config.Leases{Refresh: 30 * time.Second}) {
				t.Fatalf("got %+v", c.Leases)
			}
		}, ""},
		{"auth leases", []string{"--auth-lease-ttl", "15m"}, []string{"SYNCD_AUTH_LEASE_KEY_FILE=/keys"}, func(t *testing.T, c config.Config) {
			if c.Leases != (config.Leases{TTL: 15 * time.Minute, Refresh: 30 * time.Second, KeyFile: "/keys"}) || c.Leases.EffectiveRefresh() != 30*time.Second {
				t.Fatalf("got %+v", c.Leases)
			}
		}, ""},
		{"auth lease refresh capped at a tenth of the ttl", []string{"--auth-lease-ttl", "1m", "--auth-lease-key-file", "/k"}, nil, func(t *testing.T, c config.Config) {
			if c.Leases.EffectiveRefresh() != 6*time.Second {
				t.Fatalf("effective refresh %s", c.Leases.EffectiveRefresh())
			}
		}, ""},
		{"negative auth lease refresh", []string{"--auth-lease-refresh", "-1s"}, nil, nil, "--auth-lease-refresh -1s"},
		{"negative key reload interval", []string{"--key-reload-interval", "-1s"}, nil, nil, "--key-reload-interval -1s"},
		{"auth leases need sealing keys", []string{"--auth-lease-ttl", "15m"}, nil, nil, "needs --auth-lease-key-file"},
		{"auth lease keys without leases", []string{"--auth-lease-key-file", "/keys"}, nil, nil, "off without --auth-lease-ttl"},
		{"negative auth lease ttl", []string{"--auth-lease-ttl", "-1m", "--auth-lease-key-file", "/keys"}, nil, nil, "--auth-lease-ttl -1m0s"},
		{"catch-up threshold", []string{"--pull-catchup-changes", "0"}, []string{"SYNCD_PULL_CATCHUP_CHANGES=5"}, func(t *testing.T, c config.Config) {
			if c.Pull.CatchUpChanges != 0 || config.DefaultPull().CatchUpChanges != 10_000 {
				t.Fatalf("got %d", c.Pull.CatchUpChanges)
			}
		}, ""},
		{"negative catch-up threshold", []string{"--pull-catchup-changes", "-1"}, nil, nil, "--pull-catchup-changes"},
		{"recent log off", []string{"--pull-recent-log-bytes", "0"}, []string{"SYNCD_PULL_RECENT_LOG_BYTES=5"}, func(t *testing.T, c config.Config) {
			if c.Pull.RecentLogBytes != 0 || config.DefaultPull().RecentLogBytes != 16<<20 {
				t.Fatalf("got %d", c.Pull.RecentLogBytes)
			}
		}, ""},
		{"negative recent log", []string{"--pull-recent-log-bytes", "-1"}, nil, nil, "--pull-recent-log-bytes"},
		{"bad listen", []string{"--listen", "8787"}, nil, nil, "want host:port"},
		{"same listeners", []string{"--listen", "127.0.0.1:1", "--admin-listen", "127.0.0.1:1"}, nil, nil, "must differ"},
		{"bad mount", []string{"--mount", "api/"}, nil, nil, "--mount"},
		{"bad database", []string{"--database", "mysql://x"}, nil, nil, "unsupported URL scheme"},
		{"bad env value", nil, []string{"SYNCD_DEV=maybe"}, nil, "SYNCD_DEV"},
		{"bad log level", []string{"--log-level", "loud"}, nil, nil, "--log-level"},
		{"unknown flag", []string{"--xyzzy-plugh"}, nil, nil, "unknown flag --xyzzy-plugh; --help lists them"},
		{"misspelt flag", []string{"--prune-intervall", "5m"}, nil, nil, "did you mean --prune-interval?"},
		{"duration without a unit", []string{"--prune-interval", "5"}, nil, nil, "a duration needs a unit, e.g. 5m"},
		{"bad number", []string{"--max-inflight-requests", "x"}, nil, nil, "want a whole number"},
		{"stray argument", []string{"extra"}, nil, nil, "unexpected argument"},
		{"missing config file", []string{"--config", "/nonexistent/x.yaml"}, nil, nil, "config file"},
		{"unknown yaml key", []string{"--config", writeYAML(t, "lisen: x\n")}, nil, nil, `unknown key "lisen"`},
		{"nested yaml value", []string{"--config", writeYAML(t, "mount: {a: 1}\n")}, nil, nil, "want a scalar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			res, err := config.Load(tt.args, tt.env, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, res.Config)
		})
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := config.Load([]string{"--help"}, nil, &out)
	if !errors.Is(err, config.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"--listen", "SYNCD_LISTEN", `default "127.0.0.1:8787"`, "--admin-listen", "--database",
		"--schema", "--mount", "--config", "--auth", "--dev", "SYNCD_ADMIN_LISTEN", "Precedence"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestParseDatabase(t *testing.T) {
	tests := []struct {
		in   string
		kind config.DatabaseKind
		dsn  string
		err  bool
	}{
		{"./syncd.db", config.SQLite, "./syncd.db", false},
		{"sqlite:/var/lib/syncd.db", config.SQLite, "/var/lib/syncd.db", false},
		{"sqlite:///abs.db", config.SQLite, "/abs.db", false},
		{"postgres://u@h/db", config.Postgres, "postgres://u@h/db", false},
		{"postgresql://u@h/db", config.Postgres, "postgresql://u@h/db", false},
		{"sqlite:", "", "", true},
		{"", "", "", true},
		{"http://x", "", "", true},
	}
	for _, tt := range tests {
		kind, dsn, err := config.ParseDatabase(tt.in)
		if kind != tt.kind || dsn != tt.dsn || (err != nil) != tt.err {
			t.Errorf("ParseDatabase(%q) = %q %q %v", tt.in, kind, dsn, err)
		}
	}
}

func TestPrintConfigFlag(t *testing.T) {
	res, err := config.Load([]string{"--print-config", "--database", "postgres://u:hunter2@h/db", "--min-wire-version", "2"}, nil, &bytes.Buffer{})
	if err != nil || !res.PrintConfig {
		t.Fatalf("%v %+v", err, res)
	}
	var out, help bytes.Buffer
	res.Config.Print(&out)
	printed := out.String()
	for _, want := range []string{`database: "postgres://u:xxxxx@h/db"`, "min-wire-version: 2\n", `segment-store: "db"`, "dev: false\n", "retention-force-age: 720h0m0s\n"} {
		if !strings.Contains(printed, want) {
			t.Errorf("print lacks %q:\n%s", want, printed)
		}
	}
	if strings.Contains(printed, "hunter2") {
		t.Fatal("credentials printed")
	}
	// Every setting --help documents is printed.
	_, _ = config.Load([]string{"--help"}, nil, &help)
	for _, line := range strings.Split(help.String(), "\n") {
		name, ok := strings.CutPrefix(line, "  --")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		if name == "config" || name == "print-config" {
			continue
		}
		if !strings.Contains(printed, "\n"+name+": ") && !strings.HasPrefix(printed, name+": ") {
			t.Errorf("print lacks setting %s", name)
		}
	}
}
