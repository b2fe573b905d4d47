// Package ports declares what the sync core needs from the outside world.
// Adapters implement these interfaces; the app layer depends only on them.
package ports

import (
	"context"
	"fmt"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
)

// Storage is the whole storage engine behind one port. It is split into
// role interfaces so use cases ask only for what they need.
type Storage interface {
	SchemaStore
	PartitionStore
	PushStore
	LogReader
	RowReader
	Pruner
	ClientStore
	CheckpointStore
	BlobRefReader
	BlobClaimStore
	ReactionReader
	HealthChecker
	Close() error
}

// HealthChecker answers readiness probes.
type HealthChecker interface {
	// Ping runs the cheapest statement that proves the engine answers
	// (SELECT 1); it fails when the database cannot be reached or the
	// store is closed.
	Ping(ctx context.Context) error
}

// SchemaStore creates and verifies the database layout.
type SchemaStore interface {
	// EnsureSchema creates the core tables idempotently, migrates app tables
	// on a schema version bump (in the same transaction raising every
	// existing partition's writer fence, sync_partitions, to at least
	// s.Version, never lowering one, and installing decls with their
	// fences), and at the same version refuses,
	// writing nothing, on stored or physical layout mismatches and on
	// pending checkpoints at the running version that decls omit.
	// Refusals: sync.storage.checkpoint_incomplete (checked first),
	// sync.storage.schema_too_new (stored version above s.Version),
	// sync.storage.stored_layout_mismatch (details {table, column?}),
	// sync.storage.physical_layout_mismatch (details {table, column?,
	// reason, expected?, actual?}). Cheap when this instance already
	// ensured s.Version.
	EnsureSchema(ctx context.Context, s *schema.Schema, decls []checkpoint.Declaration) error
}

// PartitionInfo is one entry of the partition registry.
type PartitionInfo struct {
	Partition             string
	LogEpoch              string
	EpochRequired         bool
	LastAuthenticatedAtMs int64
}

// PartitionStore is the partition registry and its log epochs (SPEC §2.1).
type PartitionStore interface {
	// TouchPartition registers the partition on first use (minting a log
	// epoch), refreshes last-seen, and returns the current epoch.
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
	// RotateLogEpoch mints a new epoch, marks it required and deletes the
	// partition's client cursor records (restore procedure), keeping the
	// client-id bindings. It serializes with pruning.
	RotateLogEpoch(ctx context.Context, partition string) (string, error)
	// LogEpoch returns the partition's epoch; ok is false when unregistered.
	LogEpoch(ctx context.Context, partition string) (epoch string, ok bool, err error)
	ListPartitions(ctx context.Context) ([]PartitionInfo, error)
}

// PushStore runs partition-serialized write transactions.
type PushStore interface {
	// GetPushResult is the optimistic idempotency lookup outside any transaction.
	GetPushResult(ctx context.Context, partition, clientID, clientCommitID string) (rec PushRecord, ok bool, err error)
	// Push begins a write transaction on partition, takes the partition
	// lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: the partition row FOR
	// UPDATE), runs fn, and commits when fn returns nil; otherwise it
	// rolls back and returns fn's error unchanged. Writers to one
	// partition serialize; writers to different partitions need not.
	// Staged writes are invisible outside the transaction until commit.
	Push(ctx context.Context, partition string, opts PushOptions, fn func(tx PushTx) error) error
}

// PushOptions configure one push transaction.
type PushOptions struct {
	// WriterVersion stamps sync_commits.writer_version (the running schema version).
	WriterVersion int32
	// ActorID is the actor the transaction writes for: PushTx.BindClient
	// binds client ids to it and PutPushResult records it as the owner of
	// the stored result.
	ActorID string
	// ClientID and ClientCommitID name the commit the push applies, when
	// it applies one: a store may read its idempotency record ahead, in
	// the round trip that takes the partition lock.
	ClientID, ClientCommitID string
	// FirstRow is the row the commit's first operation reads, when known
	// (Table empty otherwise): a store may read it ahead too. The read
	// stands for the push's own only while the push has written no row.
	FirstRow RowKey
}

