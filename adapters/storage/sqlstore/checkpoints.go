package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

const checkpointCols = "partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms, backfill_cursor"

func scanCheckpoint(row interface{ Scan(...any) error }) (checkpoint.Checkpoint, error) {
	var c checkpoint.Checkpoint
	var state string
	err := row.Scan(&c.Partition, &c.Name, &c.SchemaVersion, &state, &c.Watermark, &c.OwnerEpoch, &c.ObservedRows, &c.UpdatedAtMs, &c.Cursor)
	c.State = checkpoint.State(state)
	return c, err
}

// installCheckpoint inserts a declared row (never touching an existing
// one) and raises the partition's writer fence to at least its version.
func (s *Store) installCheckpoint(ctx context.Context, q Querier, d checkpoint.Declaration, nowMs int64) error {
	if _, err := q.ExecContext(ctx, s.q(`INSERT INTO sync_backfill_checkpoints(`+checkpointCols+`)
VALUES (?, ?, ?, 'declared', 0, 0, 0, ?, '') ON CONFLICT (partition, name) DO NOTHING`),
		d.Partition, d.Name, d.SchemaVersion, nowMs); err != nil {
		return fmt.Errorf("install checkpoint: %w", err)
	}
	if _, err := q.ExecContext(ctx, s.q(`INSERT INTO sync_writer_fence(partition, required_writer_version) VALUES (?, ?)
ON CONFLICT (partition) DO UPDATE SET required_writer_version =
  CASE WHEN excluded.required_writer_version > sync_writer_fence.required_writer_version
       THEN excluded.required_writer_version ELSE sync_writer_fence.required_writer_version END`),
		d.Partition, d.SchemaVersion); err != nil {
		return fmt.Errorf("raise writer fence: %w", err)
	}
	return nil
}

// raiseFences raises the writer fence of every partition in
// sync_partitions to at least version (SPEC §2.4, schema upgrade writer
// fence): a process still running the previous schema then has every
// append refused, its gate-less server-side writes included, instead of
// storing payloads in the previous layout. A higher fence (a checkpoint
// declared for a later version) stays. The migration's schema lock keeps
// partitions from being created meanwhile.
func (s *Store) raiseFences(ctx context.Context, q Querier, version int32) error {
	// "WHERE true" lets SQLite tell the upsert's ON CONFLICT from a join.
	if _, err := q.ExecContext(ctx, s.q(`INSERT INTO sync_writer_fence(partition, required_writer_version)
SELECT partition, CAST(? AS `+s.types.Seq+`) FROM sync_partitions WHERE true
ON CONFLICT (partition) DO UPDATE SET required_writer_version =
  CASE WHEN excluded.required_writer_version > sync_writer_fence.required_writer_version
       THEN excluded.required_writer_version ELSE sync_writer_fence.required_writer_version END`),
		version); err != nil {
		return fmt.Errorf("raise writer fences: %w", err)
	}
	return nil
}

func (s *Store) getCheckpoint(ctx context.Context, q Querier, partition, name string) (checkpoint.Checkpoint, bool, error) {
	c, err := scanCheckpoint(q.QueryRowContext(ctx, s.q("SELECT "+checkpointCols+
		" FROM sync_backfill_checkpoints WHERE partition=? AND name=?"), partition, name))
	if err == sql.ErrNoRows {
		return c, false, nil
	}
	return c, err == nil, err
}

// DeclareCheckpoint implements ports.CheckpointStore.
func (s *Store) DeclareCheckpoint(ctx context.Context, d checkpoint.Declaration, nowMs int64) (checkpoint.Checkpoint, error) {
	var out checkpoint.Checkpoint
	err := s.writeTx(ctx, "declare checkpoint", "", func(tx WriteTx) error {
		if err := s.installCheckpoint(ctx, tx, d, nowMs); err != nil {
			return err
		}
		c, _, err := s.getCheckpoint(ctx, tx, d.Partition, d.Name)
		out = c
		return err
	})
	return out, err
}

