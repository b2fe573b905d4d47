package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
)

// Group commit per partition (PostgreSQL).
//
// The batcher of pushbatch.go, one per partition: a push to a partition
// with no group running leads one; pushes arriving meanwhile queue and the
// oldest of them leads the next group, taking the others along. Groups of
// different partitions run at once, each a transaction on its own pooled
// connection, so partitions never wait for each other in this process;
// across processes the partition row lock serializes groups as it
// serialized single pushes.
//
// A group transaction costs, beside the members' own statements, one round
// trip to open it (BEGIN, the partition lock and the first savepoint sent
// together), one between members (RELEASE and the next SAVEPOINT together)
// and the COMMIT; and each of these carries the next member's serve gate
// read, its first statement, so a member pays no round trip of its own
// for it. The partition lock is taken at the top level, outside
// every savepoint, so no member's rollback can release it. A member that
// fails is rolled back to its savepoint, which then still marks the same
// clean point and serves the next member as is. A member whose function
// succeeded although one of its statements failed (the engine then refuses
// everything until a rollback) is failed and rolled back alike, so it
// cannot break the COMMIT of the others. Members' DiscardWrites also
// returns to the member's savepoint (pushTx.discardTo), saving the inner
// savepoint of an ungrouped push: one subtransaction per member, which
// keeps a bounded group within the engine's per-backend cache of
// subtransaction ids.
//
// The partition's commit seq is the group's too: read once, with the
// first member's savepoint, it is advanced in Go by the members' appends,
// which write the seq they are given, and the partition row is written
// once, with the COMMIT (groupSeq). A row updated in each member's
// subtransaction, under the top-level lock, would leave a new row
// version per member, each with a multixact as its xmax, for every
// reader of the row to walk.
//
// Serial equivalence holds as for SQLite (pushbatch.go): the members run
// one after another in queue order on the one transaction, each seeing the
// committed state, read afresh by every statement (READ COMMITTED), plus
// the earlier members' writes; nothing is visible or acknowledged before
// the COMMIT. What other processes commit meanwhile is what a serial run
// would have shown too: writers of the partition's log wait for its lock,
// and a schema migration's table lock waits for the group.

// errStatementFailed fails a member whose function returned nil after one
// of its statements failed.
var errStatementFailed = errors.New("push group: a statement of the push failed but the push did not")

// leadPartition runs one partition group starting with self, answers its
// other members and passes the lead on.
func (b *pushBatcher) leadPartition(s *Store, self *pushReq) {
	defer b.handoff()
	if err := self.ctx.Err(); err != nil {
		self.err = err
		return
	}
	gs := groupSeq{s: s, partition: self.partition}
	ahead := s.gateAhead(self, &gs)
	tx, err := b.set.g.BeginGroup(self.ctx, self.partition, groupSavepoint, ahead.reads()...)
	if err != nil {
		self.err = err
		return
	}
	group := make([]*pushReq, 0, 8)
	opened := b.now()
	pending := false // the last member succeeded and its savepoint is still open
	var broken error
	for r := self; r != nil; r = b.next(len(group), opened) {
		group = append(group, r)
		if err := r.ctx.Err(); err != nil {
			r.err = err // cancelled while queued: never run
			continue
		}
		switch {
		case r == self:
		case pending:
			ahead = s.gateAhead(r, &gs)
			// A failure here loses the transaction before r ran: r is
			// retried with the group's other innocent members.
			broken = tx.NextSavepoint(context.WithoutCancel(r.ctx), groupSavepoint, ahead.reads()...)
			pending = false
		default:
			ahead = nil // the savepoint is clean as it is: nothing to send along
		}
		var df *DeferredFailure
		if errors.As(broken, &df) {
			// The member before failed late: roll it back alone; its
			// savepoint, clean again, serves r as is.
			broken = failLate(tx, lastOK(group), df, &gs)
			ahead = nil
		}
		if broken != nil {
			break
		}
		if pending, broken = s.runMember(tx, r, ahead, &gs); broken != nil {
			break
		}
	}
	b.finish(tx, self, group, broken, s.gateAfter(group), &gs)
}

// groupSeq is a PostgreSQL group's hold on its partition's commit seq.
type groupSeq struct {
	s         *Store
	partition string
	known     bool
	stored    int64 // the partition row's max_commit_seq in the transaction
	last      int64 // the last seq appended by a member that succeeded
}

