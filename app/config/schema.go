package config

import (
	"errors"
	"flag"
	"strings"
)

// SchemaWindow is the served schema window's older versions (SPEC §9,
// docs/schema-bump.md); Config.Schema is the current version.
type SchemaWindow struct {
	// Older are the IR files of the older served versions, newest first:
	// every --schema after the first.
	Older []string
	// File lists the window's IR files, current first (one path a line,
	// or a JSON array; relative paths are relative to the file), instead
	// of --schema.
	File string
}

// schemaFlag is --schema: repeatable, the first value is the current
// schema and every later one an older served version. Each source (YAML,
// environment, command line) replaces the list of the one before it.
type schemaFlag struct {
	c     *Config
	fresh bool
}

func (f *schemaFlag) String() string {
	if f == nil || f.c == nil {
		return ""
	}
	return strings.Join(f.c.SchemaFiles(), ", ")
}

func (f *schemaFlag) Set(v string) error {
	if f.fresh || f.c.Schema == "" {
		f.c.Schema, f.c.SchemaWindow.Older, f.fresh = v, nil, false
		return nil
	}
	if v == "" {
		return errors.New("an older schema needs a file")
	}
	f.c.SchemaWindow.Older = append(f.c.SchemaWindow.Older, v)
	return nil
}

// Get is the one file as a string (printed as before the window), or
// the list.
func (f *schemaFlag) Get() any {
	if len(f.c.SchemaWindow.Older) == 0 {
		return f.c.Schema
	}
	return f.c.SchemaFiles()
}

// repeatable marks a flag a YAML list sets value by value.
func (f *schemaFlag) repeatable() {}

// nextSource makes the next value of a repeatable flag start its list anew.
func nextSource(fs *flag.FlagSet) {
	fs.VisitAll(func(fl *flag.Flag) {
		if sf, ok := fl.Value.(*schemaFlag); ok {
			sf.fresh = true
		}
	})
}

func (c *Config) schemaFlags(fs *flag.FlagSet) {
	fs.Var(&schemaFlag{c: c}, "schema", "schema IR file written by the Syncular CLI (syncular.ir.json); empty serves the embedded todos demo. Repeat it to serve older schema versions beside the current one: current first, then older ones, newest first (SPEC §9, docs/schema-bump.md)")
	fs.StringVar(&c.SchemaWindow.File, "schema-window", c.SchemaWindow.File, "file listing the served schema window's IR files, current first (one path a line or a JSON array; relative to the file), instead of --schema")
}

// SchemaFiles returns the IR files given with --schema, current first.
func (c Config) SchemaFiles() []string {
	if c.Schema == "" {
		return nil
	}
	return append([]string{c.Schema}, c.SchemaWindow.Older...)
}

func (c Config) validateSchema() []error {
	if c.SchemaWindow.File != "" && c.Schema != "" {
		return []error{errors.New("--schema and --schema-window are exclusive: list the window in the file, or give --schema once per version")}
	}
	return nil
}
