package sqlstore

import (
	"context"
	"sort"
)

// The claims of the blob GC (the orphan sweep, SPEC §5.9.2) live in
// sync_blob_claims, an addition to the reference layout: a claim is taken
// under the partition lock once no row references the blob, and every
// push reads it under the same lock, so the GC's later deletion cannot
// race a push that would reference the blob.

const (
	blobRefExists = "SELECT 1 FROM sync_blob_refs WHERE partition=? AND blob_id=? LIMIT 1"
	blobClaimPut  = "INSERT INTO sync_blob_claims(partition, blob_id, claimed_at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
	blobClaimGet  = "SELECT 1 FROM sync_blob_claims WHERE partition=? AND blob_id=?"
)

func (t *pushTx) ClaimOrphanBlobs(ctx context.Context, blobIDs []string, nowMs int64) ([]string, error) {
	ids := dedupe(blobIDs)
	var out []string
	for _, id := range ids {
		var one int
		referenced, err := scanOne(t.tx.QueryRowContext(ctx, t.s.q(blobRefExists), t.partition, id), &one)
		if err != nil {
			return nil, internal("claim orphan blobs", err)
		}
		if referenced {
			continue
		}
		if err := t.beforeWrite(ctx); err != nil {
			return nil, err
		}
		if _, err := t.tx.ExecContext(ctx, t.s.q(blobClaimPut), t.partition, id, nowMs); err != nil {
			return nil, internal("claim orphan blobs", err)
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

func (t *pushTx) BlobClaimed(ctx context.Context, blobID string) (bool, error) {
	var one int
	ok, err := scanOne(t.tx.QueryRowContext(ctx, t.s.q(blobClaimGet), t.partition, blobID), &one)
	return ok, internal("read blob claim", err)
}

// ListBlobClaims implements ports.BlobClaimStore.
func (s *Store) ListBlobClaims(ctx context.Context, partition string) ([]string, error) {
	rows, err := s.rd.QueryContext(ctx, s.q("SELECT blob_id FROM sync_blob_claims WHERE partition=? ORDER BY "+s.d.ByteOrder("blob_id")), partition)
	if err != nil {
		return nil, internal("list blob claims", err)
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, internal("list blob claims", err)
		}
		out = append(out, id)
	}
	return out, internal("list blob claims", rows.Err())
}

// ReleaseBlobClaims implements ports.BlobClaimStore.
func (s *Store) ReleaseBlobClaims(ctx context.Context, partition string, blobIDs []string) error {
	ids := dedupe(blobIDs)
	if len(ids) == 0 {
		return nil
	}
	return s.writeOne(ctx, "release blob claims", func(q Querier) error {
		for start := 0; start < len(ids); start += chunkRows {
			part := ids[start:min(len(ids), start+chunkRows)]
			args := make([]any, 0, 1+len(part))
			args = append(args, partition)
			for _, id := range part {
				args = append(args, id)
			}
			if _, err := q.ExecContext(ctx, s.q("DELETE FROM sync_blob_claims WHERE partition=? AND blob_id IN ("+placeholders(len(part))+")"), args...); err != nil {
				return err
			}
		}
		return nil
	})
}
