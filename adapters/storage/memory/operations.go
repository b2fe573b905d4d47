package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var _ ports.AuthoritativeQuerier = (*Store)(nil)

// QueryAuthoritative implements ports.AuthoritativeQuerier under the
// database mutex, so rows, max seq and gate are one snapshot.
func (s *Store) QueryAuthoritative(ctx context.Context, name string, q ports.AuthoritativeQuery) (ports.AuthoritativeResult, error) {
	if err := s.ready(ctx); err != nil {
		return ports.AuthoritativeResult{}, err
	}
	t, err := s.table(q.Table)
	if err != nil {
		return ports.AuthoritativeResult{}, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	res := ports.AuthoritativeResult{Gate: s.db.gate(name, q.RunningVersion, nil)}
	p := s.db.peek(name)
	if p == nil {
		_, err := queryRows(t, nil, q)
		return res, err
	}
	res.MaxCommitSeq = p.d.maxSeq
	res.Rows, err = queryRows(t, p.d, q)
	return res, err
}

// queryRows evaluates q over one partition's data (nil: none) with the
// SQL engines' semantics: NULL meets no condition but an equality with
// nil (IS NULL), the row id cursor is exclusive, strings compare in
// byte order, NULLs sort first ascending, the row id breaks ties.
func queryRows(t *schema.Table, d *data, q ports.AuthoritativeQuery) ([]commit.Row, error) {
	if !t.Materialize {
		return nil, syncerr.Newf(syncerr.StorageTxQueryUnsupported, "table %q is not materialized", q.Table)
	}
	if q.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "authoritative query limit %d", q.Limit)
	}
	where := make([]int, len(q.Where))
	for k, c := range q.Where {
		if where[k] = t.ColumnIndex(c.Column); where[k] < 0 {
			return nil, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no column %q", q.Table, c.Column)
		}
		if c.Op.SQL() == "" || c.Value == nil && c.Op != operations.OpEq {
			return nil, fmt.Errorf("condition on %q: op %q with value %v", c.Column, c.Op, c.Value)
		}
	}
	order := make([]int, len(q.OrderBy))
	for k, o := range q.OrderBy {
		if order[k] = t.ColumnIndex(o.Column); order[k] < 0 {
			return nil, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no column %q", q.Table, o.Column)
		}
	}
	if d == nil || d.tables[q.Table] == nil {
		return nil, nil
	}
	rt := d.tables[q.Table]
	var hits []*storedRow
	for _, id := range rt.sortedIDs() {
		if q.AfterRowID != "" && id <= q.AfterRowID {
			continue
		}
		r := rt.rows[id]
		if q.ScopeFilter != nil && !matches(r.row.Scopes, q.ScopeFilter) {
			continue
		}
		ok := true
		for k, c := range q.Where {
			if !meets(cell(r, where[k]), c) {
				ok = false
				break
			}
		}
		if ok {
			hits = append(hits, r)
		}
	}
	slices.SortStableFunc(hits, func(a, b *storedRow) int {
		for k, o := range q.OrderBy {
			c := compareCells(cell(a, order[k]), cell(b, order[k]))
			if o.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0 // sortedIDs already ordered the rows by id
	})
	out := make([]commit.Row, 0, min(len(hits), q.Limit))
	for _, r := range hits[:min(len(hits), q.Limit)] {
		out = append(out, copyRow(r.row))
	}
	return out, nil
}

func cell(r *storedRow, i int) any {
	if i < len(r.values) {
		return r.values[i]
	}
	return nil
}

func meets(v any, c operations.Condition) bool {
	if c.Value == nil { // an index scan's NULL: IS NULL
		return v == nil && c.Op == operations.OpEq
	}
	if v == nil {
		return false
	}
	n := compareCells(v, c.Value)
	switch c.Op {
	case operations.OpEq:
		return n == 0
	case operations.OpNe:
		return n != 0
	case operations.OpLt:
		return n < 0
	case operations.OpLte:
		return n <= 0
	case operations.OpGt:
		return n > 0
	case operations.OpGte:
		return n >= 0
	}
	return false
}

// compareCells orders two cells of one column: NULL first, numbers by
// value (integers and floats together), booleans false before true,
// strings and bytes in byte order.
func compareCells(a, b any) int {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0
		case a == nil:
			return -1
		default:
			return 1
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return cmp.Compare(x, y)
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return cmp.Compare(string(x), string(y))
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmp.Compare(boolInt(x), boolInt(y))
		}
	}
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			return cmp.Compare(x, y)
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// QueryAuthoritative implements ports.PushTx over the candidate state.
func (tx *pushTx) QueryAuthoritative(ctx context.Context, q ports.AuthoritativeQuery) ([]commit.Row, error) {
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	defer tx.mu.Unlock()
	t, err := tx.table(q.Table)
	if err != nil {
		return nil, err
	}
	return queryRows(t, tx.d, q)
}
