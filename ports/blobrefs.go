package ports

import "context"

// BlobRowRef is a current row that references a blob, with the row's stored
// scopes so the caller can authorize a download without a second read
// (SPEC §5.9.4, §5.9.5).
type BlobRowRef struct {
	Table  string
	RowID  string
	Scopes map[string]string
}

// BlobRefReader reads the blob reference index that PushTx.SetBlobRefs
// maintains (DeleteRow clears a row's references).
type BlobRefReader interface {
	// ListRowsReferencingBlob returns the rows referencing blobID, ordered
	// by table then row id.
	ListRowsReferencingBlob(ctx context.Context, partition, blobID string) ([]BlobRowRef, error)
	// ListReferencedBlobIDs returns every blob id a live row references,
	// sorted and distinct (the keep-set of the blob GC, the orphan
	// sweep).
	ListReferencedBlobIDs(ctx context.Context, partition string) ([]string, error)
}

// BlobClaimStore reads and ends the blob GC's claims
// (PushTx.ClaimOrphanBlobs) outside a push transaction.
type BlobClaimStore interface {
	// ListBlobClaims returns the partition's claimed blob ids, sorted (a
	// collection that stopped between its claim and its deletions left
	// them).
	ListBlobClaims(ctx context.Context, partition string) ([]string, error)
	// ReleaseBlobClaims ends the claims on blobIDs once their blobs are
	// deleted; releasing an unclaimed id is not an error.
	ReleaseBlobClaims(ctx context.Context, partition string, blobIDs []string) error
}
