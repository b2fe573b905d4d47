package postgres_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// TestDeployment: nodes reaching one schema however their DSNs differ
// share a name; another schema of the same database does not.
func TestDeployment(t *testing.T) {
	ctx := context.Background()
	one, two := pgtest.DSN(t), pgtest.DSN(t)
	name := func(dsn string) string {
		t.Helper()
		d, err := postgres.Deployment(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := name(one)
	if b := name(one + "&application_name=another-node"); b != a {
		t.Fatalf("one schema, two names: %q and %q", a, b)
	}
	if c := name(two); c == a {
		t.Fatalf("two schemas share the name %q", a)
	}
	if _, err := postgres.Deployment(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5"); err == nil {
		t.Fatal("a database that does not answer was named")
	}
}