// learn takes the seq read ahead under the lock, while the group holds
// none: the partition row is then current (only appends without a given
// seq ran, each moving it).
func (g *groupSeq) learn(ahead *gateRead) {
	if !g.known && ahead != nil && ahead.q.Err == nil && ahead.maxSeq.Valid {
		g.known, g.stored, g.last = true, ahead.maxSeq.Int64, ahead.maxSeq.Int64
	}
}

// closing is the partition row's move to the group's last seq, to run
// outside every savepoint just before the COMMIT (nil: nothing to move).
// It fails the COMMIT (division by zero) unless the row still holds the
// seq the group read and the log holds exactly the seqs after it up to
// the last: a dense log is never left behind a wrong count.
func (g *groupSeq) closing() *Statement {
	if g == nil || !g.known || g.last == g.stored {
		return nil
	}
	return &Statement{SQL: g.s.q(`WITH u AS (UPDATE sync_partitions SET max_commit_seq=? WHERE partition=? AND max_commit_seq=?
  AND (SELECT count(*) FROM sync_commits WHERE partition=? AND commit_seq>?)=?
  AND (SELECT max(commit_seq) FROM sync_commits WHERE partition=?)=? RETURNING 1)
SELECT 1/(SELECT count(*) FROM u)`),
		Args: []any{g.last, g.partition, g.stored, g.partition, g.stored, g.last - g.stored, g.partition, g.last}}
}

// gateAfter is the serve gate read to run after the group's COMMIT, for
// the members that asked (those of the first asker's running version), or
// nil when none did.
func (s *Store) gateAfter(group []*pushReq) *gateRead {
	for _, r := range group {
		if r.ok && r.wantGate {
			g := &gateRead{running: r.opts.WriterVersion}
			g.q = ReadAhead{Query: s.q(gateQuery), Args: []any{r.partition, r.opts.WriterVersion}}
			g.q.Dest = []any{&g.version, &g.epoch, &g.pending}
			return g
		}
	}
	return nil
}

// failLate fails member r, whose held-back statement failed after r's
// function returned (reported by the next send, while r's savepoint is
// still open), and rolls back to that savepoint. A non-nil return means
// the transaction is lost.
func failLate(tx WriteTx, r *pushReq, df *DeferredFailure, g *groupSeq) error {
	r.ok, r.err = false, df.Err
	if r.seqGiven && g != nil {
		g.last = r.seqBase // members run in turn: r was the last to move it
	}
	_, err := tx.ExecContext(context.WithoutCancel(r.ctx), "ROLLBACK TO SAVEPOINT "+groupSavepoint)
	return err
}

// gateRead is a member's serve gate read ahead, with its savepoint
// (pushTx.ReadServeGate uses it when it is the member's first statement,
// as it is in syncsvc's pipeline: the read then ran exactly where the
// member's own would have).
type gateRead struct {
	q       ReadAhead
	version sql.NullInt64
	epoch   sql.NullString
	pending int
	// running is the version the gate was read at.
	running int32
	// idem: the member's idempotency record was read too (result NULL:
	// absent).
	idem          bool
	result, owner sql.NullString
	// maxSeq is the partition's last commit seq, read under the lock
	// after every earlier member's statements.
	maxSeq sql.NullInt64
	// row is the commit's first row read too, nil when not asked for.
	row *rowAhead
}

// rowAhead is a row read with a group member's savepoint: the result of
// GetRow's own statement, good until the member writes (pushTx.GetRow
// uses it for that row while it is).
type rowAhead struct {
	q            ReadAhead
	table, rowID string
	version      sql.NullInt64
	scopes       []byte
	payload, cv  []byte
	tomb         sql.NullInt64
}

// reads are the queries to send with the member's savepoint, in order.
func (g *gateRead) reads() []*ReadAhead {
	if g.row != nil {
		return []*ReadAhead{&g.q, &g.row.q}
	}
	return []*ReadAhead{&g.q}
}

// aheadIdem are the idempotency record columns of a member's read ahead.
const aheadIdem = `,
  (SELECT result FROM sync_push_results WHERE partition=? AND client_id=? AND client_commit_id=?),
  (SELECT actor_id FROM sync_push_results WHERE partition=? AND client_id=? AND client_commit_id=?)`

// aheadSeq is the last commit seq column of a member's read ahead.
const aheadSeq = `,
  (SELECT max_commit_seq FROM sync_partitions WHERE partition=?)`

