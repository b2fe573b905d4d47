package push

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/syncd-dev/syncd/domain/commit"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func cellValues(vals []rowcodec.Value) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v.Plain()
	}
	return out
}

func rowValues(t *schema.Table, vals []rowcodec.Value) ports.RowValues {
	m := make(ports.RowValues, len(t.Columns))
	for i, c := range t.Columns {
		if i < len(vals) && !vals[i].IsAbsent() {
			m[c.Name] = vals[i].Plain()
		}
	}
	return m
}

// valueFunc renders a row's columns for scope extraction.
func valueFunc(t *schema.Table, vals []rowcodec.Value) scopes.ValueFunc {
	return func(column string) (string, bool) {
		i := t.ColumnIndex(column)
		if i < 0 || i >= len(vals) {
			return "", false
		}
		return rowcodec.ScopeString(vals[i])
	}
}

func copyScopes(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func appendUnique(ids []string, id string) []string {
	i := sort.SearchStrings(ids, id)
	if i < len(ids) && ids[i] == id {
		return ids
	}
	ids = append(ids, "")
	copy(ids[i+1:], ids[i:])
	ids[i] = id
	return ids
}

func hasBlobColumn(t *schema.Table) bool {
	for _, c := range t.Columns {
		if c.Type == schema.TypeBlobRef {
			return true
		}
	}
	return false
}

// txReader is the candidate-state reader hooks get: the push
// transaction's own reads, decoded.
type txReader struct {
	tx ports.PushTx
	b  *Batch
}

const (
	defaultScanLimit = 100
	maxScanLimit     = 1000
)

func (r *txReader) table(name string) (*schema.Table, error) {
	t := r.b.Schema.Table(name)
	if t == nil {
		return nil, syncerr.Newf(syncerr.UnknownTable, "hook read of unknown table %q", name)
	}
	return t, nil
}

func (r *txReader) decode(t *schema.Table, row commit.Row) (ports.CandidateRow, error) {
	vals, err := r.b.codec(t).DecodeRow(row.Payload, nil)
	if err != nil {
		return ports.CandidateRow{}, fmt.Errorf("decode row %s/%s: %w", t.Name, row.RowID, err)
	}
	return ports.CandidateRow{RowID: row.RowID, Version: row.Version, Values: rowValues(t, vals)}, nil
}

func (r *txReader) decodeAll(t *schema.Table, rows []commit.Row) ([]ports.CandidateRow, error) {
	out := make([]ports.CandidateRow, 0, len(rows))
	for _, row := range rows {
		c, err := r.decode(t, row)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (r *txReader) GetRow(ctx context.Context, table, rowID string) (*ports.CandidateRow, error) {
	t, err := r.table(table)
	if err != nil {
		return nil, err
	}
	row, err := r.tx.GetRow(ctx, table, rowID)
	if err != nil || row == nil {
		return nil, err
	}
	c, err := r.decode(t, *row)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func (r *txReader) ScanRows(ctx context.Context, q ports.RowScan) ([]ports.CandidateRow, error) {
	t, err := r.table(q.Table)
	if err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = defaultScanLimit
	}
	if q.Limit < 1 || q.Limit > maxScanLimit {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "scan limit %d outside 1..%d", q.Limit, maxScanLimit)
	}
	if len(q.ScopeFilter) == 0 {
		return nil, syncerr.Newf(syncerr.StorageScanRequiresScope, "candidate scan of %q without a scope filter", q.Table)
	}
	rows, err := r.tx.ScanRows(ctx, q)
	if err != nil {
		return nil, err
	}
	return r.decodeAll(t, rows)
}

func (r *txReader) Query(ctx context.Context, q ports.RowLookup) ([]ports.CandidateRow, error) {
	t, err := r.table(q.Table)
	if err != nil {
		return nil, err
	}
	rows, err := r.tx.Lookup(ctx, q)
	if err != nil {
		return nil, err
	}
	return r.decodeAll(t, rows)
}

// QueryAuthoritative implements ports.TxReader.
func (r *txReader) QueryAuthoritative(ctx context.Context, q ports.AuthoritativeQuery) ([]ports.CandidateRow, error) {
	t, err := r.table(q.Table)
	if err != nil {
		return nil, err
	}
	rows, err := r.tx.QueryAuthoritative(ctx, q)
	if err != nil {
		return nil, err
	}
	return r.decodeAll(t, rows)
}

// ScanRowsByIndex implements ports.TxReader: the lookup's checks, then
// the index's equalities and the row id cursor as one authoritative
// query on the transaction, in row id order.
func (r *txReader) ScanRowsByIndex(ctx context.Context, q ports.IndexScan) ([]ports.CandidateRow, error) {
	t, err := r.table(q.Table)
	if err != nil {
		return nil, err
	}
	if q.Limit < 1 || q.Limit > maxScanLimit {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "index scan limit %d outside 1..%d", q.Limit, maxScanLimit)
	}
	if !t.Materialize {
		return nil, syncerr.Newf(syncerr.StorageTxQueryUnsupported, "index scan of %q, which is not materialized", q.Table)
	}
	i := slices.IndexFunc(t.Indexes, func(ix schema.Index) bool { return ix.Name == q.Index })
	if i < 0 {
		return nil, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q declares no index %q", q.Table, q.Index)
	}
	ix := t.Indexes[i]
	if len(q.Values) != len(ix.Columns) {
		return nil, syncerr.Newf(syncerr.StorageIndexValueCount, "index %q has %d columns, the scan gives %d values", ix.Name, len(ix.Columns), len(q.Values))
	}
	where := make([]opdomain.Condition, len(ix.Columns))
	for k, name := range ix.Columns {
		v, err := indexValue(t.Columns[t.ColumnIndex(name)], q.Values[k])
		if err != nil {
			return nil, fmt.Errorf("index %q: %w", ix.Name, err)
		}
		where[k] = opdomain.Condition{Column: name, Op: opdomain.OpEq, Value: v}
	}
	rows, err := r.tx.QueryAuthoritative(ctx, ports.AuthoritativeQuery{Table: t.Name, Where: where, AfterRowID: q.AfterRowID, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	return r.decodeAll(t, rows)
}

// indexValue types one value of an index scan for its column: nil, or a
// value of a type both engines compare alike.
func indexValue(c schema.Column, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if !opdomain.Comparable(c) {
		return nil, fmt.Errorf("column %q (%s, encrypted %t) cannot be looked up", c.Name, c.Type, c.Encrypted)
	}
	out, err := opdomain.ColumnValue(c.Type, v)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", c.Name, err)
	}
	return out, nil
}