// RowKey names one current row of a partition's table.
type RowKey struct {
	Table, RowID string
}

// PushRecord is a stored idempotency record (SPEC §2.3).
type PushRecord struct {
	Result []byte
	// ActorID is the actor whose push stored the record; "" for a record
	// stored before records carried their actor.
	ActorID string
}

// RowWrite is a current-row write.
type RowWrite struct {
	RowID          string
	Version        int64
	Scopes         map[string]string
	Payload        []byte
	ColumnVersions []byte
	// Values are the decoded cells in column order, used to materialize
	// app columns: nil, string, int64, float64, bool or []byte (json and
	// blob_ref as their JSON text in a string).
	Values []any
	// OpIndex is the client operation index, carried into a ConstraintError.
	OpIndex int
}

// RowScan selects current rows by scope, keyset-paged by row id (byte order).
type RowScan struct {
	Table string
	// ScopeFilter is mandatory: variable → allowed values. A row matches iff
	// for every key its stored value is in the list (an empty list matches
	// nothing). An empty filter is sync.storage.scan_requires_scope.
	ScopeFilter map[string][]string
	// AfterRowID is exclusive; "" starts at the beginning.
	AfterRowID string
	// Limit must be ≥ 1 (else sync.storage.invalid_limit).
	Limit int
}

// RowLookup finds rows of a table whose materialized columns equal the
// given values (all must match), within the partition.
type RowLookup struct {
	Table  string
	Equals map[string]any
	Limit  int
}

// NewCommit is what AppendCommit writes.
type NewCommit struct {
	CreatedAtMs    int64
	ActorID        string
	ClientID       string
	ClientCommitID string
	Changes        []commit.Change
}

// Reaction is a durable reaction record enqueued with a commit (SPEC §6.9).
type Reaction struct {
	IdempotencyKey string
	Type           string
	Version        int32
	Payload        []byte // JSON
	MaxAttempts    int
	AvailableAtMs  int64
}

// CheckpointAdvance is a CAS on a checkpoint's owner epoch.
type CheckpointAdvance struct {
	Partition    string
	Name         string
	OwnerEpoch   int64
	Watermark    int64
	ObservedRows int64
	// Cursor is stored as the checkpoint's resume position (opaque).
	Cursor string
	NowMs  int64
}

