// Package imagebuilder writes SQLite-image segments (SPEC §5.3) with the
// pure-Go SQLite engine (modernc.org/sqlite), so a CGO-free build serves
// the image lane.
//
// Each image is written into a temporary file through a connection of its
// own, opened for this one file: no journal, no fsync (the file is
// scratch until its bytes are read back and stored under their content
// address), one transaction, rows inserted in the caller's order in
// multi-row statements. The same rows in the same order give the same
// bytes with the same engine version, although §5.3 does not require it.
package imagebuilder

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/ports"
)

// Options configure a Builder.
type Options struct {
	// Dir holds the temporary image files ("" → the system temporary
	// directory). An image's file is removed once its bytes are read.
	Dir string
	// BatchRows is how many rows one INSERT statement writes (0 → 128).
	BatchRows int
}

// Builder implements ports.ImageBuilder.
type Builder struct {
	o Options
}

var _ ports.ImageBuilder = (*Builder)(nil)

// New returns a Builder. A configured Dir is created when missing and
// must take a file: a server that could not write images refuses to start
// rather than fail its first image-lane bootstrap.
func New(o Options) (*Builder, error) {
	if o.BatchRows <= 0 {
		o.BatchRows = 128
	}
	if o.Dir != "" {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("imagebuilder: %w", err)
		}
		f, err := os.CreateTemp(o.Dir, "syncd-image-probe-*")
		if err != nil {
			return nil, fmt.Errorf("imagebuilder: image directory: %w", err)
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	return &Builder{o: o}, nil
}

// maxVariables bounds one statement's bound parameters (SQLite's default
// limit is 32766).
const maxVariables = 32000

// NewImage implements ports.ImageBuilder.
func (b *Builder) NewImage(ctx context.Context, r ports.ImageRequest) (ports.ImageWriter, error) {
	if r.Table == nil {
		return nil, errors.New("imagebuilder: no table")
	}
	if !sqliteimage.Eligible(r.Table) {
		return nil, fmt.Errorf("imagebuilder: table %s has an encrypted column", r.Table.Name)
	}
	f, err := os.CreateTemp(b.o.Dir, "syncd-image-*.sqlite")
	if err != nil {
		return nil, fmt.Errorf("imagebuilder: %w", err)
	}
	path := f.Name()
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("imagebuilder: %w", err)
	}
	w := &writer{req: r, path: path, codec: rowcodec.New(r.Table), cols: len(r.Table.Columns) + 1}
	w.batch = min(b.o.BatchRows, maxVariables/w.cols)
	if err := w.open(ctx); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

type writer struct {
	req   ports.ImageRequest
	path  string
	codec *rowcodec.Codec
	cols  int // bound cells per row
	batch int // rows per full INSERT

	db   *sql.DB
	conn *sql.Conn
	tx   *sql.Tx
	full *sql.Stmt // INSERT of batch rows
	args []any     // cells of the pending rows
	vals []rowcodec.Value
	rows int64
	done bool
	err  error // the first failure: the writer is then unusable
}

// dsn opens the scratch file with no journal, no syncs and an exclusive
// lock; page_size is fixed so the layout does not depend on the engine's
// compiled default.
func (w *writer) dsn() string {
	q := url.Values{}
	for _, p := range []string{"journal_mode(OFF)", "synchronous(OFF)", "locking_mode(EXCLUSIVE)", "page_size(4096)", "temp_store(MEMORY)", "cache_size(-16384)"} {
		q.Add("_pragma", p)
	}
	return "file:" + w.path + "?" + q.Encode()
}

func (w *writer) open(ctx context.Context) error {
	db, err := sql.Open("sqlite", w.dsn())
	if err != nil {
		return fmt.Errorf("imagebuilder: open: %w", err)
	}
	db.SetMaxOpenConns(1)
	w.db = db
	if w.conn, err = db.Conn(ctx); err != nil {
		return fmt.Errorf("imagebuilder: connect: %w", err)
	}
	for _, ddl := range []string{sqliteimage.CreateDataTable(w.req.Table), sqliteimage.CreateMetadataTable} {
		if _, err := w.conn.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("imagebuilder: create tables: %w", err)
		}
	}
	if w.tx, err = w.conn.BeginTx(ctx, nil); err != nil {
		return fmt.Errorf("imagebuilder: begin: %w", err)
	}
	if w.full, err = w.tx.PrepareContext(ctx, insertRows(w.req.Table, w.batch)); err != nil {
		return fmt.Errorf("imagebuilder: prepare: %w", err)
	}
	w.args = make([]any, 0, w.batch*w.cols)
	return nil
}

