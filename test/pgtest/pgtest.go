// Package pgtest gives tests an isolated PostgreSQL schema on a shared test
// database.
//
// The database comes from SYNCD_TEST_POSTGRES_URL (scripts/test exports it,
// starting a throwaway cluster when none is configured). Without it the
// calling test is skipped with a loud message, or fails when
// SYNCD_REQUIRE_POSTGRES=1.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// Environment variables read by this package.
const (
	EnvURL     = "SYNCD_TEST_POSTGRES_URL"
	EnvRequire = "SYNCD_REQUIRE_POSTGRES"
)

// BaseURL returns the configured test database URL, skipping (or failing,
// under SYNCD_REQUIRE_POSTGRES=1) when there is none.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u != "" {
		return u
	}
	msg := "\n*** POSTGRESQL TESTS SKIPPED: " + EnvURL + " is not set. ***\n" +
		"*** Run ./scripts/test (it starts a throwaway cluster) or export " + EnvURL + ". ***"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg + "\n*** " + EnvRequire + "=1: a PostgreSQL database is required. ***")
	}
	t.Skip(msg)
	return ""
}

// DSN creates a fresh PostgreSQL schema with a random name, returns a DSN
// whose search_path selects only that schema, and drops the schema (with
// everything in it) when the test ends. Parallel tests and packages never
// see each other's tables.
func DSN(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	name := "syncd_t_" + randomHex(t, 8)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, base, `CREATE SCHEMA "`+name+`"`); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, base, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	dsn, err := WithSearchPath(base, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// WithSearchPath returns the URL dsn with its search_path runtime parameter
// set to schema.
func WithSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL", EnvURL)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func exec(ctx context.Context, dsn, stmt string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: random: %v", err)
	}
	return hex.EncodeToString(b)
}