// PushTx is one open push transaction bound to a partition.
type PushTx interface {
	Partition() string
	// ReadServeGate reads the gate on the transaction's own connection,
	// with PushOptions.WriterVersion as the running schema version.
	ReadServeGate(ctx context.Context) (checkpoint.ServeGate, error)
	// BindClient is ClientStore.BindClient for PushOptions.ActorID, under
	// the partition lock: the binding commits or rolls back with the
	// transaction, and DiscardWrites keeps it.
	BindClient(ctx context.Context, clientID string) (boundActor string, err error)
	// GetPushResult is the locked idempotency re-check.
	GetPushResult(ctx context.Context, clientID, clientCommitID string) (PushRecord, bool, error)
	// GetRow returns the current row (sees staged writes) or nil.
	GetRow(ctx context.Context, table, rowID string) (*commit.Row, error)
	// TombstoneSeq returns the commit seq of the row's live tombstone.
	TombstoneSeq(ctx context.Context, table, rowID string) (seq int64, ok bool, err error)
	ScanRows(ctx context.Context, q RowScan) ([]commit.Row, error)
	// Lookup is the transaction-bound authoritative query validators use.
	Lookup(ctx context.Context, q RowLookup) ([]commit.Row, error)
	// QueryAuthoritative is AuthoritativeQuerier's row read on the
	// transaction: it sees staged writes (RunningVersion is not used).
	QueryAuthoritative(ctx context.Context, q AuthoritativeQuery) ([]commit.Row, error)
	// UpsertRow writes the current row (payload, meta columns, materialized
	// app columns, row-scope index) and clears any tombstone. A relational
	// constraint failure returns *ConstraintError and leaves the
	// transaction usable (DiscardWrites, PutPushResult, commit).
	//
	// A store may pipeline writes (send them with the next statement that
	// needs an answer): a write's failure, constraint or other, is then
	// returned by the transaction's next read or AppendCommit instead,
	// carrying the write's own OpIndex, or else by Push itself; a
	// constraint failure is always returned by the push's next read or
	// AppendCommit, so the push can persist its rejection. Nothing a push
	// reads ever misses its earlier writes.
	UpsertRow(ctx context.Context, table string, w RowWrite) error
	// DeleteRow removes the current row, its row-scope index entries and
	// its blob references; absent rows are a no-op. The tombstone is
	// recorded by AppendCommit. Its failure may be reported later, as
	// UpsertRow's may.
	DeleteRow(ctx context.Context, table, rowID string, opIndex int) error
	// SetBlobRefs replaces the blob references of a row (empty = remove).
	SetBlobRefs(ctx context.Context, table, rowID string, blobIDs []string) error
	// ClaimOrphanBlobs claims for the blob GC (the orphan sweep) each of
	// blobIDs that no current row of the partition references (staged
	// writes included) and returns the claimed ids, sorted and distinct;
	// an id claimed before is returned again. A claim holds until
	// BlobClaimStore.ReleaseBlobClaims, and pushes refuse a claimed blob
	// (BlobClaimed), so the GC, deleting only what it claimed, never
	// deletes a blob a committed row references (SPEC §5.9.2).
	ClaimOrphanBlobs(ctx context.Context, blobIDs []string, nowMs int64) ([]string, error)
	// BlobClaimed reports whether the blob GC claimed blobID.
	BlobClaimed(ctx context.Context, blobID string) (bool, error)
	// AppendCommit allocates the next dense commit_seq, writes the commit,
	// its changes, the scope inverted index and tombstones for deletes,
	// stamped with the writer version. A writer version below the
	// partition's fence is refused by the database and returned as
	// sync.storage.writer_fence_rejected. A store may hold the append
	// back as it holds writes (its seq is then assigned ahead and checked
	// by the engine); its failure is then returned by Push.
	AppendCommit(ctx context.Context, c NewCommit) (seq int64, err error)
	EnqueueReactions(ctx context.Context, source ReactionSource, rs []Reaction) error
	// PutPushResult stores a result first-writer-wins, owned by
	// PushOptions.ActorID, and returns the stored one.
	PutPushResult(ctx context.Context, clientID, clientCommitID string, result []byte) ([]byte, error)
	// DiscardWrites rolls back everything staged since the lock was taken,
	// keeping the lock, so a rejection can be persisted cleanly.
	DiscardWrites(ctx context.Context) error
	AdvanceCheckpoint(ctx context.Context, a CheckpointAdvance) (bool, error)
}

// ReactionSource names the commit that produced reactions.
type ReactionSource struct {
	ClientID       string
	ClientCommitID string
	CommitSeq      int64
	CreatedAtMs    int64
}

// CommitWindow selects commits touching a table within scope, oldest first.
type CommitWindow struct {
	Table string
	// ScopeFilter has RowScan's matching rule, applied to each change's
	// stored scopes; candidates come from the change-scope index, or from
	// the window's seq range where they are dense (never a scan of the
	// whole log). An empty filter is sync.storage.scan_requires_scope.
	ScopeFilter map[string][]string
	// The window is AfterSeq < seq ≤ ThroughSeq.
	AfterSeq   int64
	ThroughSeq int64
	// LimitChanges (≥ 1, else sync.storage.invalid_limit): commits are added
	// whole, oldest first, and reading stops once the accumulated matching
	// changes reach it, so one oversize commit is returned alone.
	LimitChanges int
}

// LogBounds are a partition's log bounds.
type LogBounds struct {
	MaxSeq     int64
	HorizonSeq int64
}

