// Package reactions delivers durable server reactions (SPEC §6.9): it
// claims due reactions of the registered handler types with a fresh lease
// owner per pass, renews each lease before running its handler, and
// completes, retries with bounded exponential backoff, or dead-letters it.
package reactions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults of the reference runner.
const (
	DefaultLeaseDuration  = 30 * time.Second
	DefaultBatchSize      = 10
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	maxFailureDetails     = 8 << 10
	// CodeHandlerFailed is the failure code of an unclassified handler error.
	CodeHandlerFailed = "reaction.handler_failed"
	// CodeNoHandler is recorded when no handler serves the claimed type.
	CodeNoHandler = "reaction.no_handler"
)

// Options configure a Runner.
type Options struct {
	Queue ports.ReactionQueue
	// Partitions lists the partitions Pass delivers in (needed by Pass
	// only).
	Partitions     ports.PartitionStore
	Handlers       []ports.ReactionHandler
	LeaseDuration  time.Duration
	BatchSize      int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Now            func() time.Time
	// NewOwner mints lease-owner tokens (default: 128 random bits).
	NewOwner func() string
	// Events, when set, hears every reaction's transition after a
	// delivery attempt (domain/event).
	Events ports.EventSink
	Log    *zap.Logger
}

// Runner runs reaction passes.
type Runner struct {
	o        Options
	handlers map[string]ports.ReactionHandler
	types    []string
}

