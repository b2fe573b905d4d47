package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
)

// GroupCommitter is implemented by dialects whose write transactions all
// serialize on one connection (SQLite). Push then commits in groups: the
// pushes that queue while the writer is busy run in one write transaction,
// each in its own savepoint, and share one COMMIT (one WAL fsync).
type GroupCommitter interface {
	// PushBatch bounds a group: at most MaxPushes pushes, and no push is
	// started once the group has been open for MaxOpen.
	PushBatch() (maxPushes int, maxOpen time.Duration)
	// LockPartitionSeq is LockPartition, in one statement that also
	// returns the partition's last commit seq, which the group then holds
	// (closeSeqs).
	LockPartitionSeq(ctx context.Context, tx WriteTx, partition string) (int64, error)
}

// PartitionGroupCommitter is implemented by dialects whose write
// transactions on different partitions run in parallel, each on its own
// connection (PostgreSQL). Push then commits in groups per partition: the
// pushes that queue behind a partition's running group form its next
// group, one transaction holding the partition lock, each push in its own
// savepoint, one COMMIT (one WAL flush) for all.
type PartitionGroupCommitter interface {
	// PushBatch bounds a group as GroupCommitter.PushBatch does.
	PushBatch() (maxPushes int, maxOpen time.Duration)
	// BeginGroup opens a write transaction holding partition's lock, with
	// savepoint taken and then the reads ahead run in order, in one round
	// trip where the engine allows.
	BeginGroup(ctx context.Context, partition, savepoint string, ahead ...*ReadAhead) (GroupTx, error)
}

// GroupTx is the transaction of a partition's push group.
type GroupTx interface {
	WriteTx
	// NextSavepoint releases savepoint and takes it again, then runs the
	// reads ahead in order, in one round trip where the engine allows.
	// An error is the transaction's loss, unless it is a held statement's
	// failure (Pipeliner.TakeFailure), which the group rewinds to its
	// member; a read's own failure is in its Err (and in the Err of the
	// reads after it).
	NextSavepoint(ctx context.Context, savepoint string, ahead ...*ReadAhead) error
	// Aborted reports, without a round trip, that a statement failed and
	// the transaction accepts nothing but a rollback (to a savepoint).
	Aborted() bool
}

// ReadAhead is a one-row query sent along with a group's savepoint
// statements, in their round trip.
type ReadAhead struct {
	Query string
	Args  []any
	Dest  []any
	// Err is the query's own failure (the transaction then awaits a
	// rollback to the savepoint just taken).
	Err error
}

// Group commit (SQLite).
//
// A Push enqueues a request. When no group is in progress the pusher leads
// one itself: it waits for the writer (Begin, honouring its own context),
// then runs its own push and, one at a time, every request queued by then
// or while the group runs, until the group holds maxPushes pushes or has
// been open for maxOpen. Each push runs between SAVEPOINT and RELEASE; a
// push whose fn fails (or whose context ends mid-fn) is rolled back to its
// savepoint and gets its error while the others go on. One COMMIT ends the
// group and only then does any Push of the group return; a failed COMMIT
// reaches every push of the group (callers retry idempotently). The leader
// then hands the lead to the oldest queued request, so a lone push pays no
// waiting: the group is whatever is queued when the writer is free.
//
// Serially equivalent: the pushes of a group run one after another in
// queue order, each seeing the committed state plus the writes of the
// group's earlier successful pushes (a failed push is rolled back before
// the next starts), and they become visible together. That is exactly the
// state a serial execution would have shown each push, and since nothing
// of the group is visible or reported before the COMMIT, no push can have
// observed a write that later vanished. In particular the serve gate read
// inside a push (schema meta, the partition's log epoch, pending backfill
// checkpoints, the writer fence) sees what a serial run would: pushes
// never write those rows (AdvanceCheckpoint moves a watermark, never the
// state the gate reads); schema changes, declarations, activations and
// epoch rotations run in their own write transactions on the same writer,
// before or after a group, never inside one; and the single-statement
// writes that do join groups (writeGrouped: a first-use TouchPartition
// minting the epoch, a checkpoint claim, which keeps the checkpoint
// pending) are earlier members like any other: a later push's gate sees
// them exactly as if they had committed just before it, and they commit
// with it or not at all.
//
// Cancellation: a request whose context ends while queued is removed and
// never runs. Inside a group, statements run uncancellable after a context
// check (pushQuerier): SQLite answers an interrupted write statement by
// rolling back the whole transaction, which would take the group's other
// pushes with it; checking between statements rolls back only the
// cancelled push, to its savepoint.
type pushBatcher struct {
	maxPushes int
	maxOpen   time.Duration
	now       func() time.Time
	// g is the dialect of the one batcher of a GroupCommitter (nil in a
	// batchSet).
	g GroupCommitter

	// mu is the batcher's own, or its batchSet's, shared by the set's
	// batchers so an idle batcher can leave the set without a race.
	mu      *sync.Mutex
	leading bool // a group is being formed or run
	queue   []*pushReq

	// set is the per-partition set the batcher belongs to (nil: the one
	// batcher of a GroupCommitter dialect), key its partition.
	set *batchSet
	key string
}

