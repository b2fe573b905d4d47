package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// SeedOptions configure SeedRows.
type SeedOptions struct {
	// WriterVersion stamps the commits (the running schema version).
	WriterVersion int32
	// Batch is the rows per transaction and commit (default 5000).
	Batch int
	// CreatedAtMs, ActorID and ClientID describe the seed commits; each
	// commit's client commit id is ClientCommitPrefix plus its first row index.
	CreatedAtMs        int64
	ActorID            string
	ClientID           string
	ClientCommitPrefix string
}

// maxParams bounds the parameters of one statement (SQLite allows 32766,
// PostgreSQL 65535).
const maxParams = 30000

// SeedRows is the bulk path for imports and tests: it writes the rows of
// one table in multi-row statements, one transaction and one commit (whose
// changes are the upserts) per batch, with the same effects as pushing
// them through UpsertRow and AppendCommit. It returns the last seq.
func (s *Store) SeedRows(ctx context.Context, partition, table string, rows []ports.RowWrite, o SeedOptions) (int64, error) {
	ts, err := s.table(table)
	if err != nil {
		return 0, err
	}
	batch := o.Batch
	if batch <= 0 {
		batch = 5000
	}
	var seq int64
	for lo := 0; lo < len(rows); lo += batch {
		part := rows[lo:min(len(rows), lo+batch)]
		err := s.writeTx(ctx, "seed rows", partition, func(tx WriteTx) error {
			if err := s.seedBatch(ctx, tx, partition, ts, part); err != nil {
				return err
			}
			changes := make([]commit.Change, len(part))
			for i, w := range part {
				changes[i] = commit.Change{Table: table, RowID: w.RowID, Op: commit.OpUpsert, RowVersion: w.Version, Scopes: w.Scopes, Row: w.Payload}
			}
			var err error
			seq, err = s.appendCommit(ctx, tx, partition, o.WriterVersion, ports.NewCommit{
				CreatedAtMs: o.CreatedAtMs, ActorID: o.ActorID, ClientID: o.ClientID,
				ClientCommitID: fmt.Sprint(o.ClientCommitPrefix, lo), Changes: changes,
			}, 0)
			if err != nil && s.d.FenceRejected(err) {
				return syncerr.Wrap(syncerr.StorageWriterFenceRejected, err)
			}
			return err
		})
		if err != nil {
			return 0, err
		}
		s.noteWrites(len(part))
	}
	return seq, nil
}

func (s *Store) seedBatch(ctx context.Context, q Querier, partition string, ts *tableSQL, rows []ports.RowWrite) error {
	width := 6 + len(ts.types)
	per := max(1, min(500, maxParams/width))
	head, tail, _ := strings.Cut(ts.upsertRaw, " VALUES ")
	_, conflict, _ := strings.Cut(tail, ") ON CONFLICT")
	for lo := 0; lo < len(rows); lo += per {
		part := rows[lo:min(len(rows), lo+per)]
		args := make([]any, 0, width*len(part))
		ids := make([]any, 0, len(part)+2)
		ids = append(ids, partition, ts.name)
		var scopeArgs []any
		nscopes := 0
		for _, w := range part {
			args = append(args, partition, w.RowID)
			if ts.t.Materialize {
				if len(w.Values) != len(ts.types) {
					return syncerr.Newf(syncerr.InternalError, "seed %q: %d values for %d columns", ts.name, len(w.Values), len(ts.types))
				}
				for i, v := range w.Values {
					args = append(args, s.d.BindValue(ts.types[i], v))
				}
			}
			payload := w.Payload
			if payload == nil {
				payload = []byte{}
			}
			args = append(args, w.Version, encodeScopes(w.Scopes), payload, nilIfEmpty(w.ColumnVersions))
			ids = append(ids, w.RowID)
			for v, val := range w.Scopes {
				scopeArgs = append(scopeArgs, partition, ts.name, v, val, w.RowID)
				nscopes++
			}
		}
		stmt := head + " VALUES " + valuesList(len(part), width) + " ON CONFLICT" + conflict
		if _, err := q.ExecContext(ctx, s.q(stmt), args...); err != nil {
			if kind, ok := s.d.ConstraintKind(err); ok {
				return &ports.ConstraintError{OpIndex: part[0].OpIndex, Table: ts.name, Kind: kind}
			}
			return err
		}
		// The row-id range bounds the index range the IN list is checked
		// in, so a chunk of neighbouring ids never scans the whole table.
		lo, hi := part[0].RowID, part[0].RowID
		for _, w := range part[1:] {
			lo, hi = min(lo, w.RowID), max(hi, w.RowID)
		}
		ids = append(ids, lo, hi)
		in := placeholders(len(part))
		for _, del := range []string{"sync_row_scopes", "sync_tombstones"} {
			if _, err := q.ExecContext(ctx, s.q("DELETE FROM "+del+" WHERE partition=? AND tbl=? AND row_id IN ("+in+") AND row_id>=? AND row_id<=?"), ids...); err != nil {
				return err
			}
		}
		for start := 0; start < nscopes; start += per {
			end := min(nscopes, start+per)
			if _, err := q.ExecContext(ctx, s.q("INSERT INTO sync_row_scopes(partition, tbl, var, value, row_id) VALUES "+
				valuesList(end-start, 5)+" ON CONFLICT DO NOTHING"), scopeArgs[start*5:end*5]...); err != nil {
				return err
			}
		}
	}
	return nil
}
