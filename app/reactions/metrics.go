package reactions

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/ports"
)

// Reaction transitions counted by syncd_reaction_transitions_total.
const (
	reactionClaimed          = "claimed"
	reactionCompleted        = "completed"
	reactionRetried          = "retried"
	reactionDeadLettered     = "dead_lettered"
	reactionLeaseLost        = "lease_lost"
	reactionReset            = "reset"
	reactionPrunedCompleted  = "pruned_completed"
	reactionPrunedDeadLetter = "pruned_dead_letter"
)

// Metrics counts the reaction lifecycle's transitions on this
// node. It observes the queue (a decorator on ports.ReactionQueue), so
// the runner and the pruner stay free of metrics code.
type Metrics struct {
	transitions *prometheus.CounterVec
	passes      *prometheus.CounterVec
}

// NewMetrics registers the reaction counters with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_reaction_transitions_total",
			Help: "Durable reaction transitions on this node (SPEC 6.9): claimed, completed, retried (failed, rescheduled), dead_lettered, lease_lost (a renewal, completion or failure found the lease taken by another worker), reset (an operator retry of a dead letter), pruned_completed, pruned_dead_letter.",
		}, []string{"transition"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "syncd_reaction_prune_passes_total",
			Help: "Scheduled reaction retention passes, by result (ok, error).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.transitions, m.passes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every transition is visible at zero before it first happens.
	for _, t := range []string{reactionClaimed, reactionCompleted, reactionRetried, reactionDeadLettered, reactionLeaseLost,
		reactionReset, reactionPrunedCompleted, reactionPrunedDeadLetter} {
		m.transitions.WithLabelValues(t)
	}
	return m, nil
}

// Queue returns q counting its transitions (q itself for a nil m).
func (m *Metrics) Queue(q ports.ReactionQueue) ports.ReactionQueue {
	if m == nil {
		return q
	}
	return &meteredQueue{next: q, m: m}
}

func (m *Metrics) add(transition string, n int) {
	if n > 0 {
		m.transitions.WithLabelValues(transition).Add(float64(n))
	}
}

func (m *Metrics) PrunePass(err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.passes.WithLabelValues(result).Inc()
}

// meteredQueue counts what its next queue's calls did.
type meteredQueue struct {
	next ports.ReactionQueue
	m    *Metrics
}

func (q *meteredQueue) held(ok bool, err error, transition string) (bool, error) {
	switch {
	case err != nil:
	case ok && transition != "":
		q.m.add(transition, 1)
	case ok:
	default:
		q.m.add(reactionLeaseLost, 1)
	}
	return ok, err
}

func (q *meteredQueue) ClaimReactions(ctx context.Context, partition string, c ports.ReactionClaim) ([]ports.StoredReaction, error) {
	rs, err := q.next.ClaimReactions(ctx, partition, c)
	q.m.add(reactionClaimed, len(rs))
	return rs, err
}

func (q *meteredQueue) CompleteReaction(ctx context.Context, partition, key, owner string, atMs int64) (bool, error) {
	ok, err := q.next.CompleteReaction(ctx, partition, key, owner, atMs)
	return q.held(ok, err, reactionCompleted)
}

func (q *meteredQueue) ExtendReactionLease(ctx context.Context, partition, key, owner string, untilMs int64) (bool, error) {
	ok, err := q.next.ExtendReactionLease(ctx, partition, key, owner, untilMs)
	return q.held(ok, err, "")
}

func (q *meteredQueue) FailReaction(ctx context.Context, partition, key string, f ports.ReactionFailure) (bool, error) {
	ok, err := q.next.FailReaction(ctx, partition, key, f)
	t := reactionDeadLettered
	if f.Retry {
		t = reactionRetried
	}
	return q.held(ok, err, t)
}

func (q *meteredQueue) RetryReaction(ctx context.Context, partition, key string, nowMs int64) (bool, error) {
	ok, err := q.next.RetryReaction(ctx, partition, key, nowMs)
	if err == nil && ok {
		q.m.add(reactionReset, 1)
	}
	return ok, err
}

func (q *meteredQueue) PruneReactions(ctx context.Context, partition string, p ports.ReactionPrune) (ports.ReactionPruneCounts, error) {
	n, err := q.next.PruneReactions(ctx, partition, p)
	q.m.add(reactionPrunedCompleted, n.Completed)
	q.m.add(reactionPrunedDeadLetter, n.DeadLetter)
	return n, err
}