// batchSet holds the batchers of a PartitionGroupCommitter dialect, one per
// partition with a group running or queued, dropped when idle.
type batchSet struct {
	g         PartitionGroupCommitter
	maxPushes int
	maxOpen   time.Duration
	now       func() time.Time

	mu sync.Mutex
	m  map[string]*pushBatcher
}

// lockBatcher returns the batcher for partition with its mutex held.
func (s *Store) lockBatcher(partition string) *pushBatcher {
	if s.pushes != nil {
		s.pushes.mu.Lock()
		return s.pushes
	}
	set := s.parts
	set.mu.Lock()
	b := set.m[partition]
	if b == nil {
		b = &pushBatcher{maxPushes: set.maxPushes, maxOpen: set.maxOpen, now: set.now, mu: &set.mu, set: set, key: partition}
		set.m[partition] = b
	}
	return b
}

type reqState int

const (
	reqQueued  reqState = iota
	reqRunning          // taken into a group (or leading one)
	reqGone             // left the queue on cancellation
)

// pushReq is one queued push and, once woken, its outcome.
type pushReq struct {
	ctx       context.Context
	partition string
	opts      ports.PushOptions
	fn        func(tx ports.PushTx) error
	one       func(q Querier) error // instead of fn: a writeOne statement

	state reqState  // guarded by pushBatcher.mu
	wake  chan bool // true: lead the next group; false: done
	ok    bool      // fn succeeded and its savepoint was released
	err   error     // the push's outcome
	fnErr error     // fn's own error, when it failed
	panic any       // a panic of fn, re-raised on the caller's goroutine
	wrote int       // rows staged, for statistics refresh
	bound []binding // client bindings seen or made, cached after commit
	// wantGate asks for the serve gate read after the COMMIT; after is
	// it, when afterOK.
	wantGate bool
	after    checkpoint.ServeGate
	afterOK  bool
	// ran: the push ran in a PostgreSQL group (groupRun), which held
	// its seq as seqKnown and seqBase when it began.
	ran      bool
	seqKnown bool
	seqBase  int64
	// appended are the push's commits, for the recent log once the
	// group committed, under the log epoch its gate read.
	appended []appended
	epoch    string
}

// errGroupAborted is returned to the innocent pushes of a group that
// another push broke (a failure SQLite answers by rolling back the whole
// transaction); they are retried.
var errGroupAborted = errors.New("push group aborted by another push")

// errGroupCommit is how Commit and Rollback answer inside a group.
var errGroupCommit = errors.New("push group: commit and rollback belong to the group")

const groupSavepoint = "sync_push_group"

// pushGrouped is Push through the group committer.
func (s *Store) pushGrouped(ctx context.Context, partition string, opts ports.PushOptions, fn func(tx ports.PushTx) error) error {
	_, _, err := s.pushGroupedGate(ctx, partition, opts, fn, false)
	return err
}

// pushGroupedGate is pushGrouped, asking with gate for the serve gate read
// right after the group's COMMIT (PushThenReadGate).
func (s *Store) pushGroupedGate(ctx context.Context, partition string, opts ports.PushOptions, fn func(tx ports.PushTx) error, gate bool) (checkpoint.ServeGate, bool, error) {
	ctx = s.withOp(ctx, "push")
	for attempt := 0; ; attempt++ {
		r := &pushReq{ctx: ctx, partition: partition, opts: opts, fn: fn, wake: make(chan bool, 1), wantGate: gate}
		s.submit(r)
		if r.panic != nil {
			panic(r.panic)
		}
		if r.err == nil {
			s.noteWrites(r.wrote)
			s.noteBindings(r.bound)
			return r.after, r.afterOK, nil
		}
		if r.fnErr != nil && !s.d.Retryable(r.fnErr) {
			return checkpoint.ServeGate{}, false, r.fnErr
		}
		retry := errors.Is(r.err, errGroupAborted) || s.d.Retryable(r.err)
		if attempt+1 < s.retries && retry && ctx.Err() == nil {
			continue
		}
		return checkpoint.ServeGate{}, false, internal("push", r.err)
	}
}

