package ports

import "context"

// AdminReader is the read-only view the admin API (app/admin) shows
// operators: partitions, client records, commit metadata and reaction
// counts. Every list is keyset-paged and bounded by its caller's limit
// (≥ 1, else sync.storage.invalid_limit); nothing here reads row
// payloads. It is optional: the admin API answers 501 for a storage that
// does not implement it.
type AdminReader interface {
	// AdminPartitions lists partitions that are registered or have a
	// commit log, in byte order of their names after q.After.
	AdminPartitions(ctx context.Context, q AdminPage) ([]AdminPartition, error)
	// AdminClients lists the partition's client records in byte order of
	// their ids after q.After.
	AdminClients(ctx context.Context, partition string, q AdminPage) ([]ClientRecord, error)
	// AdminCommits lists the retained commits with AfterSeq < seq ≤
	// ThroughSeq (ThroughSeq 0: no upper bound), oldest first.
	AdminCommits(ctx context.Context, partition string, q AdminCommitRange) ([]AdminCommit, error)
	// AdminReactionCounts counts the partition's reactions by status
	// (every partition's when partition is ""); statuses without
	// reactions are absent.
	AdminReactionCounts(ctx context.Context, partition string) (map[ReactionStatus]int64, error)
}

// AdminPage is one keyset page: the names after After ("" starts at the
// beginning), at most Limit of them.
type AdminPage struct {
	After string
	Limit int
}

// AdminPartition is one partition as the admin API lists it.
type AdminPartition struct {
	Partition string
	// Registered is false for a partition with a log but no registry
	// entry (no epoch, never authenticated).
	Registered            bool
	LogEpoch              string
	EpochRequired         bool
	LastAuthenticatedAtMs int64
	MaxCommitSeq          int64
	HorizonSeq            int64
	ClientCount           int64
}

// AdminCommitRange selects commits by seq.
type AdminCommitRange struct {
	AfterSeq   int64
	ThroughSeq int64
	Limit      int
}

// AdminCommit is one commit's metadata: no row payloads.
type AdminCommit struct {
	Seq            int64
	CreatedAtMs    int64
	ActorID        string
	ClientID       string
	ClientCommitID string
	ChangeCount    int64
	// Tables are the tables the changes touch, sorted, distinct.
	Tables []string
}

// SegmentStats are a segment store's totals (the admin API's segment
// view).
type SegmentStats struct {
	// Segments and Bytes count the stored entries (one per content
	// address) and their uncompressed length.
	Segments int64
	Bytes    int64
	// Publications counts every recorded publication; Expired those
	// expired at the nowMs asked for (the sweeper removes them).
	Publications        int64
	ExpiredPublications int64
}

// SegmentStatsReader reports a segment store's totals from its catalog
// (never by reading segment bytes). The bundled stores implement it; a
// host's own store may not, and the admin API then says so.
type SegmentStatsReader interface {
	SegmentStats(ctx context.Context, nowMs int64) (SegmentStats, error)
}
