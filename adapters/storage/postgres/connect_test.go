package postgres_test

import (
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// TestNewConnectsOnlyInConnect: New refuses a malformed DSN at once but
// reaches no server; Connect does, and reports a server that is not there.
func TestNewConnectsOnlyInConnect(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dsn        func(t *testing.T) string
		newErr     string
		connectErr string
	}{
		{"malformed DSN", func(*testing.T) string { return "postgres://syncd:hunter2@127.0.0.1:notaport/syncd" }, "postgres: open", ""},
		// Port 1 on loopback: nothing listens there.
		{"no server", func(*testing.T) string { return "postgres://syncd@127.0.0.1:1/syncd?sslmode=disable&connect_timeout=5" }, "", "postgres: connect"},
		{"a test database", func(t *testing.T) string { return pgtest.DSN(t) }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := postgres.New(postgres.Options{DSN: tc.dsn(t)})
			if tc.newErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.newErr) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("New: %v, want %q without the password", err, tc.newErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			err = st.Connect(t.Context())
			if tc.connectErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.connectErr) {
				t.Fatalf("Connect: %v, want %q", err, tc.connectErr)
			}
		})
	}
}
