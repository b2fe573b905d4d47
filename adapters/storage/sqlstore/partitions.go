package sqlstore

import (
	"context"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// TouchPartition implements ports.PartitionStore.
func (s *Store) TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error) {
	if s.touch > 0 {
		var epoch string
		var last int64
		ok, err := scanOne(s.rd.QueryRowContext(ctx, s.q(
			"SELECT log_epoch, last_authenticated_at_ms FROM sync_partition_registry WHERE partition=?"), partition), &epoch, &last)
		if err != nil {
			return "", internal("touch partition", err)
		}
		if ok && nowMs-last < s.touch {
			return epoch, nil
		}
	}
	return s.touchWrite(ctx, partition, nowMs)
}

// touchWrite registers the partition or refreshes its last-seen time and
// returns its epoch.
func (s *Store) touchWrite(ctx context.Context, partition string, nowMs int64) (string, error) {
	var epoch string
	err := s.writeOne(ctx, "touch partition", func(tx Querier) error {
		return tx.QueryRowContext(ctx, s.q(`INSERT INTO sync_partition_registry(partition, log_epoch, epoch_required, last_authenticated_at_ms)
VALUES (?, ?, ?, ?) ON CONFLICT (partition) DO UPDATE SET last_authenticated_at_ms=excluded.last_authenticated_at_ms
RETURNING log_epoch`), partition, s.epoch(), false, nowMs).Scan(&epoch)
	})
	return epoch, err
}

// RotateLogEpoch implements ports.PartitionStore: a new epoch, marked
// required, and no client cursor records; under the partition lock, so it
// serializes with pruning.
func (s *Store) RotateLogEpoch(ctx context.Context, partition string) (string, error) {
	epoch := s.epoch()
	err := s.writeTx(ctx, "rotate log epoch", partition, func(tx WriteTx) error {
		res, err := tx.ExecContext(ctx, s.q(
			"UPDATE sync_partition_registry SET log_epoch=?, epoch_required=? WHERE partition=?"), epoch, true, partition)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return syncerr.Newf(syncerr.StoragePartitionUnregistered, "partition %q is not registered", partition)
		}
		_, err = tx.ExecContext(ctx, s.q("DELETE FROM sync_clients WHERE partition=?"), partition)
		return err
	})
	s.recent.forget(partition)
	return epoch, err
}

// LogEpoch implements ports.PartitionStore.
func (s *Store) LogEpoch(ctx context.Context, partition string) (string, bool, error) {
	var epoch string
	ok, err := scanOne(s.rd.QueryRowContext(ctx, s.q("SELECT log_epoch FROM sync_partition_registry WHERE partition=?"), partition), &epoch)
	return epoch, ok, internal("read log epoch", err)
}

// partitionRow is the bun model of sync_partition_registry.
type partitionRow struct {
	Partition             string `bun:"partition"`
	LogEpoch              string `bun:"log_epoch"`
	EpochRequired         bool   `bun:"epoch_required"`
	LastAuthenticatedAtMs int64  `bun:"last_authenticated_at_ms"`
}

// ListPartitions implements ports.PartitionStore.
func (s *Store) ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error) {
	var rows []partitionRow
	err := s.rdb.NewSelect().Table("sync_partition_registry").
		Column("partition", "log_epoch", "epoch_required", "last_authenticated_at_ms").
		OrderExpr(s.d.ByteOrder("partition")).Scan(ctx, &rows)
	if err != nil {
		return nil, internal("list partitions", err)
	}
	out := make([]ports.PartitionInfo, len(rows))
	for i, r := range rows {
		out[i] = ports.PartitionInfo(r)
	}
	return out, nil
}

// GetClient implements ports.ClientStore.
func (s *Store) GetClient(ctx context.Context, partition, clientID string) (*ports.ClientRecord, error) {
	r := ports.ClientRecord{Partition: partition, ClientID: clientID}
	var subs string
	ok, err := scanOne(s.rd.QueryRowContext(ctx, s.q(
		"SELECT actor_id, wire_version, cursor, subscriptions, updated_at_ms FROM sync_clients WHERE partition=? AND client_id=?"),
		partition, clientID), &r.ActorID, &r.WireVersion, &r.Cursor, &subs, &r.UpdatedAtMs)
	if err != nil || !ok {
		return nil, internal("get client", err)
	}
	r.Subscriptions = []byte(subs)
	return &r, nil
}

// PutClient implements ports.ClientStore.
func (s *Store) PutClient(ctx context.Context, r ports.ClientRecord) error {
	subs := string(r.Subscriptions)
	if subs == "" {
		subs = "[]"
	}
	return s.writeOne(ctx, "put client", func(tx Querier) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_clients(partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (partition, client_id) DO UPDATE SET actor_id=excluded.actor_id,
wire_version=excluded.wire_version, cursor=excluded.cursor, subscriptions=excluded.subscriptions, updated_at_ms=excluded.updated_at_ms`),
			r.Partition, r.ClientID, r.ActorID, r.WireVersion, r.Cursor, subs, r.UpdatedAtMs)
		return err
	})
}

// AdvanceClientCursor implements ports.ClientStore.
func (s *Store) AdvanceClientCursor(ctx context.Context, a ports.CursorAdvance) (bool, error) {
	var changed bool
	err := s.writeOne(ctx, "advance client cursor", func(tx Querier) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sync_clients SET cursor=CASE WHEN cursor<? THEN ? ELSE cursor END,
  updated_at_ms=CASE WHEN updated_at_ms<? THEN ? ELSE updated_at_ms END
WHERE partition=? AND client_id=? AND actor_id=?
  AND EXISTS (SELECT 1 FROM sync_partition_registry WHERE partition=? AND log_epoch=?)`),
			a.Cursor, a.Cursor, a.NowMs, a.NowMs, a.Partition, a.ClientID, a.ActorID, a.Partition, a.LogEpoch)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	return changed, err
}
