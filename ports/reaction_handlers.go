package ports

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ReactionDelivery is one claimed durable reaction handed to its handler
// after the source commit is durable (SPEC §6.9).
type ReactionDelivery struct {
	Partition string
	// IdempotencyKey is stable across attempts; pass it to external
	// systems that deduplicate requests (delivery is at least once).
	IdempotencyKey string
	Type           string
	Version        int32
	Payload        json.RawMessage
	Source         ReactionSource
	// Attempt counts from 1; MaxAttempts is the record's limit.
	Attempt     int
	MaxAttempts int
	// ExtendLease moves the lease expiry to now + d for a long handler;
	// false means the lease was lost to another worker.
	ExtendLease func(ctx context.Context, d time.Duration) (bool, error)
}

// ReactionHandler delivers the reactions of one type. Returning nil
// completes the reaction; a *ReactionError or any other error fails the
// attempt (retried with backoff unless permanent or out of attempts). A
// handler must branch on the versions it supports and treat an unknown
// version as a permanent failure.
type ReactionHandler interface {
	Type() string
	HandleReaction(ctx context.Context, d ReactionDelivery) error
}

// ReactionError is a classified handler failure: a stable code and
// optional plain JSON details (at most 8 KiB) are persisted; error text
// never is.
type ReactionError struct {
	Code    string
	Details json.RawMessage
	// Permanent dead-letters the reaction at once.
	Permanent bool
}

func (e *ReactionError) Error() string {
	return fmt.Sprintf("reaction failed: %s (permanent=%t)", e.Code, e.Permanent)
}