// PushThenReadGate implements ports.GatedPushStore: on a
// PartitionGroupCommitter dialect whose transactions can read after their
// COMMIT in its round trip (GateCommitter), the group reads the gate once
// for all its members that asked; on SQLite's one writer, the gate its
// group read last is the gate at its COMMIT (groupMemo).
func (s *Store) PushThenReadGate(ctx context.Context, partition string, opts ports.PushOptions, fn func(tx ports.PushTx) error) (checkpoint.ServeGate, bool, error) {
	if s.parts == nil && s.pushes == nil {
		return checkpoint.ServeGate{}, false, s.Push(ctx, partition, opts, fn)
	}
	return s.pushGroupedGate(ctx, partition, opts, fn, true)
}

var _ ports.GatedPushStore = (*Store)(nil)

// GateCommitter is a GroupTx whose COMMIT's round trip carries the
// group's closing write before it and a one-row read after it.
type GateCommitter interface {
	// CommitReading commits as Commit does. closing, when not nil, runs
	// first, outside every savepoint: should it fail, nothing is
	// committed and the transaction is lost. after, when not nil, runs
	// once the COMMIT succeeded, outside the transaction; after.Err is
	// the read's own failure.
	CommitReading(closing *Statement, after *ReadAhead) error
}

// writeGrouped is writeOne through the group committer: single-statement
// writes outside Push (client records, partition touches, cursor acks,
// checkpoint claims and advances, reaction updates) join the groups too,
// each in its own savepoint, so a pull's client-record write shares the
// pushes' COMMIT instead of paying its own. The serial-equivalence
// argument above covers them: a group member sees exactly what a serial
// run would have shown it.
func (s *Store) writeGrouped(ctx context.Context, op string, fn func(q Querier) error) error {
	for attempt := 0; ; attempt++ {
		r := &pushReq{ctx: ctx, one: fn, wake: make(chan bool, 1)}
		s.submit(r)
		if r.panic != nil {
			panic(r.panic)
		}
		if r.err == nil {
			return nil
		}
		retry := errors.Is(r.err, errGroupAborted) || s.d.Retryable(r.err)
		if attempt+1 < s.retries && retry && ctx.Err() == nil {
			continue
		}
		return internal(op, r.err)
	}
}

// submit queues r (or leads a group with it) and returns once r is done.
func (s *Store) submit(r *pushReq) {
	b := s.lockBatcher(r.partition)
	if !b.leading {
		b.leading = true
		r.state = reqRunning
		b.mu.Unlock()
		b.lead(s, r)
		return
	}
	r.state = reqQueued
	b.queue = append(b.queue, r)
	b.mu.Unlock()
	var lead bool
	select {
	case lead = <-r.wake:
	case <-r.ctx.Done():
		b.mu.Lock()
		if r.state == reqQueued {
			for i, q := range b.queue {
				if q == r {
					b.queue = append(b.queue[:i], b.queue[i+1:]...)
					break
				}
			}
			r.state = reqGone
			b.mu.Unlock()
			r.err = r.ctx.Err()
			return
		}
		b.mu.Unlock()
		lead = <-r.wake // taken: the group answers
	}
	if lead {
		b.lead(s, r)
	}
}

// take takes up to n of the oldest queued requests into the group.
func (b *pushBatcher) take(n int) []*pushReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = max(0, min(n, len(b.queue)))
	out := make([]*pushReq, n)
	copy(out, b.queue[:n])
	for i := range n {
		b.queue[i] = nil
		out[i].state = reqRunning
	}
	b.queue = b.queue[n:]
	return out
}

// next takes the oldest queued request into the group, or returns nil when
// the group is full, has been open too long, or nothing is queued.
func (b *pushBatcher) next(n int, opened time.Time) *pushReq {
	if n >= b.maxPushes || b.now().Sub(opened) >= b.maxOpen {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		return nil
	}
	r := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	r.state = reqRunning
	return r
}

// handoff passes the lead to the oldest queued request, or ends leading.
func (b *pushBatcher) handoff() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.queue = nil
		b.leading = false
		if b.set != nil {
			delete(b.set.m, b.key)
		}
		b.mu.Unlock()
		return
	}
	r := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	r.state = reqRunning
	b.mu.Unlock()
	r.wake <- true
	// The new leader runs next on this P: the writer is the group's
	// critical path, and this goroutine would otherwise keep the P for
	// its own response while the writer waits (measured: ~230 µs per
	// handoff at 10 clients, ~25 µs with the yield).
	runtime.Gosched()
}

