package ports

import "context"

// ReactionStatus is a durable reaction's delivery state (SPEC §6.9).
type ReactionStatus string

// Reaction delivery states.
const (
	ReactionPending    ReactionStatus = "pending"
	ReactionLeased     ReactionStatus = "leased"
	ReactionCompleted  ReactionStatus = "completed"
	ReactionDeadLetter ReactionStatus = "dead-letter"
)

// StoredReaction is a reaction row as storage holds it.
type StoredReaction struct {
	Partition      string
	IdempotencyKey string
	Type           string
	Version        int32
	Payload        []byte // JSON
	Source         ReactionSource
	Status         ReactionStatus
	Attempts       int
	MaxAttempts    int
	AvailableAtMs  int64
	LeaseOwner     string // "" when not leased
	LeaseExpiresAt int64  // 0 when not leased
	CompletedAtMs  int64  // 0 until completed
	LastFailure    []byte // JSON; nil when none
}

// ReactionReader reads reactions PushTx.EnqueueReactions wrote.
type ReactionReader interface {
	// GetReaction returns the reaction or nil.
	GetReaction(ctx context.Context, partition, idempotencyKey string) (*StoredReaction, error)
	// ListReactions returns the partition's reactions ordered by
	// (created time, idempotency key), optionally filtered by status (empty
	// = all); limit must be ≥ 1.
	ListReactions(ctx context.Context, partition string, statuses []ReactionStatus, limit int) ([]StoredReaction, error)
}

// ReactionClaim leases due reactions for one worker.
type ReactionClaim struct {
	// LeaseOwner is an opaque token unique to this claim.
	LeaseOwner string
	// Types limits the claim; an empty list claims nothing.
	Types           []string
	NowMs           int64
	LeaseDurationMs int64
	// Limit ≤ 0 claims nothing.
	Limit int
}

// ReactionFailure records a failed delivery attempt.
type ReactionFailure struct {
	LeaseOwner string
	// Failure is the JSON failure record ({code, atMs, details?}); it never
	// carries exception text.
	Failure []byte
	AtMs    int64
	// Retry reschedules the reaction as pending at RetryAtMs; otherwise it
	// moves to dead-letter.
	Retry     bool
	RetryAtMs int64
}

// ReactionPrune bounds one retention pass.
type ReactionPrune struct {
	CompletedBeforeMs  int64
	DeadLetterBeforeMs int64
	Limit              int
}

// ReactionPruneCounts reports one retention pass.
type ReactionPruneCounts struct {
	Completed  int
	DeadLetter int
	// MayHaveMore is true when the pass hit its limit: the host repeats
	// the pass until it is false (SPEC §6.9).
	MayHaveMore bool
}

// ReactionQueue is the durable reaction delivery lifecycle (SPEC §6.9):
// pending → leased → completed | dead-letter. Every update is a CAS on the
// lease owner. It is optional: a storage that implements it can run the
// reaction runner, which fails closed otherwise.
type ReactionQueue interface {
	// ClaimReactions atomically leases up to Limit reactions of Types that
	// are pending and due (available ≤ now) or leased with an expired lease,
	// oldest due first; each claim increments attempts and sets the lease
	// to now + duration. Returned ordered by (created time, key).
	ClaimReactions(ctx context.Context, partition string, q ReactionClaim) ([]StoredReaction, error)
	// CompleteReaction acknowledges while leaseOwner holds the lease.
	CompleteReaction(ctx context.Context, partition, key, leaseOwner string, completedAtMs int64) (bool, error)
	// ExtendReactionLease moves the lease expiry while leaseOwner holds it.
	ExtendReactionLease(ctx context.Context, partition, key, leaseOwner string, leaseExpiresAtMs int64) (bool, error)
	// FailReaction records the failure and retries or dead-letters while
	// f.LeaseOwner holds the lease (a dead letter is available at f.AtMs).
	FailReaction(ctx context.Context, partition, key string, f ReactionFailure) (bool, error)
	// RetryReaction resets a dead-lettered reaction to pending (attempts 0,
	// available now, failure cleared) for an explicit operator retry.
	RetryReaction(ctx context.Context, partition, key string, nowMs int64) (bool, error)
	// PruneReactions deletes up to Limit terminal reactions: completed before
	// CompletedBeforeMs and dead letters available before DeadLetterBeforeMs.
	// It never deletes pending or leased work, and it serializes with
	// RetryReaction: of a retry and a prune racing for one dead letter,
	// exactly one wins.
	PruneReactions(ctx context.Context, partition string, q ReactionPrune) (ReactionPruneCounts, error)
}

// ReactionCursor is a position in a partition's (created time, key)
// reaction order.
type ReactionCursor struct {
	CreatedAtMs    int64
	IdempotencyKey string
}

// ReactionListQuery selects one keyset page of a partition's reactions.
type ReactionListQuery struct {
	// Statuses and Types filter (empty: all).
	Statuses []ReactionStatus
	Types    []string
	// After continues after this position (nil: from the start).
	After *ReactionCursor
	// Limit must be ≥ 1.
	Limit int
}

// ReactionLister pages through reactions for operators (syncd reactions
// list|retry, the admin API); the bundled storages implement it.
type ReactionLister interface {
	// ListReactionPage returns up to q.Limit reactions matching q after
	// q.After, ordered by (created time, idempotency key in byte order).
	ListReactionPage(ctx context.Context, partition string, q ReactionListQuery) ([]StoredReaction, error)
}