// CommitRange selects whole commits by seq, every table and scope:
// AfterSeq < seq ≤ ThroughSeq. It reads the log's primary key range, so
// it serves a node reading each new commit once (realtime), not a pull.
type CommitRange struct {
	AfterSeq   int64
	ThroughSeq int64
	// LimitChanges (≥ 1, else sync.storage.invalid_limit) bounds the
	// changes returned (a commit without changes counts as one): commits
	// are added whole, oldest first, and reading stops before the first
	// commit that would exceed it.
	LimitChanges int
}

// CommitSpan is what a CommitRange read returns.
type CommitSpan struct {
	Commits []commit.Commit
	// ThroughSeq is how far the span is complete: every commit in
	// (AfterSeq, ThroughSeq] is in Commits. It is the range's ThroughSeq
	// unless the limit stopped the read (then the seq before the first
	// commit left out).
	ThroughSeq int64
}

// ScopedChangeQuery asks for the newest commit that changed a table under
// one of a scope variable's values, through the change-scope index.
type ScopedChangeQuery struct {
	Table    string
	Variable string
	// Values are the variable's values (at least one, else
	// sync.storage.scan_requires_scope).
	Values []string
	// ThroughSeq bounds the answer (seq ≤ ThroughSeq).
	ThroughSeq int64
}

// WindowProbe asks what a commit window holds without reading its rows:
// how many matching changes (up to a limit) and whether one is a delete.
type WindowProbe struct {
	Table string
	// ScopeFilter is CommitWindow's (mandatory, same matching rule).
	ScopeFilter map[string][]string
	// The window is AfterSeq < seq ≤ ThroughSeq.
	AfterSeq   int64
	ThroughSeq int64
	// Limit (≥ 0) is where counting stops: Changes is at most Limit+1.
	Limit int
}

// WindowSummary is a probe's answer.
type WindowSummary struct {
	// Changes is the number of matching changes, or Limit+1 when there
	// are more than Limit.
	Changes int
	// Deletes reports whether a matching change in the whole window is a
	// delete (the probe reads past Limit until it finds one or the window
	// ends).
	Deletes bool
}

// LogReader reads the commit log by scope (never scanning the whole log).
type LogReader interface {
	LogBounds(ctx context.Context, partition string) (LogBounds, error)
	// ReadCommitWindow returns commits with only their matching changes,
	// and of their header what a COMMIT frame carries: seq, creation time
	// and actor (ClientID and ClientCommitID are left empty). The changes'
	// scopes are read-only and may be shared between changes.
	ReadCommitWindow(ctx context.Context, partition string, w CommitWindow) ([]commit.Commit, error)
	// ReadCommitRange returns whole commits by seq.
	ReadCommitRange(ctx context.Context, partition string, r CommitRange) (CommitSpan, error)
	// LatestScopedChange returns the newest seq ≤ q.ThroughSeq whose
	// change to q.Table carries one of q.Values for q.Variable in the
	// change-scope index (0 when none is left: pruned or never written).
	// It is the scope pin of an image-lane bootstrap (SPEC §4.7), read by
	// index seeks, one per value.
	LatestScopedChange(ctx context.Context, partition string, q ScopedChangeQuery) (int64, error)
	// ProbeCommitWindow summarizes a window from the change-scope index and
	// the changes' scopes and ops, never their rows (the far-behind test of
	// SPEC §8.4).
	ProbeCommitWindow(ctx context.Context, partition string, p WindowProbe) (WindowSummary, error)
}

// WindowChangeCounter is implemented by stores that count a window's
// changes to a table from an index, reading neither their scopes nor
// their rows. Every matching change is one of them, so a count within
// the far-behind limit answers the far-behind test without the probe,
// which costs a seek and a scope decode per candidate commit.
type WindowChangeCounter interface {
	// CountWindowChanges counts the changes to p.Table in the window
	// p.AfterSeq < seq ≤ p.ThroughSeq, whatever their scopes (p.ScopeFilter
	// is not consulted), stopping at p.Limit+1.
	CountWindowChanges(ctx context.Context, partition string, p WindowProbe) (int, error)
}

