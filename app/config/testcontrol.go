package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
)

// Bounds of the test-control plane's instances (app/testcontrol holds the
// same defaults for callers without a configuration).
const (
	DefaultTestControlMaxInstances = 64
	DefaultTestControlMaxBytes     = 1 << 30
	// MinTestControlInstanceBytes is the smallest part of
	// --test-control-max-bytes an instance may get.
	MinTestControlInstanceBytes = 2 << 20
	// DefaultTestControlDatabaseMaxConns is the plane's PostgreSQL
	// connection budget; MinTestControlDatabaseMaxConns the smallest
	// (the plane's own three and one instance's four).
	DefaultTestControlDatabaseMaxConns = 64
	MinTestControlDatabaseMaxConns     = 7
)

func (c *Config) testControlFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TestControlListen, "test-control-listen", c.TestControlListen,
		"host:port of the conformance test-control plane (loopback only; unauthenticated, for conformance harnesses); empty disables it")
	fs.IntVar(&c.TestControlMaxInstances, "test-control-max-instances", c.TestControlMaxInstances,
		"most test instances the test-control plane keeps open at once; a create past it is refused (429) until one is closed")
	fs.Int64Var(&c.TestControlMaxBytes, "test-control-max-bytes", c.TestControlMaxBytes,
		"storage the test-control plane's instances share, in bytes: each is capped at max-bytes/max-instances "+
			"(half for its database, half for its in-memory blobs and segments), and a write past its cap is refused")
	fs.StringVar(&c.TestControlDatabase, "test-control-database", c.TestControlDatabase,
		"postgres:// URL: every test instance lives in a PostgreSQL schema of its own on this database (named syncd_tc_…), "+
			"created with the instance and dropped with it; empty keeps each in a SQLite file")
	fs.IntVar(&c.TestControlDatabaseMaxConns, "test-control-database-max-conns", c.TestControlDatabaseMaxConns,
		"most PostgreSQL connections the test-control plane holds: 3 of its own and up to 4 an instance, so it also bounds the live instances")
}

// IsLoopbackLiteral reports whether addr's host is written as a loopback
// literal: 127.0.0.1, ::1 or localhost. The test-control plane takes
// nothing else, not even another 127/8 address or a name that resolves to
// one, so where it listens is obvious from the command line.
func IsLoopbackLiteral(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	switch strings.ToLower(host) {
	case "127.0.0.1", "::1", "localhost":
		return true
	}
	return false
}

func (c *Config) validateTestControl() []error {
	var errs []error
	switch {
	case c.TestControlMaxInstances < 1:
		errs = append(errs, fmt.Errorf("--test-control-max-instances %d: must be positive", c.TestControlMaxInstances))
	case c.TestControlMaxBytes/int64(c.TestControlMaxInstances) < MinTestControlInstanceBytes:
		errs = append(errs, fmt.Errorf("--test-control-max-bytes %d over --test-control-max-instances %d leaves each instance less than %d bytes",
			c.TestControlMaxBytes, c.TestControlMaxInstances, MinTestControlInstanceBytes))
	}
	if c.TestControlDatabaseMaxConns < MinTestControlDatabaseMaxConns {
		errs = append(errs, fmt.Errorf("--test-control-database-max-conns %d: want at least %d (the plane's own and one instance's)",
			c.TestControlDatabaseMaxConns, MinTestControlDatabaseMaxConns))
	}
	if d := c.TestControlDatabase; d != "" {
		if kind, _, err := ParseDatabase(d); err != nil || kind != Postgres {
			errs = append(errs, fmt.Errorf("--test-control-database %q: want a postgres:// URL (without it each instance is a SQLite file)", redactURL(d)))
		}
		if c.TestControlListen == "" {
			errs = append(errs, errors.New("--test-control-database needs --test-control-listen"))
		}
	}
	a := c.TestControlListen
	if a == "" {
		return errs
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return append(errs, fmt.Errorf("--test-control-listen %q: want host:port", a))
	}
	if !IsLoopbackLiteral(a) {
		errs = append(errs, fmt.Errorf("--test-control-listen %s: the test-control plane has no authentication and lets any caller create servers, grant scopes and move their clocks; "+
			"it listens only on 127.0.0.1, ::1 or localhost", a))
	}
	if (a == c.Listen || a == c.AdminListen) && !strings.HasSuffix(a, ":0") {
		errs = append(errs, fmt.Errorf("--test-control-listen %s must differ from --listen and --admin-listen", a))
	}
	return errs
}