// ClaimCheckpoint implements ports.CheckpointStore.
func (s *Store) ClaimCheckpoint(ctx context.Context, d checkpoint.Declaration, nowMs int64) (checkpoint.Checkpoint, error) {
	var out checkpoint.Checkpoint
	var found bool
	err := s.writeOne(ctx, "claim checkpoint", func(tx Querier) error {
		c, err := scanCheckpoint(tx.QueryRowContext(ctx, s.q(`UPDATE sync_backfill_checkpoints
SET owner_epoch=owner_epoch+1, state='backfilling', schema_version=?, updated_at_ms=?
WHERE partition=? AND name=? AND state<>'activated' RETURNING `+checkpointCols),
			d.SchemaVersion, nowMs, d.Partition, d.Name))
		if err == sql.ErrNoRows {
			return nil
		}
		out, found = c, err == nil
		return err
	})
	if err != nil {
		return out, err
	}
	if !found {
		return out, syncerr.Newf(syncerr.StorageCheckpointNotDeclared,
			"checkpoint %q of partition %q is not declared or already activated", d.Name, d.Partition).
			WithDetails(map[string]string{"partition": d.Partition, "name": d.Name})
	}
	return out, nil
}

func (s *Store) advanceCheckpoint(ctx context.Context, q Querier, a ports.CheckpointAdvance) (bool, error) {
	res, err := q.ExecContext(ctx, s.q(`UPDATE sync_backfill_checkpoints
SET watermark=?, observed_rows=?, backfill_cursor=?, updated_at_ms=?
WHERE partition=? AND name=? AND owner_epoch=? AND state<>'activated'`),
		a.Watermark, a.ObservedRows, a.Cursor, a.NowMs, a.Partition, a.Name, a.OwnerEpoch)
	if err != nil {
		return false, fmt.Errorf("advance checkpoint: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AdvanceCheckpoint implements ports.CheckpointStore.
func (s *Store) AdvanceCheckpoint(ctx context.Context, a ports.CheckpointAdvance) (bool, error) {
	var ok bool
	err := s.writeOne(ctx, "advance checkpoint", func(tx Querier) error {
		var err error
		ok, err = s.advanceCheckpoint(ctx, tx, a)
		return err
	})
	return ok, err
}

// ActivateCheckpoint implements ports.CheckpointStore.
func (s *Store) ActivateCheckpoint(ctx context.Context, a ports.CheckpointActivation) (checkpoint.Activation, error) {
	var out checkpoint.Activation
	err := s.writeTx(ctx, "activate checkpoint", a.Partition, func(tx WriteTx) error {
		c, found, err := s.getCheckpoint(ctx, tx, a.Partition, a.Name)
		if err != nil {
			return err
		}
		var fence int64
		hasFence, err := scanOne(tx.QueryRowContext(ctx, s.q("SELECT required_writer_version FROM sync_writer_fence WHERE partition=?"), a.Partition), &fence)
		if err != nil {
			return err
		}
		in := checkpoint.ActivationInput{FenceVersion: int32(fence), HasFence: hasFence, OwnerEpoch: a.OwnerEpoch}
		if found {
			in.Checkpoint = &c
		}
		if in.Checkpoint != nil && hasFence && in.FenceVersion >= c.SchemaVersion {
			if in.Sources, err = s.sourceState(ctx, tx, a.Partition, a.Sources, a.Watermark); err != nil {
				return err
			}
		}
		decision, err := checkpoint.Decide(in)
		if err != nil {
			var se *syncerr.Error
			if errors.As(err, &se) {
				return se.WithDetails(map[string]string{"partition": a.Partition, "name": a.Name})
			}
			return err
		}
		if out = decision; decision != checkpoint.Activated {
			return nil
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sync_backfill_checkpoints SET state='activated', watermark=?, updated_at_ms=?
WHERE partition=? AND name=? AND owner_epoch=? AND state<>'activated'`),
			a.Watermark, a.NowMs, a.Partition, a.Name, a.OwnerEpoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			out = checkpoint.Stale
		}
		return nil
	})
	return out, err
}

// ReadCheckpoints implements ports.CheckpointStore.
func (s *Store) ReadCheckpoints(ctx context.Context, partition string) ([]checkpoint.Checkpoint, error) {
	rows, err := s.rd.QueryContext(ctx, s.q("SELECT "+checkpointCols+
		" FROM sync_backfill_checkpoints WHERE partition=? ORDER BY "+s.d.ByteOrder("name")), partition)
	if err != nil {
		return nil, internal("read checkpoints", err)
	}
	defer func() { _ = rows.Close() }()
	var out []checkpoint.Checkpoint
	for rows.Next() {
		c, err := scanCheckpoint(rows)
		if err != nil {
			return nil, internal("read checkpoints", err)
		}
		out = append(out, c)
	}
	return out, internal("read checkpoints", rows.Err())
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, v := range ss {
		out[i] = v
	}
	return out
}

// SourceCoverageSeq implements ports.CheckpointStore.
func (s *Store) SourceCoverageSeq(ctx context.Context, partition string, tables []string) (int64, error) {
	if len(tables) == 0 {
		return 0, nil
	}
	var seq int64
	args := append([]any{partition}, anyStrings(tables)...)
	err := s.rd.QueryRowContext(ctx, s.q("SELECT COALESCE(MAX(commit_seq), 0) FROM sync_changes WHERE partition=? AND tbl IN ("+
		placeholders(len(tables))+")"), args...).Scan(&seq)
	return seq, internal("source coverage", err)
}

// HasSourceChangesAbove implements ports.CheckpointStore.
func (s *Store) HasSourceChangesAbove(ctx context.Context, partition string, tables []string, seq int64) (checkpoint.SourceState, error) {
	st, err := s.sourceState(ctx, s.rd, partition, tables, seq)
	return st, internal("source changes", err)
}

// sourceState reads the horizon and the source changes in one statement.
func (s *Store) sourceState(ctx context.Context, q Querier, partition string, tables []string, seq int64) (checkpoint.SourceState, error) {
	if len(tables) == 0 {
		return checkpoint.SourceClean, nil
	}
	var horizon int64
	changed := 0
	args := append([]any{partition, partition, seq}, anyStrings(tables)...)
	err := q.QueryRowContext(ctx, s.q(`SELECT COALESCE((SELECT horizon_seq FROM sync_partitions WHERE partition=?), 0),
CASE WHEN EXISTS (SELECT 1 FROM sync_changes WHERE partition=? AND commit_seq>? AND tbl IN (`+placeholders(len(tables))+`)) THEN 1 ELSE 0 END`),
		args...).Scan(&horizon, &changed)
	if err != nil {
		return "", err
	}
	return checkpoint.ClassifySources(changed == 1, horizon, seq), nil
}

// gateQuery is serveGate's common-case statement: the marker, the epoch
// and whether a checkpoint is pending at the running version.
const gateQuery = `SELECT (SELECT schema_version FROM sync_schema_meta WHERE id=1),
  (SELECT log_epoch FROM sync_partition_registry WHERE partition=?),
  CASE WHEN EXISTS (SELECT 1 FROM sync_backfill_checkpoints WHERE schema_version=? AND state<>'activated') THEN 1 ELSE 0 END`

// ReadServeGate implements ports.CheckpointStore.
func (s *Store) ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error) {
	g, err := s.serveGate(ctx, s.rd, partition, running)
	return g, internal("read serve gate", err)
}

// serveGate reads the marker, the epoch and every pending checkpoint at the
// running version in one snapshot on both engines. The common case (no
// pending checkpoint at the running version) is one single-row statement of
// point lookups and an EXISTS probe, with no sort; only when a pending row
// exists is the full list read, again in one statement (one snapshot:
// marker, epoch and pending rows all come from that second statement).
func (s *Store) serveGate(ctx context.Context, q Querier, partition string, running int32) (checkpoint.ServeGate, error) {
	var g checkpoint.ServeGate
	var v sql.NullInt64
	var e sql.NullString
	var pending int
	err := q.QueryRowContext(ctx, s.q(gateQuery), partition, running).Scan(&v, &e, &pending)
	if err != nil {
		return g, err
	}
	if pending == 0 {
		g.StoredSchemaVersion = int32(v.Int64)
		g.LogEpoch = e.String
		return g, nil
	}
	rows, err := q.QueryContext(ctx, s.q(`SELECT 0 AS k, (SELECT schema_version FROM sync_schema_meta WHERE id=1) AS v,
  (SELECT log_epoch FROM sync_partition_registry WHERE partition=?) AS e, '' AS p, '' AS n
UNION ALL
SELECT 1, 0, '', partition, name FROM sync_backfill_checkpoints WHERE schema_version=? AND state<>'activated'
ORDER BY 1, 4, 5`), partition, running)
	if err != nil {
		return g, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var k int
		var p, n string
		if err := rows.Scan(&k, &v, &e, &p, &n); err != nil {
			return g, err
		}
		if k == 0 {
			g.StoredSchemaVersion = int32(v.Int64)
			g.LogEpoch = e.String
			continue
		}
		g.Pending = append(g.Pending, checkpoint.PendingRef{Partition: p, Name: n})
	}
	return g, rows.Err()
}
