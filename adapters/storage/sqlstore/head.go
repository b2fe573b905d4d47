package sqlstore

import (
	"context"
	"database/sql"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
)

// headQuery reads a request's head in one statement: point lookups joined
// to a one-row base, each side optional, so an absent row reads as NULLs.
// The client and idempotency lookups are appended only when asked for.
func headQuery(client, push bool) string {
	q := `SELECT r.log_epoch, CASE WHEN r.epoch_required THEN 1 ELSE 0 END, r.last_authenticated_at_ms,
  (SELECT schema_version FROM sync_schema_meta WHERE id=1),
  CASE WHEN EXISTS (SELECT 1 FROM sync_backfill_checkpoints WHERE schema_version=? AND state<>'activated') THEN 1 ELSE 0 END,
  p.max_commit_seq, p.horizon_seq`
	if client {
		q += `, c.actor_id, c.wire_version, c.cursor, c.subscriptions, c.updated_at_ms`
	}
	if push {
		q += `, pr.result, pr.actor_id`
	}
	q += `
FROM (SELECT 1 AS one) AS base
LEFT JOIN sync_partition_registry r ON r.partition=?
LEFT JOIN sync_partitions p ON p.partition=?`
	if client {
		q += `
LEFT JOIN sync_clients c ON c.partition=? AND c.client_id=?`
	}
	if push {
		q += `
LEFT JOIN sync_push_results pr ON pr.partition=? AND pr.client_id=? AND pr.client_commit_id=?`
	}
	return q
}

// TouchPartitionHead implements ports.RequestHeadStore: one read of
// everything a request reads first; the touch writes only when it is due
// (as TouchPartition decides), after the read.
func (s *Store) TouchPartitionHead(ctx context.Context, hq ports.HeadQuery) (ports.RequestHead, error) {
	client, push := hq.ClientID != "", hq.PushClientID != ""
	args := []any{hq.Running, hq.Partition, hq.Partition}
	if client {
		args = append(args, hq.Partition, hq.ClientID)
	}
	if push {
		args = append(args, hq.Partition, hq.PushClientID, hq.PushClientCommitID)
	}
	var (
		epoch                        sql.NullString
		touched, version, max, horiz sql.NullInt64
		pending, required            int
		actor, subs, result, owner   sql.NullString
		wire, cursor, updated        sql.NullInt64
	)
	dest := []any{&epoch, &required, &touched, &version, &pending, &max, &horiz}
	if client {
		dest = append(dest, &actor, &wire, &cursor, &subs, &updated)
	}
	if push {
		dest = append(dest, &result, &owner)
	}
	i := 0
	if client {
		i |= 1
	}
	if push {
		i |= 2
	}
	var err error
	if s.direct != nil {
		err = readRowDirect(ctx, s.direct, s.heads[i], args, dest...)
	} else {
		err = s.rd.QueryRowContext(ctx, s.heads[i], args...).Scan(dest...)
	}
	if err != nil {
		return ports.RequestHead{}, internal("read request head", err)
	}
	h := ports.RequestHead{
		LogEpoch:      epoch.String,
		EpochRequired: required == 1,
		Gate:          checkpoint.ServeGate{StoredSchemaVersion: int32(version.Int64), LogEpoch: epoch.String},
		GateRead:      pending == 0,
		Bounds:        ports.LogBounds{MaxSeq: max.Int64, HorizonSeq: horiz.Int64},
		BoundsRead:    true,
		ClientRead:    client,
		PushRead:      push,
	}
	if client && actor.Valid {
		h.Client = &ports.ClientRecord{Partition: hq.Partition, ClientID: hq.ClientID, ActorID: actor.String,
			WireVersion: int(wire.Int64), Cursor: cursor.Int64, Subscriptions: []byte(subs.String), UpdatedAtMs: updated.Int64}
	}
	if push && result.Valid {
		h.Push, h.PushFound = ports.PushRecord{Result: []byte(result.String), ActorID: owner.String}, true
	}
	if epoch.Valid && s.touch > 0 && hq.NowMs-touched.Int64 < s.touch {
		return h, nil
	}
	e, err := s.touchWrite(ctx, hq.Partition, hq.NowMs)
	if err != nil {
		return ports.RequestHead{}, err
	}
	if e != h.LogEpoch {
		// The touch registered the partition (or another process rotated
		// its epoch meanwhile): the gate read before it is stale, and an
		// epoch that changed under a registered partition was rotated.
		h.GateRead = false
		h.EpochRequired = h.EpochRequired || epoch.Valid
	}
	h.LogEpoch = e
	return h, nil
}

var _ ports.RequestHeadStore = (*Store)(nil)

// ReadBoundsAndGate implements ports.BoundsGateReader.
func (s *Store) ReadBoundsAndGate(ctx context.Context, partition string, running int32) (ports.LogBounds, checkpoint.ServeGate, bool, error) {
	var (
		version, max, horiz sql.NullInt64
		epoch               sql.NullString
		pending             int
	)
	err := s.rd.QueryRowContext(ctx, s.q(gateQuery+`,
  (SELECT max_commit_seq FROM sync_partitions WHERE partition=?), (SELECT horizon_seq FROM sync_partitions WHERE partition=?)`),
		partition, running, partition, partition).Scan(&version, &epoch, &pending, &max, &horiz)
	if err != nil {
		return ports.LogBounds{}, checkpoint.ServeGate{}, false, internal("read log bounds and serve gate", err)
	}
	return ports.LogBounds{MaxSeq: max.Int64, HorizonSeq: horiz.Int64},
		checkpoint.ServeGate{StoredSchemaVersion: int32(version.Int64), LogEpoch: epoch.String}, pending == 0, nil
}

var _ ports.BoundsGateReader = (*Store)(nil)
