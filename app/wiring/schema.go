package wiring

import (
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/schema"
)

// SchemaModule compiles the served schema window while the graph is
// built (phase schema_compile), before any start hook opens storage, and
// provides the current *schema.Schema, the *schema.Window (SPEC §9) and
// the current schema's source.
var SchemaModule = fx.Module("syncd.schema",
	fx.Provide(
		platform.NewSchemaSource,
		NewSchemaWindow,
		NewSchema,
	),
)

// SchemaParams are the inputs of NewSchemaWindow.
type SchemaParams struct {
	fx.In
	Config    config.Config
	Readiness *platform.Readiness
	Log       *zap.Logger
}

// NewSchemaWindow compiles every served schema (--schema, once per
// version, or the files of --schema-window; the embedded demo without
// them) and checks the window. An IR that does not compile, or an older
// version the current schema is not compatible with, fails the start
// before storage opens: the server exits 1 and logs the refusal, which
// names the first incompatible table and column.
func NewSchemaWindow(p SchemaParams) (*schema.Window, error) {
	srcs, err := platform.SchemaSources(p.Config)
	if err != nil {
		return nil, err
	}
	w, err := platform.CompileWindow(srcs, p.Readiness)
	if err != nil {
		return nil, err
	}
	s := w.Current()
	fields := []zap.Field{zap.String("schema", srcs[0].Name), zap.Int32("schema_version", s.Version), zap.Int("tables", len(s.Tables))}
	if w.Len() > 1 {
		fields = append(fields, zap.Int32s("schema_window", w.Versions()))
	}
	p.Log.Info("schema compiled", fields...)
	return w, nil
}

// NewSchema is the window's current schema: storage, fences,
// authorization and validators use it.
func NewSchema(w *schema.Window) *schema.Schema { return w.Current() }
