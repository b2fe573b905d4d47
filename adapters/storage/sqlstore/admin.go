package sqlstore

import (
	"context"
	"database/sql"
	"math"
	"sort"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var _ ports.AdminReader = (*Store)(nil)

func adminLimit(limit int) error {
	if limit < 1 {
		return syncerr.Newf(syncerr.StorageInvalidLimit, "admin list limit %d", limit)
	}
	return nil
}

// AdminPartitions implements ports.AdminReader. Each source table is
// keyset-read on its own before the union, so a page costs two bounded
// range reads, not a scan of every partition.
func (s *Store) AdminPartitions(ctx context.Context, q ports.AdminPage) ([]ports.AdminPartition, error) {
	if err := adminLimit(q.Limit); err != nil {
		return nil, err
	}
	bo := s.d.ByteOrder
	rows, err := s.rd.QueryContext(ctx, s.q(`SELECT n.partition, r.log_epoch, r.epoch_required, r.last_authenticated_at_ms,
  p.max_commit_seq, p.horizon_seq, (SELECT COUNT(*) FROM sync_clients c WHERE c.partition=n.partition)
FROM (
  SELECT partition FROM (SELECT partition FROM sync_partition_registry WHERE `+bo("partition")+` > ?
    ORDER BY `+bo("partition")+` LIMIT ?) a
  UNION
  SELECT partition FROM (SELECT partition FROM sync_partitions WHERE max_commit_seq > 0 AND `+bo("partition")+` > ?
    ORDER BY `+bo("partition")+` LIMIT ?) b
) n
LEFT JOIN sync_partition_registry r ON r.partition=n.partition
LEFT JOIN sync_partitions p ON p.partition=n.partition
ORDER BY `+bo("n.partition")+` LIMIT ?`), q.After, q.Limit, q.After, q.Limit, q.Limit)
	if err != nil {
		return nil, internal("admin partitions", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ports.AdminPartition
	for rows.Next() {
		var p ports.AdminPartition
		var epoch sql.NullString
		var required sql.NullBool
		var lastAuth, maxSeq, horizon sql.NullInt64
		if err := rows.Scan(&p.Partition, &epoch, &required, &lastAuth, &maxSeq, &horizon, &p.ClientCount); err != nil {
			return nil, internal("admin partitions", err)
		}
		p.Registered, p.LogEpoch, p.EpochRequired, p.LastAuthenticatedAtMs = epoch.Valid, epoch.String, required.Bool, lastAuth.Int64
		p.MaxCommitSeq, p.HorizonSeq = maxSeq.Int64, horizon.Int64
		out = append(out, p)
	}
	return out, internal("admin partitions", rows.Err())
}

// AdminClients implements ports.AdminReader.
func (s *Store) AdminClients(ctx context.Context, partition string, q ports.AdminPage) ([]ports.ClientRecord, error) {
	if err := adminLimit(q.Limit); err != nil {
		return nil, err
	}
	rows, err := s.rd.QueryContext(ctx, s.q(`SELECT client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms
FROM sync_clients WHERE partition=? AND `+s.d.ByteOrder("client_id")+` > ? ORDER BY `+s.d.ByteOrder("client_id")+` LIMIT ?`),
		partition, q.After, q.Limit)
	if err != nil {
		return nil, internal("admin clients", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ports.ClientRecord
	for rows.Next() {
		r := ports.ClientRecord{Partition: partition}
		var subs string
		if err := rows.Scan(&r.ClientID, &r.ActorID, &r.WireVersion, &r.Cursor, &subs, &r.UpdatedAtMs); err != nil {
			return nil, internal("admin clients", err)
		}
		r.Subscriptions = []byte(subs)
		out = append(out, r)
	}
	return out, internal("admin clients", rows.Err())
}

// AdminCommits implements ports.AdminReader: the commits by primary key
// range, then their changes' tables grouped over the same seq range.
func (s *Store) AdminCommits(ctx context.Context, partition string, q ports.AdminCommitRange) ([]ports.AdminCommit, error) {
	if err := adminLimit(q.Limit); err != nil {
		return nil, err
	}
	through := q.ThroughSeq
	if through <= 0 {
		through = math.MaxInt64
	}
	rows, err := s.rd.QueryContext(ctx, s.q(`SELECT commit_seq, created_at_ms, actor_id, client_id, client_commit_id
FROM sync_commits WHERE partition=? AND commit_seq>? AND commit_seq<=? ORDER BY commit_seq LIMIT ?`),
		partition, q.AfterSeq, through, q.Limit)
	if err != nil {
		return nil, internal("admin commits", err)
	}
	var out []ports.AdminCommit
	for rows.Next() {
		var c ports.AdminCommit
		if err := rows.Scan(&c.Seq, &c.CreatedAtMs, &c.ActorID, &c.ClientID, &c.ClientCommitID); err != nil {
			_ = rows.Close()
			return nil, internal("admin commits", err)
		}
		out = append(out, c)
	}
	if err := rows.Close(); err != nil {
		return nil, internal("admin commits", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	at := make(map[int64]int, len(out))
	for i, c := range out {
		at[c.Seq] = i
	}
	rows, err = s.rd.QueryContext(ctx, s.q(`SELECT commit_seq, tbl, COUNT(*) FROM sync_changes
WHERE partition=? AND commit_seq>=? AND commit_seq<=? GROUP BY commit_seq, tbl`),
		partition, out[0].Seq, out[len(out)-1].Seq)
	if err != nil {
		return nil, internal("admin commit changes", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var seq, n int64
		var tbl string
		if err := rows.Scan(&seq, &tbl, &n); err != nil {
			return nil, internal("admin commit changes", err)
		}
		if i, ok := at[seq]; ok {
			out[i].ChangeCount += n
			out[i].Tables = append(out[i].Tables, tbl)
		}
	}
	for i := range out {
		sort.Strings(out[i].Tables)
	}
	return out, internal("admin commit changes", rows.Err())
}

// AdminReactionCounts implements ports.AdminReader.
func (s *Store) AdminReactionCounts(ctx context.Context, partition string) (map[ports.ReactionStatus]int64, error) {
	query, args := "SELECT status, COUNT(*) FROM sync_reactions GROUP BY status", []any(nil)
	if partition != "" {
		query, args = "SELECT status, COUNT(*) FROM sync_reactions WHERE partition=? GROUP BY status", []any{partition}
	}
	rows, err := s.rd.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, internal("admin reaction counts", err)
	}
	defer func() { _ = rows.Close() }()
	out := map[ports.ReactionStatus]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, internal("admin reaction counts", err)
		}
		out[ports.ReactionStatus(st)] = n
	}
	return out, internal("admin reaction counts", rows.Err())
}
