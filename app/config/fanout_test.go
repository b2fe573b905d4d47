package config_test

import (
	"testing"

	"github.com/syncd-dev/syncd/app/config"
)

// TestNATSURLRedacted: passwords and tokens of every --nats-url are
// masked wherever the configuration is printed or logged.
func TestNATSURLRedacted(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:secret@h:4222", "nats://user:xxxxx@h:4222"},
		{"tls://s3cr3t-token@h:4222", "tls://xxxxx@h:4222"},
		{"nats://u:p@a:4222,nats://tok@b:4222,nats://c:4222", "nats://u:xxxxx@a:4222,nats://xxxxx@b:4222,nats://c:4222"},
	}
	for _, c := range cases {
		cfg := config.Default()
		cfg.NATS.URL = c.in
		if got := cfg.Redacted().NATS.URL; got != c.want {
			t.Errorf("Redacted(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
