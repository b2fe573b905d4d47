package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Fill is the built-in backfill (the one `syncd checkpoint run` offers
// without host code): for one table, every current row whose named
// columns are NULL gets them set to fixed values, written as server
// commits, so a version bump that added a column with a default hands
// existing rows, and every client holding them, that default. Rows that
// already carry a value are left alone, so a run can be repeated.
//
// Each write carries the row's version as its base version: a row a
// client changed meanwhile is a conflict, and the batch is derived again
// from the current rows.
type Fill struct {
	table *schema.Table
	codec *rowcodec.Codec
	cols  []int
	vals  []rowcodec.Value
}

var _ ports.Backfiller = (*Fill)(nil)

// NewFill builds the fill of table t of s; set maps column names to the
// value as JSON text (a string value is a JSON string). A missing table
// or column, the primary key, a scope column, a non-nullable column's
// null, a crdt or blob_ref column, or a value of the wrong type is
// sync.backfill.invalid_spec.
func NewFill(s *schema.Schema, table string, set map[string]string) (*Fill, error) {
	t := s.Table(table)
	if t == nil {
		return nil, syncerr.Newf(syncerr.BackfillInvalidSpec, "table %q is not in the running schema", table)
	}
	if len(set) == 0 {
		return nil, syncerr.Newf(syncerr.BackfillInvalidSpec, "a fill sets at least one column")
	}
	f := &Fill{table: t, codec: rowcodec.New(t)}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		i := t.ColumnIndex(n)
		if i < 0 {
			return nil, syncerr.Newf(syncerr.BackfillInvalidSpec, "table %q has no column %q", table, n)
		}
		if i == t.PKIndex || scopeColumn(t, n) {
			return nil, syncerr.Newf(syncerr.BackfillInvalidSpec, "column %q of %q is the primary key or a scope column", n, table)
		}
		v, err := parseValue(t.Columns[i], set[n])
		if err != nil {
			return nil, syncerr.Newf(syncerr.BackfillInvalidSpec, "column %q of %q: %v", n, table, err)
		}
		f.cols, f.vals = append(f.cols, i), append(f.vals, v)
	}
	return f, nil
}

func scopeColumn(t *schema.Table, name string) bool {
	for _, sc := range t.Scopes {
		if sc.Column == name {
			return true
		}
	}
	return false
}

// parseValue reads one JSON value for column c.
func parseValue(c schema.Column, text string) (rowcodec.Value, error) {
	var raw any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return rowcodec.Value{}, fmt.Errorf("value %q is not JSON", text)
	}
	if raw == nil {
		return rowcodec.Value{}, fmt.Errorf("null fills nothing")
	}
	switch c.Type {
	case schema.TypeString:
		if s, ok := raw.(string); ok {
			return rowcodec.String(s), nil
		}
	case schema.TypeInteger:
		if n, ok := raw.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return rowcodec.Int(i), nil
			}
		}
	case schema.TypeFloat:
		if n, ok := raw.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return rowcodec.Float(f), nil
			}
		}
	case schema.TypeBoolean:
		if b, ok := raw.(bool); ok {
			return rowcodec.Bool(b), nil
		}
	case schema.TypeJSON:
		return rowcodec.JSON(strings.TrimSpace(text)), nil
	case schema.TypeBytes:
		if c.Encrypted {
			return rowcodec.Value{}, fmt.Errorf("an encrypted column cannot be filled by the server")
		}
		if s, ok := raw.(string); ok {
			return rowcodec.Bytes([]byte(s)), nil
		}
	default:
		return rowcodec.Value{}, fmt.Errorf("a %s column cannot be filled", c.Type)
	}
	return rowcodec.Value{}, fmt.Errorf("value %s does not fit a %s column", text, c.Type)
}

// Sources implements ports.Backfiller: the filled table.
func (f *Fill) Sources() []string { return []string{f.table.Name} }

// Scan implements ports.Backfiller: one page of the table by row id.
func (f *Fill) Scan(ctx context.Context, in ports.BackfillScan) (ports.BackfillBatch, error) {
	rows, err := in.Rows.ScanTable(ctx, in.Partition, ports.TableScan{Table: f.table.Name, AfterRowID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return ports.BackfillBatch{}, err
	}
	b := ports.BackfillBatch{Examined: int64(len(rows)), Cursor: in.Cursor, Done: len(rows) < in.Limit}
	for i := range rows {
		op, ok, err := f.fill(&rows[i])
		if err != nil {
			return ports.BackfillBatch{}, err
		}
		if ok {
			b.Operations = append(b.Operations, op)
		}
		b.Cursor = rows[i].RowID
	}
	return b, nil
}

// CatchUp implements ports.Backfiller: the changed rows, read again.
func (f *Fill) CatchUp(ctx context.Context, in ports.BackfillCatchUp) (ports.BackfillBatch, error) {
	var b ports.BackfillBatch
	seen := map[string]bool{}
	for _, ch := range in.Changes {
		if ch.Table != f.table.Name || ch.Op != commit.OpUpsert || seen[ch.RowID] {
			continue
		}
		seen[ch.RowID] = true
		b.Examined++
		r, err := in.Row(ctx, f.table.Name, ch.RowID)
		if err != nil {
			return ports.BackfillBatch{}, err
		}
		if r == nil {
			continue
		}
		op, ok, err := f.fill(r)
		if err != nil {
			return ports.BackfillBatch{}, err
		}
		if ok {
			b.Operations = append(b.Operations, op)
		}
	}
	return b, nil
}

// fill returns the sparse write setting the row's NULL fill columns.
func (f *Fill) fill(r *commit.Row) (ssp2.PushOperation, bool, error) {
	vals, err := f.codec.DecodeRow(r.Payload, nil)
	if err != nil {
		return ssp2.PushOperation{}, false, fmt.Errorf("decode row %s/%s: %w", f.table.Name, r.RowID, err)
	}
	sparse := make([]rowcodec.Value, len(vals))
	sparse[f.table.PKIndex] = vals[f.table.PKIndex]
	any := false
	for k, c := range f.cols {
		if vals[c].IsNull() {
			sparse[c], any = f.vals[k], true
		}
	}
	if !any {
		return ssp2.PushOperation{}, false, nil
	}
	payload, err := f.codec.AppendSparse(nil, sparse)
	if err != nil {
		return ssp2.PushOperation{}, false, fmt.Errorf("encode fill of %s/%s: %w", f.table.Name, r.RowID, err)
	}
	return ssp2.PushOperation{Table: f.table.Name, RowID: r.RowID, Op: ssp2.OpUpsert,
		BaseVersion: ssp2.Some(r.Version), Payload: payload}, true, nil
}
