package config

import (
	"flag"
	"fmt"
)

// Fanout modes: how commit notices and realtime events reach the other
// syncd nodes.
const (
	// FanoutAuto is postgres when --database is PostgreSQL, local otherwise.
	FanoutAuto = "auto"
	// FanoutLocal delivers within this process only (one node).
	FanoutLocal = "local"
	// FanoutPostgres uses LISTEN/NOTIFY on the --database PostgreSQL.
	FanoutPostgres = "postgres"
)

func (c *Config) fanoutFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Fanout, "fanout", c.Fanout,
		"how commits and realtime events reach other nodes: auto (postgres with a PostgreSQL --database, local otherwise), local (this process only) or postgres (LISTEN/NOTIFY)")
}

// FanoutMode resolves --fanout auto against --database.
func (c Config) FanoutMode() string {
	if c.Fanout != FanoutAuto && c.Fanout != "" {
		return c.Fanout
	}
	if kind, _, err := ParseDatabase(c.Database); err == nil && kind == Postgres {
		return FanoutPostgres
	}
	return FanoutLocal
}

func (c Config) validateFanout() []error {
	switch c.Fanout {
	case FanoutAuto, FanoutLocal:
	case FanoutPostgres:
		if kind, _, err := ParseDatabase(c.Database); err == nil && kind != Postgres {
			return []error{fmt.Errorf("--fanout postgres needs a postgres:// --database")}
		}
	default:
		return []error{fmt.Errorf("--fanout %q: want auto, local or postgres", c.Fanout)}
	}
	return nil
}