// RecentWindowReader is implemented by stores that keep a partition's
// newest commits in memory, as this process committed them. A window held
// whole is answered from memory: complete, whatever a prune deletes
// meanwhile, and read from no database snapshot later than the one its
// bounds came from, so a pull needs neither its horizon re-check nor a
// gate re-read for it.
type RecentWindowReader interface {
	// ReadRecentWindow answers w as ReadCommitWindow would, for the log
	// epoch the window's bounds were read with; ok is false when some
	// commit of the window is not held (read the log instead). The
	// commits' scopes and rows are shared: read-only.
	ReadRecentWindow(partition, logEpoch string, w CommitWindow) (commits []commit.Commit, ok bool)
}

// TableScan selects every current row of one table in the partition,
// whatever its scopes, keyset-paged by row id (byte order).
type TableScan struct {
	Table string
	// AfterRowID is exclusive; "" starts at the beginning.
	AfterRowID string
	// Limit must be ≥ 1 (else sync.storage.invalid_limit).
	Limit int
}

// TableScanner reads a table's current rows without a scope filter, by
// its primary key: maintenance work such as a backfill's full pass, never
// a client's read (those go through RowReader's scope filter). Optional
// beside Storage; the SQL engines and the in-memory store implement it.
type TableScanner interface {
	ScanTable(ctx context.Context, partition string, q TableScan) ([]commit.Row, error)
}

// RowReader reads current rows for bootstrap.
type RowReader interface {
	ScanRows(ctx context.Context, partition string, q RowScan) ([]commit.Row, error)
	GetRow(ctx context.Context, partition, table, rowID string) (*commit.Row, error)
}

// PruneRequest prunes the log through a seq, bound to an epoch.
type PruneRequest struct {
	LogEpoch   string
	ThroughSeq int64
}

// PruneResult reports one prune pass.
type PruneResult struct {
	PreviousHorizonSeq int64
	HorizonSeq         int64
	RemovedCommits     int64
}

// Pruner maintains the horizon (SPEC §4.6).
type Pruner interface {
	// PruneCommitsThrough verifies the epoch, raises the horizon
	// monotonically and deletes commits, changes, scope index entries and
	// tombstones at or below it, atomically.
	PruneCommitsThrough(ctx context.Context, partition string, r PruneRequest) (PruneResult, error)
	// ActiveClientCursorFloor returns the minimum cursor of clients seen at
	// or after cutoffMs that hold one (cursor ≥ 0: a client without an
	// active subscription needs no log, and must not hide the others);
	// ok is false when there are none.
	ActiveClientCursorFloor(ctx context.Context, partition string, cutoffMs int64) (int64, bool, error)
	// CommitSeqBefore returns the highest seq created before ms (0 if none).
	CommitSeqBefore(ctx context.Context, partition string, ms int64) (int64, error)
}

// ClientRecord is a client's persisted pull state (SPEC §4.5).
type ClientRecord struct {
	Partition     string
	ClientID      string
	ActorID       string
	WireVersion   int
	Cursor        int64
	Subscriptions []byte // JSON
	UpdatedAtMs   int64
}

// ClientStore keeps client records and cursors, and the binding of client
// ids to actors (SPEC §1.5).
//
// A binding is separate from the client record: a client that has only
// pushed is bound but has no record (no cursor, so it never holds back
// the retention floor). A binding is never changed or removed, not even
// by RotateLogEpoch: the idempotency records it guards outlive epochs.
type ClientStore interface {
	GetClient(ctx context.Context, partition, clientID string) (*ClientRecord, error)
	// PutClient writes the record of a client already bound to r.ActorID
	// (BindClient first).
	PutClient(ctx context.Context, r ClientRecord) error
	// BindClient binds clientID to actorID in the partition unless it is
	// bound already, atomically (of two racing actors exactly one binds),
	// and returns the actor it is bound to: actorID, or the other actor
	// that holds it.
	BindClient(ctx context.Context, partition, clientID, actorID string) (boundActor string, err error)
	// ClientBinding returns the actor clientID is bound to in the
	// partition; ok is false while it is unbound.
	ClientBinding(ctx context.Context, partition, clientID string) (actorID string, ok bool, err error)
	// AdvanceClientCursor is a realtime ack: when a record exists for the
	// client with the same actor and the partition's live epoch, it sets
	// cursor = max(cursor, a.Cursor) and updatedAt = max(updatedAt, a.NowMs)
	// and returns true (so an old ack still marks the client active but
	// never moves its cursor back). Otherwise it changes nothing, never
	// creates a record, and returns false.
	AdvanceClientCursor(ctx context.Context, a CursorAdvance) (bool, error)
}