// lead runs one group starting with self, answers its other members and
// passes the lead on.
func (b *pushBatcher) lead(s *Store, self *pushReq) {
	if b.set != nil {
		b.leadPartition(s, self)
		return
	}
	defer b.handoff()
	tx, err := s.d.Begin(self.ctx)
	if err != nil {
		self.err = err
		return
	}
	group := make([]*pushReq, 0, 8)
	opened := b.now()
	memo := newGroupMemo()
	var broken error
	for r := self; r != nil; r = b.next(len(group), opened) {
		group = append(group, r)
		if broken = s.runGrouped(b.g, tx, r, memo); broken != nil {
			break
		}
	}
	if broken == nil {
		broken = closeSeqs(self.ctx, tx, memo)
	}
	// Nothing else can write before this group's COMMIT: a gate it read
	// (after its last single-statement write) is the gate once it commits,
	// the read-verify a gated push asks for (pushGroupedGate hands it on
	// only when the push and the COMMIT succeeded).
	for _, r := range group {
		if g, ok := memo.gates[gateKey{r.partition, r.opts.WriterVersion}]; ok && r.wantGate {
			r.after, r.afterOK = g, true
		}
	}
	b.finish(s, tx, self, group, broken, nil, nil)
}

// closeSeqs moves each partition row the group appended to, once, to the
// group's last seq, outside every savepoint: the members' appends took the
// seqs after the one the group read (runGrouped) and left the row alone,
// which saves each member a write of it and the copy of its page into the
// member's savepoint journal. The group holds the only write lock, so the
// row still holds what the group read; the guard checks it all the same.
func closeSeqs(ctx context.Context, tx WriteTx, memo *groupMemo) error {
	bg := context.WithoutCancel(ctx)
	for _, gs := range memo.seqs {
		if gs.last == gs.stored {
			continue
		}
		res, err := tx.ExecContext(bg, gs.s.q("UPDATE sync_partitions SET max_commit_seq=? WHERE partition=? AND max_commit_seq=?"),
			gs.last, gs.partition, gs.stored)
		if err != nil {
			return fmt.Errorf("move commit seq: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, fmt.Errorf("move commit seq: partition %q no longer at seq %d", gs.partition, gs.stored))
		}
	}
	return nil
}

// finish ends a group's transaction: rolled back when broken (the members
// not yet failed are retried), committed when a member succeeded; then
// every member but self is woken with its outcome.
//
// On a GateCommitter, the COMMIT carries after's read and closing's write
// (a PostgreSQL group's move of its partition's seq, asked for at each
// COMMIT: a late failure changes it).
func (b *pushBatcher) finish(s *Store, tx WriteTx, self *pushReq, group []*pushReq, broken error, after *gateRead, g *groupRun) {
	commit := func() error {
		gc, ok := tx.(GateCommitter)
		if !ok {
			return tx.Commit()
		}
		var read *ReadAhead
		if after != nil {
			read = &after.q
		}
		var closing *Statement
		if g != nil {
			closing = g.seq.closing()
		}
		return gc.CommitReading(closing, read)
	}
	committed := false
	for _, r := range group {
		committed = committed || r.ok
	}
	var end error
	switch {
	case broken != nil:
		_ = tx.Rollback()
		for _, r := range group {
			if r.err == nil {
				r.ok = false
				r.err = fmt.Errorf("%w: %w", errGroupAborted, broken)
			}
		}
	case committed:
		end = commit()
		for g != nil && end != nil {
			// A member's held statement failed (the COMMIT did not run):
			// the group goes back to that member, fails it and retries
			// those after it, and commits the others.
			var df *DeferredFailure
			if !errors.As(end, &df) {
				break
			}
			if end = g.settle(end); end != nil {
				_ = tx.Rollback()
				break
			}
			if lastOK(group) == nil {
				end = tx.Rollback()
				break
			}
			end = commit()
		}
	default:
		end = tx.Rollback()
	}
	for _, r := range group {
		if r.ok && end != nil {
			r.ok = false
			r.err = end
		}
		if r.ok {
			// In seq order, before any member is answered and before the
			// next group of the partition runs (recent.go).
			s.recent.add(r.partition, r.epoch, r.appended)
		}
	}
	if end == nil && after != nil && after.q.Err == nil && after.pending == 0 {
		g := checkpoint.ServeGate{StoredSchemaVersion: int32(after.version.Int64), LogEpoch: after.epoch.String}
		for _, r := range group {
			if r.ok && r.wantGate && r.opts.WriterVersion == after.running {
				r.after, r.afterOK = g, true
			}
		}
	}
	for _, r := range group {
		if r != self {
			r.wake <- false
		}
	}
}

// lastOK is the group's last member to succeed, or nil.
func lastOK(group []*pushReq) *pushReq {
	for i := len(group) - 1; i >= 0; i-- {
		if group[i].ok {
			return group[i]
		}
	}
	return nil
}

// runGrouped runs one request of a group in its own savepoint. It sets
// r's outcome; a non-nil return means the transaction itself is lost
// (SQLite rolled it back) and the group must be abandoned.
func (s *Store) runGrouped(g GroupCommitter, tx WriteTx, r *pushReq, memo *groupMemo) error {
	if err := r.ctx.Err(); err != nil {
		r.err = err // cancelled while queued: never run
		return nil
	}
	bg := context.WithoutCancel(r.ctx)
	q := pushQuerier{tx: tx, db: s.db.DB}
	var gs *groupSeq
	if r.one == nil {
		if gs = memo.seqs[r.partition]; gs == nil {
			// Before the member's savepoint, once per partition and group:
			// the row must outlive a member whose writes are discarded (its
			// rejection is still appended), and its seq is the group's from
			// here on (closeSeqs).
			seq, err := g.LockPartitionSeq(bg, tx, r.partition)
			if err != nil {
				r.err = err
				return err
			}
			gs = &groupSeq{s: s, partition: r.partition, known: true, stored: seq, last: seq}
			memo.seqs[r.partition] = gs
		}
	}
	if _, err := tx.ExecContext(bg, "SAVEPOINT "+groupSavepoint); err != nil {
		r.err = err
		return err
	}
	var ptx *pushTx
	var err error
	if r.one != nil {
		// A single-statement write may mint the partition's epoch.
		clear(memo.gates)
		err = callGuarded(r, func() error { return r.one(q) })
	} else {
		ptx = &pushTx{s: s, tx: q, partition: r.partition, writerVersion: r.opts.WriterVersion, actorID: r.opts.ActorID,
			discardTo: groupSavepoint, memo: memo, seq: &seqAhead{base: gs.last, last: gs.last}}
		err = callGuarded(r, func() error {
			err := r.fn(ptx)
			r.fnErr = err
			return err
		})
	}
	if err == nil {
		if _, err := tx.ExecContext(bg, "RELEASE "+groupSavepoint); err != nil {
			r.err = err
			return err
		}
		r.ok = true
		if ptx != nil {
			r.wrote, r.bound, r.appended, r.epoch = ptx.written, ptx.bound, ptx.appended, ptx.epoch
			gs.last = ptx.seq.last
		}
		return nil
	}
	r.err = err
	if _, err := tx.ExecContext(bg, "ROLLBACK TO "+groupSavepoint); err != nil {
		return err
	}
	if _, err := tx.ExecContext(bg, "RELEASE "+groupSavepoint); err != nil {
		return err
	}
	return nil
}

// callGuarded runs f for r, turning a panic into a failure of r (re-raised
// on r's own goroutine).
func callGuarded(r *pushReq, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.panic = p
			err = fmt.Errorf("grouped write panicked: %v", p)
		}
	}()
	return f()
}

