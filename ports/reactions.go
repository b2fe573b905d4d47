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
