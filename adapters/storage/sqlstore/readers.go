package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// ListRowsReferencingBlob implements ports.BlobRefReader.
func (s *Store) ListRowsReferencingBlob(ctx context.Context, partition, blobID string) ([]ports.BlobRowRef, error) {
	rows, err := s.rd.QueryContext(ctx, s.q("SELECT tbl, row_id FROM sync_blob_refs WHERE partition=? AND blob_id=? ORDER BY "+
		s.d.ByteOrder("tbl")+", "+s.d.ByteOrder("row_id")), partition, blobID)
	if err != nil {
		return nil, internal("list blob refs", err)
	}
	var refs []ports.BlobRowRef
	for rows.Next() {
		var r ports.BlobRowRef
		if err := rows.Scan(&r.Table, &r.RowID); err != nil {
			_ = rows.Close()
			return nil, internal("list blob refs", err)
		}
		refs = append(refs, r)
	}
	if err := rows.Close(); err != nil {
		return nil, internal("list blob refs", err)
	}
	out := refs[:0]
	for _, r := range refs {
		row, err := s.GetRow(ctx, partition, r.Table, r.RowID)
		if err != nil {
			if syncerr.CodeOf(err) == syncerr.UnknownTable {
				continue
			}
			return nil, err
		}
		if row == nil {
			continue
		}
		r.Scopes = row.Scopes
		out = append(out, r)
	}
	return out, nil
}

// ListReferencedBlobIDs implements ports.BlobRefReader.
func (s *Store) ListReferencedBlobIDs(ctx context.Context, partition string) ([]string, error) {
	rows, err := s.rd.QueryContext(ctx, s.q("SELECT blob_id FROM sync_blob_refs WHERE partition=? GROUP BY blob_id ORDER BY "+
		s.d.ByteOrder("blob_id")), partition)
	if err != nil {
		return nil, internal("list referenced blobs", err)
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, internal("list referenced blobs", err)
		}
		out = append(out, id)
	}
	return out, internal("list referenced blobs", rows.Err())
}

const reactionCols = `partition, idempotency_key, type, version, payload, source_client_id, source_client_commit_id,
source_commit_seq, created_at_ms, status, attempts, max_attempts, available_at_ms, lease_owner, lease_expires_at_ms,
completed_at_ms, last_failure`

func scanReaction(row interface{ Scan(...any) error }) (ports.StoredReaction, error) {
	var r ports.StoredReaction
	var payload, status string
	var owner, failure sql.NullString
	var leaseExp, completed sql.NullInt64
	err := row.Scan(&r.Partition, &r.IdempotencyKey, &r.Type, &r.Version, &payload, &r.Source.ClientID, &r.Source.ClientCommitID,
		&r.Source.CommitSeq, &r.Source.CreatedAtMs, &status, &r.Attempts, &r.MaxAttempts, &r.AvailableAtMs, &owner, &leaseExp,
		&completed, &failure)
	r.Payload = []byte(payload)
	r.Status = ports.ReactionStatus(status)
	r.LeaseOwner, r.LeaseExpiresAt, r.CompletedAtMs = owner.String, leaseExp.Int64, completed.Int64
	if failure.Valid {
		r.LastFailure = []byte(failure.String)
	}
	return r, err
}

// GetReaction implements ports.ReactionReader.
func (s *Store) GetReaction(ctx context.Context, partition, key string) (*ports.StoredReaction, error) {
	r, err := scanReaction(s.rd.QueryRowContext(ctx, s.q("SELECT "+reactionCols+
		" FROM sync_reactions WHERE partition=? AND idempotency_key=?"), partition, key))
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, internal("get reaction", err)
	}
	return &r, nil
}

var _ ports.ReactionLister = (*Store)(nil)

// ListReactionPage implements ports.ReactionLister: a keyset range of the
// partition's reactions by (created_at_ms, idempotency_key).
func (s *Store) ListReactionPage(ctx context.Context, partition string, q ports.ReactionListQuery) ([]ports.StoredReaction, error) {
	if q.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "reaction list limit %d", q.Limit)
	}
	where := "partition=?"
	args := []any{partition}
	if len(q.Statuses) > 0 {
		where += " AND status IN (" + placeholders(len(q.Statuses)) + ")"
		for _, st := range q.Statuses {
			args = append(args, string(st))
		}
	}
	if len(q.Types) > 0 {
		where += " AND type IN (" + placeholders(len(q.Types)) + ")"
		args = append(args, anyStrings(q.Types)...)
	}
	if q.After != nil {
		where += " AND (created_at_ms>? OR (created_at_ms=? AND " + s.d.ByteOrder("idempotency_key") + ">?))"
		args = append(args, q.After.CreatedAtMs, q.After.CreatedAtMs, q.After.IdempotencyKey)
	}
	args = append(args, q.Limit)
	rows, err := s.rd.QueryContext(ctx, s.q("SELECT "+reactionCols+" FROM sync_reactions WHERE "+where+
		" ORDER BY created_at_ms, "+s.d.ByteOrder("idempotency_key")+" LIMIT ?"), args...)
	if err != nil {
		return nil, internal("list reactions", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ports.StoredReaction
	for rows.Next() {
		r, err := scanReaction(rows)
		if err != nil {
			return nil, internal("list reactions", err)
		}
		out = append(out, r)
	}
	return out, internal("list reactions", rows.Err())
}

// ListReactions implements ports.ReactionReader.
func (s *Store) ListReactions(ctx context.Context, partition string, statuses []ports.ReactionStatus, limit int) ([]ports.StoredReaction, error) {
	if limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "reaction list limit %d", limit)
	}
	where := "partition=?"
	args := []any{partition}
	if len(statuses) > 0 {
		ph := make([]string, len(statuses))
		for i, st := range statuses {
			ph[i] = "?"
			args = append(args, string(st))
		}
		where += fmt.Sprintf(" AND status IN (%s)", strings.Join(ph, ","))
	}
	args = append(args, limit)
	rows, err := s.rd.QueryContext(ctx, s.q("SELECT "+reactionCols+" FROM sync_reactions WHERE "+where+
		" ORDER BY created_at_ms, "+s.d.ByteOrder("idempotency_key")+" LIMIT ?"), args...)
	if err != nil {
		return nil, internal("list reactions", err)
	}
	defer func() { _ = rows.Close() }()
	var out []ports.StoredReaction
	for rows.Next() {
		r, err := scanReaction(rows)
		if err != nil {
			return nil, internal("list reactions", err)
		}
		out = append(out, r)
	}
	return out, internal("list reactions", rows.Err())
}