// pushQuerier is a grouped push's view of the group transaction: each
// statement first checks the caller's context, then runs uncancellable
// (an interrupted write statement would roll back the whole group).
type pushQuerier struct {
	tx WriteTx
	db *sql.DB // answers a cancelled QueryRow without running it
}

func (q pushQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return q.tx.ExecContext(context.WithoutCancel(ctx), query, args...)
}

func (q pushQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return q.tx.QueryContext(context.WithoutCancel(ctx), query, args...)
}

func (q pushQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if ctx.Err() != nil {
		// database/sql checks an ended context before taking a
		// connection: the row carries ctx.Err() and nothing runs.
		return q.db.QueryRowContext(ctx, query, args...)
	}
	return q.tx.QueryRowContext(context.WithoutCancel(ctx), query, args...)
}

func (pushQuerier) Commit() error   { return errGroupCommit }
func (pushQuerier) Rollback() error { return errGroupCommit }

// PushesQueued is the number of pushes waiting for a group (tests).
func (s *Store) PushesQueued() int {
	switch {
	case s.pushes != nil:
		s.pushes.mu.Lock()
		defer s.pushes.mu.Unlock()
		return len(s.pushes.queue)
	case s.parts != nil:
		s.parts.mu.Lock()
		defer s.parts.mu.Unlock()
		n := 0
		for _, b := range s.parts.m {
			n += len(b.queue)
		}
		return n
	}
	return 0
}