// New builds a Runner.
func New(o Options) (*Runner, error) {
	if o.Queue == nil {
		return nil, errors.New("reactions: a ReactionQueue is required")
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = DefaultInitialBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewOwner == nil {
		o.NewOwner = randomOwner
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	r := &Runner{o: o, handlers: map[string]ports.ReactionHandler{}}
	for _, h := range o.Handlers {
		if h == nil {
			continue
		}
		if _, dup := r.handlers[h.Type()]; dup {
			return nil, fmt.Errorf("reactions: two handlers for type %q", h.Type())
		}
		r.handlers[h.Type()] = h
		r.types = append(r.types, h.Type())
	}
	sort.Strings(r.types)
	return r, nil
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Backoff is the retry delay after a failed attempt (1-based):
// min(MaxBackoff, InitialBackoff × 2^(attempt−1)).
func (r *Runner) Backoff(attempt int) time.Duration {
	d := r.o.InitialBackoff
	for i := 1; i < attempt && d < r.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.o.MaxBackoff)
}

// Pass is the scheduled delivery: on every registered partition, batches
// of due reactions while they find work. A failing partition does not
// stop the others (the scheduler logs the joined failures).
func (r *Runner) Pass(ctx context.Context) error {
	if r.o.Partitions == nil {
		return errors.New("reactions: delivery needs Options.Partitions")
	}
	return periodic.EachPartition(ctx, r.o.Partitions, func(ctx context.Context, partition string) error {
		for ctx.Err() == nil {
			n, err := r.RunOnce(ctx, partition)
			if err != nil || n == 0 {
				return err
			}
		}
		return nil
	})
}

// RunOnce claims and delivers one batch of the partition's due reactions
// and returns how many handlers ran.
func (r *Runner) RunOnce(ctx context.Context, partition string) (int, error) {
	if len(r.types) == 0 {
		return 0, nil
	}
	owner := r.o.NewOwner()
	now := r.o.Now()
	claimed, err := r.o.Queue.ClaimReactions(ctx, partition, ports.ReactionClaim{LeaseOwner: owner, Types: r.types,
		NowMs: now.UnixMilli(), LeaseDurationMs: r.o.LeaseDuration.Milliseconds(), Limit: r.o.BatchSize})
	if err != nil {
		return 0, fmt.Errorf("claim reactions: %w", err)
	}
	ran := 0
	for _, rec := range claimed {
		// Renew before starting: a lease lost while an earlier batch member
		// ran belongs to another worker now.
		ok, err := r.o.Queue.ExtendReactionLease(ctx, partition, rec.IdempotencyKey, owner,
			r.o.Now().Add(r.o.LeaseDuration).UnixMilli())
		if err != nil {
			return ran, fmt.Errorf("renew reaction lease: %w", err)
		}
		if !ok {
			r.o.Log.Info("reaction lease lost before its handler started; skipped", zap.String("partition", partition),
				zap.String("reaction_type", rec.Type), zap.String("idempotency_key", rec.IdempotencyKey))
			continue
		}
		ran++
		if err := r.deliver(ctx, partition, owner, rec); err != nil {
			return ran, err
		}
	}
	return ran, nil
}

func (r *Runner) deliver(ctx context.Context, partition, owner string, rec ports.StoredReaction) error {
	log := r.o.Log.With(zap.String("partition", partition), zap.String("reaction_type", rec.Type),
		zap.String("idempotency_key", rec.IdempotencyKey), zap.Int("attempt", rec.Attempts))
	h := r.handlers[rec.Type]
	began := r.o.Now()
	var herr error
	if h == nil {
		herr = &ports.ReactionError{Code: CodeNoHandler, Permanent: true}
	} else {
		herr = h.HandleReaction(ctx, ports.ReactionDelivery{
			Partition: partition, IdempotencyKey: rec.IdempotencyKey, Type: rec.Type, Version: rec.Version,
			Payload: append(json.RawMessage(nil), rec.Payload...), Source: rec.Source,
			Attempt: rec.Attempts, MaxAttempts: rec.MaxAttempts,
			ExtendLease: func(ctx context.Context, d time.Duration) (bool, error) {
				return r.o.Queue.ExtendReactionLease(ctx, partition, rec.IdempotencyKey, owner, r.o.Now().Add(d).UnixMilli())
			},
		})
	}
	now := r.o.Now()
	if herr == nil {
		ok, err := r.o.Queue.CompleteReaction(ctx, partition, rec.IdempotencyKey, owner, now.UnixMilli())
		if err != nil {
			return fmt.Errorf("complete reaction: %w", err)
		}
		if ok {
			log.Debug("reaction completed")
			r.transition(partition, rec, event.ReactionCompleted, "", 0, now.Sub(began))
		} else {
			log.Warn("reaction completed after its lease was lost; another worker may run it again")
			r.transition(partition, rec, event.ReactionLeaseLost, "", 0, now.Sub(began))
		}
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the lease expires and the reaction is reclaimed
	}
	code, details, permanent := CodeHandlerFailed, json.RawMessage(nil), false
	var re *ports.ReactionError
	if errors.As(herr, &re) {
		if re.Code != "" {
			code = re.Code
		}
		if len(re.Details) > 0 && len(re.Details) <= maxFailureDetails && json.Valid(re.Details) {
			details = re.Details
		}
		permanent = re.Permanent
	}
	failure, err := json.Marshal(struct {
		Code    string          `json:"code"`
		AtMs    int64           `json:"atMs"`
		Details json.RawMessage `json:"details,omitempty"`
	}{code, now.UnixMilli(), details})
	if err != nil {
		return err
	}
	retry := !permanent && rec.Attempts < rec.MaxAttempts
	f := ports.ReactionFailure{LeaseOwner: owner, Failure: failure, AtMs: now.UnixMilli(), Retry: retry}
	if retry {
		f.RetryAtMs = now.Add(r.Backoff(rec.Attempts)).UnixMilli()
	}
	held, err := r.o.Queue.FailReaction(ctx, partition, rec.IdempotencyKey, f)
	if err != nil {
		return fmt.Errorf("record reaction failure: %w", err)
	}
	switch {
	case !held:
		log.Warn("reaction failed after its lease was lost; another worker holds it", zap.String("code", code))
		r.transition(partition, rec, event.ReactionLeaseLost, code, 0, now.Sub(began))
	case retry:
		log.Info("reaction failed; retrying", zap.String("code", code), zap.Int64("retry_at_ms", f.RetryAtMs))
		r.transition(partition, rec, event.ReactionRetrying, code, f.RetryAtMs, now.Sub(began))
	default:
		log.Warn("reaction dead-lettered", zap.String("code", code))
		r.transition(partition, rec, event.ReactionDeadLettered, code, 0, now.Sub(began))
	}
	return nil
}

// transition emits a delivered reaction's move.
func (r *Runner) transition(partition string, rec ports.StoredReaction, to event.ReactionState, code string, retryAtMs int64, took time.Duration) {
	if r.o.Events == nil {
		return
	}
	r.o.Events.Emit(event.ReactionTransitioned{Partition: partition, ReactionType: rec.Type, IdempotencyKey: rec.IdempotencyKey,
		Attempt: int64(rec.Attempts), MaxAttempts: int64(rec.MaxAttempts), To: to, Code: code, RetryAtMs: retryAtMs, Duration: took})
}
