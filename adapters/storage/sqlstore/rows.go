package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// drivingVariable validates a scope filter and picks the variable whose
// index range drives candidate selection (fewest values, then name).
func drivingVariable(filter map[string][]string) (string, error) {
	if len(filter) == 0 {
		return "", syncerr.New(syncerr.StorageScanRequiresScope)
	}
	best := ""
	for v, vals := range filter {
		if best == "" || len(vals) < len(filter[best]) || (len(vals) == len(filter[best]) && v < best) {
			best = v
		}
	}
	return best, nil
}

// matches applies the scope-filter rule to stored scopes.
func matches(stored map[string]string, filter map[string][]string) bool {
	for v, vals := range filter {
		if !termHolds(stored, v, vals) {
			return false
		}
	}
	return true
}

// termHolds is one variable of the rule: stored has v, with one of vals.
func termHolds(stored map[string]string, v string, vals []string) bool {
	got, ok := stored[v]
	return ok && slices.Contains(vals, got)
}

// filterTerms is a scope filter as a slice, for a read that matches many
// changes against one filter: ranging over the filter's map for every
// change cost more than the lookups it makes.
type filterTerms []filterTerm

type filterTerm struct {
	v    string
	vals []string
}

func termsOf(filter map[string][]string) filterTerms {
	out := make(filterTerms, 0, len(filter))
	for v, vals := range filter {
		out = append(out, filterTerm{v: v, vals: vals})
	}
	return out
}

// match is matches(stored, filter) for the filter t was built from.
func (t filterTerms) match(stored map[string]string) bool {
	for i := range t {
		if !termHolds(stored, t[i].v, t[i].vals) {
			return false
		}
	}
	return true
}

func encodeScopes(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(m) // map[string]string always marshals; keys sorted
	return string(b)
}

// candidates renders the index-driven candidate subquery: per value a
// range of the index in key order, limited, merged by UNION when several.
// Each per-value part takes the args (prefix..., value, bounds..., limit).
func candidates(index, key, bounds string, nvals int) string {
	one := fmt.Sprintf("SELECT %s AS k FROM %s WHERE partition=? AND tbl=? AND var=? AND value=?%s ORDER BY %s LIMIT ?",
		key, index, bounds, key)
	if nvals == 1 {
		return one
	}
	parts := make([]string, nvals)
	for i := range parts {
		parts[i] = fmt.Sprintf("SELECT k FROM (%s) s%d", one, i)
	}
	return strings.Join(parts, " UNION ") + " ORDER BY k LIMIT ?"
}

// candidateArgs repeats the per-value args and appends the outer limit.
func candidateArgs(prefix []any, values []string, bounds []any, limit int) []any {
	out := make([]any, 0, len(values)*(len(prefix)+len(bounds)+2)+1)
	for _, v := range values {
		out = append(out, prefix...)
		out = append(out, v)
		out = append(out, bounds...)
		out = append(out, limit)
	}
	if len(values) > 1 {
		out = append(out, limit)
	}
	return out
}

// scanQuery is the row-scan page statement for nvals driving values; its
// args are candidateArgs(partition, table, var; values; after; batch) then
// the partition.
func (s *Store) scanQuery(ts *tableSQL, nvals int) string {
	return s.q(fmt.Sprintf("SELECT c.k, %s FROM (%s) c LEFT JOIN %s r ON r.%s=? AND r.%s=c.k ORDER BY c.k",
		ts.selectCols, candidates("sync_row_scopes", "row_id", " AND row_id>?", nvals),
		ts.quoted, quoteIdent(colPartition), quoteIdent(colRowID)))
}

// scanRows implements RowScan over q (a pool or a transaction).
func (s *Store) scanRows(ctx context.Context, q Querier, partition string, r ports.RowScan) ([]commit.Row, error) {
	ts, err := s.table(r.Table)
	if err != nil {
		return nil, err
	}
	drive, err := drivingVariable(r.ScopeFilter)
	if err != nil {
		return nil, err
	}
	if r.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "row scan limit %d", r.Limit)
	}
	values := dedupe(r.ScopeFilter[drive])
	if len(values) == 0 {
		return nil, nil
	}
	batch := max(64, r.Limit)
	query := s.scanQuery(ts, len(values))
	var out []commit.Row
	after := r.AfterRowID
	for len(out) < r.Limit {
		args := candidateArgs([]any{partition, r.Table, drive}, values, []any{after}, batch)
		args = append(args, partition)
		n, err := s.scanPage(ctx, q, query, args, r, &out, &after)
		if err != nil {
			return nil, internal("scan rows", err)
		}
		if n < batch {
			break
		}
	}
	return out, nil
}

func (s *Store) scanPage(ctx context.Context, q Querier, query string, args []any, r ports.RowScan, out *[]commit.Row, after *string) (int, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rows.Close() }()
	n := 0
	for rows.Next() {
		n++
		var id string
		var version *int64
		var scopes, payload, cv []byte
		if err := rows.Scan(&id, &version, &scopes, &payload, columnVersions{&cv}); err != nil {
			return n, err
		}
		*after = id
		if version == nil || len(*out) >= r.Limit {
			continue // a candidate whose row vanished, or past the limit
		}
		m, err := decodeScopes(scopes)
		if err != nil {
			return n, err
		}
		if !matches(m, r.ScopeFilter) {
			continue
		}
		*out = append(*out, commit.Row{RowID: id, Version: *version, Scopes: m, Payload: payload, ColumnVersions: cv})
		if len(*out) >= r.Limit {
			break
		}
	}
	return n, rows.Err()
}