// CursorAdvance is a realtime ack.
type CursorAdvance struct {
	Partition string
	ClientID  string
	ActorID   string
	LogEpoch  string
	Cursor    int64
	NowMs     int64
}

// CheckpointStore is the backfill checkpoint state machine and the serve
// gate (the transitions are domain/checkpoint's Install, Claim, Advance and
// Decide).
type CheckpointStore interface {
	// DeclareCheckpoint inserts a declared row unless one exists (never
	// re-declaring, whatever its state) and raises the partition's writer
	// fence to max(fence, d.SchemaVersion), in one transaction; it returns
	// the stored row.
	DeclareCheckpoint(ctx context.Context, d checkpoint.Declaration, nowMs int64) (checkpoint.Checkpoint, error)
	// ClaimCheckpoint atomically increments owner_epoch, moves declared to
	// backfilling and stores d.SchemaVersion; an absent or activated row is
	// sync.storage.checkpoint_not_declared.
	ClaimCheckpoint(ctx context.Context, d checkpoint.Declaration, nowMs int64) (checkpoint.Checkpoint, error)
	// AdvanceCheckpoint is the owner-epoch CAS; false (row unchanged) for a
	// superseded owner or an absent row.
	AdvanceCheckpoint(ctx context.Context, a CheckpointAdvance) (bool, error)
	// ActivateCheckpoint runs under the partition write lock: no fence at
	// or above the checkpoint's schema version (or no checkpoint) is
	// sync.storage.checkpoint_fence_missing; source changes above the
	// watermark give Stale and a pruned window Unverifiable (nothing
	// written); a matching owner on a not-yet-activated row gives Activated
	// (state and watermark stored); anything else is Stale.
	ActivateCheckpoint(ctx context.Context, a CheckpointActivation) (checkpoint.Activation, error)
	// ReadCheckpoints lists the partition's checkpoints ordered by name.
	ReadCheckpoints(ctx context.Context, partition string) ([]checkpoint.Checkpoint, error)
	// SourceCoverageSeq is the highest retained seq with a change to one of
	// tables (0 when none or tables is empty).
	SourceCoverageSeq(ctx context.Context, partition string, tables []string) (int64, error)
	// HasSourceChangesAbove reads the horizon first: a change to tables
	// above seq is changed; else a horizon above seq is unverifiable; else
	// clean (always clean for an empty list).
	HasSourceChangesAbove(ctx context.Context, partition string, tables []string, seq int64) (checkpoint.SourceState, error)
	// ReadServeGate reads the gate in one snapshot; never memoized. The
	// epoch is "" for an unregistered partition; Pending is ordered by
	// (partition, name).
	ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error)
}

// CheckpointActivation activates a checkpoint under the partition write lock.
type CheckpointActivation struct {
	Partition  string
	Name       string
	OwnerEpoch int64
	Watermark  int64
	Sources    []string
	NowMs      int64
}

// ConstraintError is a relational constraint failure positively classified
// by an adapter (SQLite result code 19 family, PostgreSQL SQLSTATE class 23).
// It never carries engine text.
type ConstraintError struct {
	OpIndex int
	Table   string
	// Kind is a coarse classification: "unique", "foreign_key", "not_null", "check".
	Kind string
}

func (e *ConstraintError) Error() string {
	return fmt.Sprintf("constraint violation (%s) on %s at operation %d", e.Kind, e.Table, e.OpIndex)
}
