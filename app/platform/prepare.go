package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/ports"
)

// SchemaSource yields the schema IR document the server runs.
type SchemaSource struct {
	// Name is the file path, or the embedded demo's name.
	Name string
	// Read returns the IR bytes.
	Read func() ([]byte, error)
}

// NewSchemaSource serves the current schema: the first --schema, the
// first file of --schema-window, or the embedded todos demo without them.
func NewSchemaSource(cfg config.Config) SchemaSource {
	switch {
	case cfg.SchemaWindow.File != "":
		file := cfg.SchemaWindow.File
		return SchemaSource{Name: file, Read: func() ([]byte, error) {
			srcs, err := SchemaSources(cfg)
			if err != nil {
				return nil, err
			}
			return srcs[0].Read()
		}}
	case cfg.DemoSchema():
		return SchemaSource{Name: "embedded " + todos.Name, Read: func() ([]byte, error) { return todos.IR(), nil }}
	}
	return fileSource(cfg.Schema)
}

func fileSource(path string) SchemaSource {
	return SchemaSource{Name: path, Read: func() ([]byte, error) { return os.ReadFile(path) }}
}

// SchemaSources lists the served schema window's IR documents, current
// first (SPEC §9): every --schema, the files --schema-window lists, or
// the embedded demo alone. It reads the window file, not the schemas.
func SchemaSources(cfg config.Config) ([]SchemaSource, error) {
	if cfg.SchemaWindow.File != "" {
		paths, err := ReadSchemaWindow(cfg.SchemaWindow.File)
		if err != nil {
			return nil, err
		}
		out := make([]SchemaSource, len(paths))
		for i, p := range paths {
			out[i] = fileSource(p)
		}
		return out, nil
	}
	if cfg.DemoSchema() {
		return []SchemaSource{NewSchemaSource(cfg)}, nil
	}
	var out []SchemaSource
	for _, p := range cfg.SchemaFiles() {
		out = append(out, fileSource(p))
	}
	return out, nil
}

// ReadSchemaWindow reads a --schema-window file: a JSON array of IR file
// paths, or one path a line (blank lines and lines starting with # are
// skipped), current first. Relative paths are relative to the file.
func ReadSchemaWindow(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("schema window %s: %w", file, err)
	}
	var paths []string
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &paths); err != nil {
			return nil, fmt.Errorf("schema window %s: want a JSON array of IR file paths: %w", file, err)
		}
	} else {
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") {
				paths = append(paths, line)
			}
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("schema window %s: lists no IR file", file)
	}
	dir := filepath.Dir(file)
	for i, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("schema window %s: entry %d is empty", file, i+1)
		}
		if !filepath.IsAbs(p) {
			paths[i] = filepath.Join(dir, p)
		}
	}
	return paths, nil
}

// CompileSchema runs phase schema_compile for one schema: it reads and
// compiles the IR of src and publishes the schema (a window of one
// version) on r. On failure the phase stays schema_compile with the
// error recorded, and the error (a *schema.CompileError for a refused
// IR) is returned.
func CompileSchema(src SchemaSource, r *Readiness) (*schema.Schema, error) {
	w, err := CompileWindow([]SchemaSource{src}, r)
	if err != nil {
		return nil, err
	}
	return w.Current(), nil
}

// CompileWindow runs phase schema_compile for the served window: it
// reads and compiles every IR of srcs (current first), checks the window
// (schema.NewWindow: an incompatible older version is a
// *schema.WindowError naming its first incompatible column) and
// publishes it on r. On failure the phase stays schema_compile with the
// error recorded, and the error is returned.
func CompileWindow(srcs []SchemaSource, r *Readiness) (*schema.Window, error) {
	r.enter(PhaseSchemaCompile, nil)
	fail := func(err error) (*schema.Window, error) {
		r.enter(PhaseSchemaCompile, err)
		return nil, err
	}
	if len(srcs) == 0 {
		return fail(errors.New("schema: no schema to serve"))
	}
	compiled := make([]*schema.Schema, len(srcs))
	for i, src := range srcs {
		data, err := src.Read()
		if err != nil {
			return fail(fmt.Errorf("schema %s: %w", src.Name, err))
		}
		if compiled[i], err = schema.Load(data); err != nil {
			return fail(fmt.Errorf("schema %s: %w", src.Name, err))
		}
	}
	w, err := schema.NewWindow(compiled[0], compiled[1:]...)
	if err != nil {
		var we *schema.WindowError
		if errors.As(err, &we) && we.Version != 0 {
			for i, s := range compiled {
				if i > 0 && s.Version == we.Version {
					err = fmt.Errorf("schema %s: %w", srcs[i].Name, err)
					break
				}
			}
		}
		return fail(err)
	}
	r.setWindow(w)
	return w, nil
}

// Preparer runs the storage readiness phases for a compiled schema: it
// lets storage create or verify its layout (ports.SchemaStore), which may
// report a pending backfill checkpoint. Without a SchemaStore the storage
// phases are empty and the server is ready at once.
type Preparer struct {
	Store        ports.SchemaStore // optional
	Declarations []checkpoint.Declaration
	Readiness    *Readiness
	Log          *zap.Logger
}

// EnsureStorage runs phases storage_migration and backfill_checkpoint
// once and enters ready when storage accepts the schema.
func (p *Preparer) EnsureStorage(ctx context.Context, s *schema.Schema) error {
	p.Readiness.enter(PhaseStorageMigration, nil)
	if p.Store != nil {
		if err := p.Store.EnsureSchema(ctx, s, p.Declarations); err != nil {
			p.Readiness.enter(PhaseOf(err, false), err)
			return err
		}
	}
	p.Readiness.enter(PhaseReady, nil)
	return nil
}

// Run prepares storage until ready, retrying failures with capped
// exponential backoff (another process may be migrating or backfilling),
// until ctx ends.
func (p *Preparer) Run(ctx context.Context, s *schema.Schema, backoff Backoff) error {
	if p.Store == nil {
		p.Log.Warn("no storage adapter in the server graph: storage phases skipped, nothing is persisted")
	}
	for attempt := 0; ; attempt++ {
		err := p.EnsureStorage(ctx, s)
		if err == nil {
			p.Log.Info("ready", zap.Int32("schema_version", s.Version))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := backoff.Delay(attempt)
		p.Log.Warn("storage not ready; retrying", zap.String("phase", string(p.Readiness.Phase())),
			zap.Error(err), zap.Duration("retry_in", wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Backoff is a capped exponential delay.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// DefaultBackoff retries storage preparation after 1 s, doubling to 30 s.
func DefaultBackoff() Backoff { return Backoff{Initial: time.Second, Max: 30 * time.Second} }

// Delay returns the wait before retry attempt+1.
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Initial
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}