func dedupe(vals []string) []string {
	if len(vals) < 2 {
		return vals
	}
	out := append([]string(nil), vals...)
	sort.Strings(out)
	j := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[j-1] {
			out[j] = out[i]
			j++
		}
	}
	return out[:j]
}

// getRow reads one current row over q.
func (s *Store) getRow(ctx context.Context, q Querier, partition, table, rowID string) (*commit.Row, error) {
	ts, err := s.table(table)
	if err != nil {
		return nil, err
	}
	var r commit.Row
	var scopes []byte
	ok, err := queryOne(ctx, q, ts.get, []any{partition, rowID}, &r.Version, &scopes, &r.Payload, columnVersions{&r.ColumnVersions})
	if err != nil {
		return nil, internal("get row", err)
	}
	if !ok {
		return nil, nil
	}
	r.RowID = rowID
	if r.Scopes, err = decodeScopes(scopes); err != nil {
		return nil, internal("get row", err)
	}
	return &r, nil
}

// lookup runs a RowLookup over q.
func (s *Store) lookup(ctx context.Context, q Querier, partition string, l ports.RowLookup) ([]commit.Row, error) {
	ts, err := s.table(l.Table)
	if err != nil {
		return nil, err
	}
	if !ts.t.Materialize {
		return nil, syncerr.Newf(syncerr.StorageTxQueryUnsupported, "table %q is not materialized", l.Table)
	}
	if l.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "lookup limit %d", l.Limit)
	}
	cols := make([]string, 0, len(l.Equals))
	for c := range l.Equals {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	var where strings.Builder
	args := []any{partition}
	for _, c := range cols {
		i := columnIndex(ts, c)
		if i < 0 {
			return nil, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no column %q", l.Table, c)
		}
		v := l.Equals[c]
		if v == nil {
			fmt.Fprintf(&where, " AND r.%s IS NULL", quoteIdent(c))
			continue
		}
		fmt.Fprintf(&where, " AND r.%s=?", quoteIdent(c))
		args = append(args, s.d.BindValue(ts.t.Columns[i].Type, v))
	}
	args = append(args, l.Limit)
	rows, err := q.QueryContext(ctx, s.q(fmt.Sprintf("SELECT r.%s, %s FROM %s r WHERE r.%s=?%s ORDER BY r.%s LIMIT ?",
		quoteIdent(colRowID), ts.selectCols, ts.quoted, quoteIdent(colPartition), where.String(), quoteIdent(colRowID))), args...)
	if err != nil {
		return nil, internal("lookup", err)
	}
	defer func() { _ = rows.Close() }()
	var out []commit.Row
	for rows.Next() {
		var r commit.Row
		var scopes []byte
		if err := rows.Scan(&r.RowID, &r.Version, &scopes, &r.Payload, columnVersions{&r.ColumnVersions}); err != nil {
			return nil, internal("lookup", err)
		}
		if r.Scopes, err = decodeScopes(scopes); err != nil {
			return nil, internal("lookup", err)
		}
		out = append(out, r)
	}
	return out, internal("lookup", rows.Err())
}

func columnIndex(ts *tableSQL, name string) int {
	for i, c := range ts.t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// ScanRows implements ports.RowReader.
func (s *Store) ScanRows(ctx context.Context, partition string, q ports.RowScan) ([]commit.Row, error) {
	return s.scanRows(ctx, s.rd, partition, q)
}

// GetRow implements ports.RowReader.
func (s *Store) GetRow(ctx context.Context, partition, table, rowID string) (*commit.Row, error) {
	return s.getRow(ctx, s.rd, partition, table, rowID)
}

// ScanTable implements ports.TableScanner: one primary-key range read on
// the read pool, no scope index involved.
func (s *Store) ScanTable(ctx context.Context, partition string, q ports.TableScan) ([]commit.Row, error) {
	ts, err := s.table(q.Table)
	if err != nil {
		return nil, err
	}
	if q.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "table scan limit %d", q.Limit)
	}
	rows, err := s.rd.QueryContext(ctx, s.q(fmt.Sprintf("SELECT r.%s, %s FROM %s r WHERE r.%s=? AND r.%s>? ORDER BY r.%s LIMIT ?",
		quoteIdent(colRowID), ts.selectCols, ts.quoted, quoteIdent(colPartition), quoteIdent(colRowID), quoteIdent(colRowID))),
		partition, q.AfterRowID, q.Limit)
	if err != nil {
		return nil, internal("scan table", err)
	}
	defer func() { _ = rows.Close() }()
	var out []commit.Row
	for rows.Next() {
		var r commit.Row
		var scopes []byte
		if err := rows.Scan(&r.RowID, &r.Version, &scopes, &r.Payload, columnVersions{&r.ColumnVersions}); err != nil {
			return nil, internal("scan table", err)
		}
		if r.Scopes, err = decodeScopes(scopes); err != nil {
			return nil, internal("scan table", err)
		}
		out = append(out, r)
	}
	return out, internal("scan table", rows.Err())
}
