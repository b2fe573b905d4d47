package platform

import (
	"context"
	"fmt"
	"os"
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

// NewSchemaSource serves --schema, or the embedded todos demo without it.
func NewSchemaSource(cfg config.Config) SchemaSource {
	if cfg.DemoSchema() {
		return SchemaSource{Name: "embedded " + todos.Name, Read: func() ([]byte, error) { return todos.IR(), nil }}
	}
	path := cfg.Schema
	return SchemaSource{Name: path, Read: func() ([]byte, error) { return os.ReadFile(path) }}
}

// CompileSchema runs phase schema_compile: it reads and compiles the IR
// of src and publishes the schema on r. On failure the phase stays
// schema_compile with the error recorded, and the error (a
// *schema.CompileError for a refused IR) is returned.
func CompileSchema(src SchemaSource, r *Readiness) (*schema.Schema, error) {
	r.enter(PhaseSchemaCompile, nil)
	data, err := src.Read()
	if err != nil {
		err = fmt.Errorf("schema %s: %w", src.Name, err)
		r.enter(PhaseSchemaCompile, err)
		return nil, err
	}
	s, err := schema.Load(data)
	if err != nil {
		err = fmt.Errorf("schema %s: %w", src.Name, err)
		r.enter(PhaseSchemaCompile, err)
		return nil, err
	}
	r.setSchema(s)
	return s, nil
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
