package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var _ ports.AuthoritativeQuerier = (*Store)(nil)

// SnapshotDialect is implemented by dialects whose read transactions need
// options to read one snapshot (PostgreSQL: REPEATABLE READ; SQLite's
// WAL read transaction is one snapshot already).
type SnapshotDialect interface {
	SnapshotTxOptions() *sql.TxOptions
}

// QueryAuthoritative implements ports.AuthoritativeQuerier: one read
// transaction on the read pool holds the rows, the partition's max
// commit seq and the serve gate in one snapshot.
func (s *Store) QueryAuthoritative(ctx context.Context, partition string, q ports.AuthoritativeQuery) (ports.AuthoritativeResult, error) {
	var opts *sql.TxOptions
	if sd, ok := s.d.(SnapshotDialect); ok {
		opts = sd.SnapshotTxOptions()
	}
	tx, err := s.rdb.DB.BeginTx(ctx, opts)
	if err != nil {
		return ports.AuthoritativeResult{}, internal("authoritative query", err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to keep
	var res ports.AuthoritativeResult
	if res.Rows, err = s.authoritativeRows(ctx, tx, partition, q); err != nil {
		return ports.AuthoritativeResult{}, internal("authoritative query", err)
	}
	if _, err = scanOne(tx.QueryRowContext(ctx, s.q("SELECT max_commit_seq FROM sync_partitions WHERE partition=?"), partition), &res.MaxCommitSeq); err != nil {
		return ports.AuthoritativeResult{}, internal("authoritative query", err)
	}
	if res.Gate, err = s.serveGate(ctx, tx, partition, q.RunningVersion); err != nil {
		return ports.AuthoritativeResult{}, internal("authoritative query", err)
	}
	return res, nil
}

// authoritativeRows runs the query's one statement on q (a read
// transaction or a push transaction).
func (s *Store) authoritativeRows(ctx context.Context, q Querier, partition string, aq ports.AuthoritativeQuery) ([]commit.Row, error) {
	ts, err := s.table(aq.Table)
	if err != nil {
		return nil, err
	}
	if !ts.t.Materialize {
		return nil, syncerr.Newf(syncerr.StorageTxQueryUnsupported, "table %q is not materialized", aq.Table)
	}
	if aq.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "authoritative query limit %d", aq.Limit)
	}
	text, args, empty, err := s.authoritativeSQL(ts, partition, aq)
	if err != nil || empty {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, s.q(text), args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []commit.Row
	for rows.Next() {
		var r commit.Row
		var scopes []byte
		if err := rows.Scan(&r.RowID, &r.Version, &scopes, &r.Payload, columnVersions{&r.ColumnVersions}); err != nil {
			return nil, err
		}
		if r.Scopes, err = decodeScopes(scopes); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// authoritativeSQL renders the statement: the partition, each condition
// on its materialized column (an equality with nil as IS NULL), the row
// id cursor, one EXISTS probe of the row-scope index per
// restricted scope variable (the same stored values a pull matches), the
// order with NULLs first ascending on both engines, the row id as the
// tie-break, and the limit. Only identifiers of the compiled schema and
// placeholders appear in it, so one registered query is one statement
// text per grant size, prepared once per connection. empty reports a
// scope filter that matches nothing (no statement needed).
func (s *Store) authoritativeSQL(ts *tableSQL, partition string, aq ports.AuthoritativeQuery) (text string, args []any, empty bool, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT r.%s, %s FROM %s r WHERE r.%s=?",
		quoteIdent(colRowID), ts.selectCols, ts.quoted, quoteIdent(colPartition))
	args = append(args, partition)
	for _, c := range aq.Where {
		i := columnIndex(ts, c.Column)
		if i < 0 {
			return "", nil, false, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no column %q", aq.Table, c.Column)
		}
		op := c.Op.SQL()
		col := "r." + quoteIdent(c.Column)
		if c.Value == nil && c.Op == operations.OpEq {
			b.WriteString(" AND " + col + " IS NULL")
			continue
		}
		if op == "" || c.Value == nil {
			return "", nil, false, fmt.Errorf("condition on %q: op %q with value %v", c.Column, c.Op, c.Value)
		}
		if ts.t.Columns[i].Type == schema.TypeString && c.Op != operations.OpEq && c.Op != operations.OpNe {
			col = s.d.ByteOrder(col)
		}
		fmt.Fprintf(&b, " AND %s%s?", col, op)
		args = append(args, s.d.BindValue(ts.t.Columns[i].Type, c.Value))
	}
	if aq.AfterRowID != "" {
		fmt.Fprintf(&b, " AND r.%s>?", quoteIdent(colRowID))
		args = append(args, aq.AfterRowID)
	}
	if aq.ScopeFilter != nil {
		vars := make([]string, 0, len(aq.ScopeFilter))
		for v := range aq.ScopeFilter {
			vars = append(vars, v)
		}
		sort.Strings(vars)
		for _, v := range vars {
			values := dedupe(aq.ScopeFilter[v])
			if len(values) == 0 {
				return "", nil, true, nil
			}
			fmt.Fprintf(&b, " AND EXISTS (SELECT 1 FROM sync_row_scopes s WHERE s.partition=r.%s AND s.tbl=? AND s.var=? AND s.value IN (%s) AND s.row_id=r.%s)",
				quoteIdent(colPartition), placeholders(len(values)), quoteIdent(colRowID))
			args = append(args, aq.Table, v)
			for _, val := range values {
				args = append(args, val)
			}
		}
	}
	b.WriteString(" ORDER BY ")
	for _, o := range aq.OrderBy {
		i := columnIndex(ts, o.Column)
		if i < 0 {
			return "", nil, false, syncerr.Newf(syncerr.StorageIndexNotFound, "table %q has no column %q", aq.Table, o.Column)
		}
		col := "r." + quoteIdent(o.Column)
		if ts.t.Columns[i].Type == schema.TypeString {
			col = s.d.ByteOrder(col)
		}
		if o.Desc {
			b.WriteString(col + " DESC NULLS LAST, ")
		} else {
			b.WriteString(col + " ASC NULLS FIRST, ")
		}
	}
	fmt.Fprintf(&b, "r.%s LIMIT ?", quoteIdent(colRowID))
	args = append(args, aq.Limit)
	return b.String(), args, false, nil
}

// QueryAuthoritative implements ports.PushTx: the query's statement on
// the push transaction, so it sees the staged writes.
func (t *pushTx) QueryAuthoritative(ctx context.Context, q ports.AuthoritativeQuery) ([]commit.Row, error) {
	rows, err := t.s.authoritativeRows(ctx, t.tx, t.partition, q)
	return rows, internal("authoritative query in transaction", err)
}