// gateAhead is member r's read ahead; it reads the partition's seq only
// while the group does not hold it (gs).
func (s *Store) gateAhead(r *pushReq, gs *groupSeq) *gateRead {
	g := &gateRead{}
	query := gateQuery
	g.q = ReadAhead{Args: []any{r.partition, r.opts.WriterVersion}, Dest: []any{&g.version, &g.epoch, &g.pending}}
	if !gs.known {
		query += aheadSeq
		g.q.Args = append(g.q.Args, r.partition)
		g.q.Dest = append(g.q.Dest, &g.maxSeq)
	}
	if o := r.opts; o.ClientCommitID != "" {
		g.idem = true
		query += aheadIdem
		g.q.Args = append(g.q.Args, r.partition, o.ClientID, o.ClientCommitID, r.partition, o.ClientID, o.ClientCommitID)
		g.q.Dest = append(g.q.Dest, &g.result, &g.owner)
	}
	g.q.Query = s.q(query)
	if k := r.opts.FirstRow; k.Table != "" {
		if ts, err := s.table(k.Table); err == nil {
			ra := &rowAhead{table: k.Table, rowID: k.RowID}
			ra.q = ReadAhead{Query: ts.getTomb, Args: []any{r.partition, k.RowID, r.partition, k.Table, k.RowID},
				Dest: []any{&ra.version, &ra.scopes, &ra.payload, &ra.cv, &ra.tomb}}
			g.row = ra
		}
	}
	return g
}

// runMember runs one push of a partition group in the open savepoint. ok
// reports success (the savepoint stays open until the next member or the
// COMMIT); on failure the savepoint is rolled back to, clean for the next
// member. A non-nil broken means the transaction is lost.
func (s *Store) runMember(tx GroupTx, r *pushReq, ahead *gateRead, gs *groupSeq) (ok bool, broken error) {
	ptx := &pushTx{s: s, partition: r.partition, writerVersion: r.opts.WriterVersion, actorID: r.opts.ActorID,
		discardTo: groupSavepoint}
	ran := markRan{WriteTx: pushQuerier{tx: tx, db: s.db.DB}, ran: &ptx.ran}
	ptx.tx = ran
	if p, ok := tx.(Pipeliner); ok {
		ptx.tx = memberPipe{markRan: ran, p: p}
	}
	var err error
	switch {
	case ahead != nil && ahead.q.Err != nil:
		// The read ahead failed as the member's own first read would have.
		err = internal("read serve gate", ahead.q.Err)
	case ahead != nil && ahead.row != nil && ahead.row.q.Err != nil:
		// The transaction awaits the rollback to the member's savepoint.
		err = internal("get row", ahead.row.q.Err)
	case ahead != nil:
		ptx.row = ahead.row
		if ahead.pending == 0 {
			ptx.gate = &checkpoint.ServeGate{StoredSchemaVersion: int32(ahead.version.Int64), LogEpoch: ahead.epoch.String}
		}
		if ahead.idem {
			// Under the lock, in the member's savepoint: good until the
			// member stores a result, which only it can.
			ptx.idem = &idemAhead{clientID: r.opts.ClientID, clientCommitID: r.opts.ClientCommitID, found: ahead.result.Valid,
				rec: ports.PushRecord{Result: []byte(ahead.result.String), ActorID: ahead.owner.String}}
		}
	}
	if _, ok := tx.(Pipeliner); ok && err == nil {
		gs.learn(ahead)
		if gs.known {
			ptx.seq = &seqAhead{base: gs.last, last: gs.last}
		}
	}
	if err == nil {
		err = callGuarded(r, func() error {
			err := r.fn(ptx)
			r.fnErr = err
			return err
		})
	}
	if err == nil && tx.Aborted() {
		err = internal("push", errStatementFailed)
	}
	if err == nil {
		r.ok = true
		r.wrote, r.bound = ptx.written, ptx.bound
		if ptx.seq != nil {
			r.seqGiven, r.seqBase = true, ptx.seq.base
			gs.last = ptx.seq.last
		}
		return true, nil
	}
	r.err = err
	ptx.dropDeferred()
	if _, err := tx.ExecContext(context.WithoutCancel(r.ctx), "ROLLBACK TO SAVEPOINT "+groupSavepoint); err != nil {
		return false, err
	}
	return false, nil
}

// markRan notes that a member ran a statement of its own.
type markRan struct {
	WriteTx
	ran *bool
}

func (m markRan) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	*m.ran = true
	return m.WriteTx.ExecContext(ctx, q, args...)
}

func (m markRan) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	*m.ran = true
	return m.WriteTx.QueryContext(ctx, q, args...)
}

func (m markRan) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	*m.ran = true
	return m.WriteTx.QueryRowContext(ctx, q, args...)
}
