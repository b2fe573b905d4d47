package sqlstore

import "context"

// Pipelining a push group's statements (PostgreSQL).
//
// A push's writes answer nothing the push waits for: the row upsert, the
// blob references, the reactions and the idempotency record only fail or
// succeed. A Pipeliner group transaction holds them back (Defer) and sends
// them in the round trip of the next statement that needs an answer: the
// commit append that returns the seq, the next operation's row read, the
// next member's savepoint, the COMMIT. Order is kept exactly (a held-back
// statement always runs before anything sent after it), so every read sees
// the writes before it as it did when each statement was its own round
// trip; only where a failure is reported moves, and each held-back
// statement carries the mapping of its failure (fail), so the error a push
// sees is the one the statement itself would have returned.
//
// Members whose reads went ahead with the group's BEGIN (pushgroup.go)
// hold their savepoints back too, so several members' statements may wait
// for one send. Each held statement names its member (owner): a failure,
// wherever it is reported (the member's own next read, a later member's,
// the next savepoint, the COMMIT), is that member's. The engine skipped
// everything after it, so the last savepoint taken is that member's: the
// group rolls back to it, fails that member alone, retries the members
// after it and goes on (groupRun.rewind).

// Pipeliner is a GroupTx that holds statements back.
type Pipeliner interface {
	// Defer holds query back until the next statement sent; owner is the
	// member it belongs to (nil: the group's own), fail (nil: none) maps
	// its failure to what the owner would have returned.
	Defer(owner any, query string, args []any, fail func(error) error)
	// QueryOne sends what is held back and query in one round trip and
	// scans query's row into dest (ok false: no row). A held-back
	// statement's failure is returned (mapped); query then did not run.
	QueryOne(ctx context.Context, query string, args []any, dest ...any) (ok bool, err error)
	// DropDeferred forgets what owner holds back (a rollback to the
	// savepoint follows, which would undo it anyway).
	DropDeferred(owner any)
	// TakeFailure returns, and forgets, the first held-back statement
	// failure a send met since it was last called (nil: none). The engine
	// skipped everything sent after it in that send.
	TakeFailure() *DeferredFailure
}

// DeferredFailure is a held-back statement's failure, reported by a later
// send (a later statement of its member, a later member's, the COMMIT's):
// Owner is the member it belongs to, Err its mapped error.
type DeferredFailure struct {
	Owner any
	Err   error
}

func (e *DeferredFailure) Error() string { return "deferred statement failed: " + e.Err.Error() }
func (e *DeferredFailure) Unwrap() error { return e.Err }

// oneQuerier is a Querier with a pipelined single-row read.
type oneQuerier interface {
	QueryOne(ctx context.Context, query string, args []any, dest ...any) (bool, error)
}

// queryOne reads one row (ok false: none), pipelined where q can.
func queryOne(ctx context.Context, q Querier, query string, args []any, dest ...any) (bool, error) {
	if p, ok := q.(oneQuerier); ok {
		return p.QueryOne(ctx, query, args, dest...)
	}
	return scanOne(q.QueryRowContext(ctx, query, args...), dest...)
}

// memberPipe is a group member's view of a Pipeliner: statements check the
// member's context first and then run uncancellable (as pushQuerier's do),
// and mark that the member ran a statement of its own; what it holds back
// is owner's.
type memberPipe struct {
	markRan
	p     Pipeliner
	owner *pushReq
}

func (m memberPipe) Defer(ctx context.Context, query string, args []any, fail func(error) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	*m.ran = true
	m.p.Defer(m.owner, query, args, fail)
	return nil
}

func (m memberPipe) QueryOne(ctx context.Context, query string, args []any, dest ...any) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	*m.ran = true
	return m.p.QueryOne(context.WithoutCancel(ctx), query, args, dest...)
}

// deferrer is what pushTx holds back statements through.
type deferrer interface {
	Defer(ctx context.Context, query string, args []any, fail func(error) error) error
}

// deferred reports the push's deferrer, nil when its statements run one by one.
func (t *pushTx) deferred() deferrer {
	d, _ := t.tx.(deferrer)
	return d
}

// exec runs a write whose answer nobody reads: held back where the
// transaction pipelines, else run now; fail maps its failure either way.
func (t *pushTx) exec(ctx context.Context, query string, args []any, fail func(error) error) error {
	if d := t.deferred(); d != nil {
		return d.Defer(ctx, query, args, fail)
	}
	if _, err := t.tx.ExecContext(ctx, query, args...); err != nil {
		return fail(err)
	}
	return nil
}

// dropDeferred forgets held-back statements before a rollback to the
// savepoint.
func (t *pushTx) dropDeferred() {
	if m, ok := t.tx.(memberPipe); ok {
		m.p.DropDeferred(m.owner)
	}
}
