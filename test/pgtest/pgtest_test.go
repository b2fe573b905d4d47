package pgtest_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/test/pgtest"
)

func TestWithSearchPath(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{"adds", "postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?search_path=s1&sslmode=disable", false},
		{"replaces", "postgresql://u@h/db?search_path=old", "postgresql://u@h/db?search_path=s1", false},
		{"not a url", "host=h dbname=db", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pgtest.WithSearchPath(tt.in, "s1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDSNIsolatesSchemas(t *testing.T) {
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	ctx := context.Background()
	schemaOf := func(dsn string) string {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		if _, err := db.ExecContext(ctx, `CREATE TABLE probe (id int primary key)`); err != nil {
			t.Fatalf("create in isolated schema: %v", err)
		}
		var s string
		if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa, sb := schemaOf(a), schemaOf(b)
	if sa == sb || !strings.HasPrefix(sa, "syncd_t_") || !strings.HasPrefix(sb, "syncd_t_") {
		t.Fatalf("schemas not isolated: %q %q", sa, sb)
	}
}