// insertRows is one INSERT of n rows.
func insertRows(t *schema.Table, n int) string {
	one := sqliteimage.InsertRow(t)
	i := strings.Index(one, " VALUES ")
	row := one[i+len(" VALUES "):]
	var b strings.Builder
	b.Grow(i + 8 + n*(len(row)+2))
	b.WriteString(one[:i+len(" VALUES ")])
	for k := 0; k < n; k++ {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// Add implements ports.ImageWriter.
func (w *writer) Add(ctx context.Context, version int64, payload []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("imagebuilder: Add after Finish")
	}
	vals, err := w.codec.DecodeRow(payload, w.vals)
	if err != nil {
		return w.fail(fmt.Errorf("imagebuilder: stored row of %s: %w", w.req.Table.Name, err))
	}
	w.vals = vals
	start := len(w.args)
	for _, v := range vals {
		c, err := sqliteimage.Cell(v)
		if err != nil {
			w.args = w.args[:start]
			return w.fail(fmt.Errorf("imagebuilder: row of %s: %w", w.req.Table.Name, err))
		}
		if b, ok := c.([]byte); ok {
			c = bytes.Clone(b) // bound when the batch runs, after the caller's buffer may change
		}
		w.args = append(w.args, c)
	}
	w.args = append(w.args, version)
	w.rows++
	if len(w.args) == cap(w.args) {
		if _, err := w.full.ExecContext(ctx, w.args...); err != nil {
			return w.fail(fmt.Errorf("imagebuilder: insert: %w", err))
		}
		w.args = w.args[:0]
	}
	return nil
}

func (w *writer) fail(err error) error {
	w.err = err
	return err
}

// Finish implements ports.ImageWriter.
func (w *writer) Finish(ctx context.Context) ([]byte, int64, error) {
	if w.err != nil {
		return nil, 0, w.err
	}
	if w.done {
		return nil, 0, errors.New("imagebuilder: Finish twice")
	}
	defer w.Abort()
	if n := len(w.args) / w.cols; n > 0 {
		if _, err := w.tx.ExecContext(ctx, insertRows(w.req.Table, n), w.args...); err != nil {
			return nil, 0, w.fail(fmt.Errorf("imagebuilder: insert: %w", err))
		}
		w.args = w.args[:0]
	}
	meta := sqliteimage.Metadata{Format: sqliteimage.Format, Table: w.req.Table.Name, SchemaVersion: int64(w.req.SchemaVersion),
		AsOfCommitSeq: w.req.AsOfCommitSeq, ScopeDigest: w.req.ScopeDigest, RowCount: w.rows}
	if _, err := w.tx.ExecContext(ctx, sqliteimage.InsertMetadata, meta.Args()...); err != nil {
		return nil, 0, w.fail(fmt.Errorf("imagebuilder: metadata: %w", err))
	}
	_ = w.full.Close()
	w.full = nil
	if err := w.tx.Commit(); err != nil {
		return nil, 0, w.fail(fmt.Errorf("imagebuilder: commit: %w", err))
	}
	w.tx = nil
	if err := w.closeDB(); err != nil {
		return nil, 0, w.fail(fmt.Errorf("imagebuilder: close: %w", err))
	}
	b, err := os.ReadFile(w.path)
	if err != nil {
		return nil, 0, w.fail(fmt.Errorf("imagebuilder: read image: %w", err))
	}
	w.done = true
	return b, w.rows, nil
}

func (w *writer) closeDB() error {
	var errs []error
	if w.full != nil {
		errs = append(errs, w.full.Close())
		w.full = nil
	}
	if w.tx != nil {
		_ = w.tx.Rollback()
		w.tx = nil
	}
	if w.conn != nil {
		errs = append(errs, w.conn.Close())
		w.conn = nil
	}
	if w.db != nil {
		errs = append(errs, w.db.Close())
		w.db = nil
	}
	return errors.Join(errs...)
}

// Abort implements ports.ImageWriter: it closes the connection and removes
// the scratch file.
func (w *writer) Abort() {
	_ = w.closeDB()
	if w.path != "" {
		_ = os.Remove(w.path)
		w.path = ""
	}
	if !w.done && w.err == nil {
		w.err = errors.New("imagebuilder: image aborted")
	}
}
