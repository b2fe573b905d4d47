package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
// together) and the COMMIT. The pushes already queued when it opens join
// at once: their reads ahead (serve gate, idempotency record, first row)
// go with the BEGIN, and their savepoints are held back with their writes,
// so a member whose reads were all read ahead pays no round trip of its
// own; the whole group's statements go with the COMMIT. A read ahead is
// used only while no earlier member wrote what it read (groupRun.ahead);
// else, and for a push that queued after the BEGIN, the round trip
// between members (RELEASE and the next SAVEPOINT together) carries the
// member's reads. Under load a round trip is a wait for two schedulers
// (the engine's backend and this process's), several times the cost of
// the statements, and the partition's members run one after another:
// the round trips were the group's length. The partition lock is taken at the top level, outside
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
	g := &groupRun{s: s, seq: groupSeq{s: s, partition: self.partition}, touched: map[[2]string]bool{}, stored: map[[2]string]bool{},
		reads: map[*pushReq]*gateRead{}}
	// The pushes queued now join at once: their reads go with the BEGIN.
	more := b.take(b.maxPushes - 1)
	g.reads[self] = s.gateAhead(self, &g.seq)
	reads := g.readAhead(g.reads[self], more)
	tx, err := b.set.g.BeginGroup(self.ctx, self.partition, groupSavepoint, reads...)
	if err != nil {
		self.err = err
		for _, r := range g.batch {
			r.err = fmt.Errorf("%w: %w", errGroupAborted, err) // retried
			r.wake <- false
		}
		return
	}
	g.tx = tx
	g.p, _ = tx.(Pipeliner)
	opened := b.now()
	pending := false // the last member succeeded and its savepoint is still open
	broken := g.dropFailedReads(more)
	for r := self; r != nil && broken == nil; r = g.next(b, opened) {
		g.group = append(g.group, r)
		if err := r.ctx.Err(); err != nil {
			r.err = err // cancelled while queued: never run
			continue
		}
		ahead := g.ahead(r)
		switch {
		case r == self:
		case pending && ahead != nil && g.p != nil:
			// Read with the BEGIN and still good: the next savepoint needs
			// no round trip of its own.
			g.p.Defer(nil, "RELEASE "+groupSavepoint, nil, nil)
			g.p.Defer(nil, "SAVEPOINT "+groupSavepoint, nil, nil)
		case pending:
			// The pushes queued since join too, their reads going with
			// r's savepoint.
			ahead = s.gateAhead(r, &g.seq)
			var more []*pushReq
			if b.now().Sub(opened) < b.maxOpen {
				more = b.take(b.maxPushes - len(g.group) - len(g.batch))
			}
			reads := g.readAhead(ahead, more)
			if err := tx.NextSavepoint(context.WithoutCancel(r.ctx), groupSavepoint, reads...); err != nil {
				// A held statement's failure belongs to a member before
				// r (rewound); any other loses the transaction before r
				// ran: r is retried with the group's innocent members.
				broken = g.settle(err)
				ahead = nil
				for _, m := range more {
					delete(g.reads, m)
				}
			} else {
				broken = g.dropFailedReads(more)
			}
		}
		pending = false
		if broken == nil {
			pending, broken = g.runMember(r, ahead)
		}
	}
	// Those taken with the BEGIN that a broken transaction left unrun
	// are retried with the group's innocent members.
	g.group = append(g.group, g.batch...)
	g.batch = nil
	b.finish(s, tx, self, g.group, broken, s.gateAfter(g.group), g)
}

// groupRun is a PostgreSQL group's state while it runs.
type groupRun struct {
	s     *Store
	tx    GroupTx
	p     Pipeliner // nil when tx holds nothing back
	seq   groupSeq
	group []*pushReq
	// batch are the members taken into the group, not yet run, and
	// reads their reads ahead; first is the reads of the member whose
	// savepoint the last send opened.
	batch []*pushReq
	reads map[*pushReq]*gateRead
	first *gateRead
	// What the members run so far wrote that a read ahead may have read
	// before them: rows (table, id) and idempotency records (client id,
	// commit id). The serve gate needs none: no push writes what it
	// reads (the schema marker, the epoch, the checkpoints' states).
	touched, stored map[[2]string]bool
}

// touch notes a row a member writes (g may be nil: no group).
func (g *groupRun) touch(table, rowID string) {
	if g != nil {
		g.touched[[2]string{table, rowID}] = true
	}
}

// store notes an idempotency record a member writes (g may be nil).
func (g *groupRun) store(clientID, clientCommitID string) {
	if g != nil {
		g.stored[[2]string{clientID, clientCommitID}] = true
	}
}

// readAhead is what a send that opens a savepoint reads: lead's reads
// (the member it opens the savepoint for), then those of more, pushes
// taken into the group now, to run after the members before them.
func (g *groupRun) readAhead(lead *gateRead, more []*pushReq) []*ReadAhead {
	g.first = lead
	reads := lead.reads()
	known := groupSeq{known: true} // only lead's reads the seq
	for _, r := range more {
		g.batch = append(g.batch, r)
		if r.ctx.Err() != nil {
			continue
		}
		a := g.s.gateAhead(r, &known)
		g.reads[r] = a
		reads = append(reads, a.reads()...)
	}
	return reads
}

// dropFailedReads forgets the reads ahead of more once one failed (the
// engine skipped those after it); when lead's did not fail, the
// transaction is rolled back to lead's clean savepoint (a failed read of
// lead's own fails lead: runMember).
func (g *groupRun) dropFailedReads(more []*pushReq) error {
	failed := false
	for _, r := range more {
		a := g.reads[r]
		if a == nil {
			continue
		}
		if a.q.Err != nil || (a.row != nil && a.row.q.Err != nil) {
			failed = true
		}
		if failed {
			delete(g.reads, r)
		}
	}
	if !failed || g.first.q.Err != nil || (g.first.row != nil && g.first.row.q.Err != nil) {
		return nil
	}
	_, err := g.tx.ExecContext(context.Background(), "ROLLBACK TO SAVEPOINT "+groupSavepoint)
	return err
}

// next is the group's next member: one taken already, else one
// queued since, while the group is open.
func (g *groupRun) next(b *pushBatcher, opened time.Time) *pushReq {
	if len(g.batch) > 0 {
		r := g.batch[0]
		g.batch = g.batch[1:]
		return r
	}
	return b.next(len(g.group), opened)
}

// ahead is r's read ahead when it is still what r would read now: no
// member before it wrote what it read.
func (g *groupRun) ahead(r *pushReq) *gateRead {
	a := g.reads[r]
	if a == nil {
		return nil
	}
	delete(g.reads, r)
	if r == g.group[0] {
		return a // read in its own savepoint, before any write
	}
	o := r.opts
	switch {
	case a.idem && g.stored[[2]string{o.ClientID, o.ClientCommitID}]:
		return nil
	case a.row != nil && g.touched[[2]string{a.row.table, a.row.rowID}]:
		return nil
	}
	return a
}

// settle handles a send's failure: a held statement's (a member's,
// reported later) rewinds the group to that member; any other, or one of
// the group's own statements, loses the transaction.
func (g *groupRun) settle(err error) error {
	if g.p == nil {
		return err
	}
	df := g.p.TakeFailure()
	if df == nil {
		return err
	}
	return g.rewind(df)
}

// rewind undoes the group back to the start of the member whose held
// statement failed: the engine skipped everything sent after it, so the
// last savepoint it took is that member's. The member fails with its
// statement's error; every member run after it is retried (it may have
// read what the member wrote) and its appends' seqs are handed out again.
func (g *groupRun) rewind(df *DeferredFailure) error {
	j, _ := df.Owner.(*pushReq)
	at := -1
	for i, r := range g.group {
		if r == j {
			at = i
		}
	}
	if at < 0 {
		return df.Err // the group's own statement: the transaction is lost
	}
	if _, err := g.tx.ExecContext(context.WithoutCancel(j.ctx), "ROLLBACK TO SAVEPOINT "+groupSavepoint); err != nil {
		return err
	}
	j.ok, j.err, j.fnErr = false, df.Err, nil
	for _, r := range g.group[at+1:] {
		if r.ran {
			r.ok, r.err, r.fnErr = false, errGroupAborted, nil
		}
	}
	g.seq.known, g.seq.last = j.seqKnown, j.seqBase
	return nil
}

// groupSeq is a group's hold on its partition's commit seq (a SQLite
// group's per partition: groupMemo.seqs).
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

// gateRead is a member's serve gate read ahead, with its savepoint
// (pushTx.ReadServeGate uses it when it is the member's first statement,
// as it is in app/push's pipeline: the read then ran exactly where the
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
				Dest: []any{&ra.version, &ra.scopes, &ra.payload, columnVersions{&ra.cv}, &ra.tomb}}
			g.row = ra
		}
	}
	return g
}

// runMember runs one push of a partition group in the open savepoint. ok
// reports success (the savepoint stays open until the next member or the
// COMMIT); on failure the savepoint is rolled back to, clean for the next
// member. A non-nil broken means the transaction is lost.
func (g *groupRun) runMember(r *pushReq, ahead *gateRead) (ok bool, broken error) {
	s, tx, gs := g.s, g.tx, &g.seq
	ptx := &pushTx{s: s, partition: r.partition, writerVersion: r.opts.WriterVersion, actorID: r.opts.ActorID,
		discardTo: groupSavepoint, grp: g}
	ran := markRan{WriteTx: pushQuerier{tx: tx, db: s.db.DB}, ran: &ptx.ran}
	ptx.tx = ran
	if g.p != nil {
		ptx.tx = memberPipe{markRan: ran, p: g.p, owner: r}
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
			// Under the lock: good until a member stores that result.
			ptx.idem = &idemAhead{clientID: r.opts.ClientID, clientCommitID: r.opts.ClientCommitID, found: ahead.result.Valid,
				rec: ports.PushRecord{Result: []byte(ahead.result.String), ActorID: ahead.owner.String}}
		}
	}
	r.ran = true
	if g.p != nil && err == nil {
		gs.learn(ahead)
		if gs.known {
			ptx.seq = &seqAhead{base: gs.last, last: gs.last}
		}
	}
	r.seqKnown, r.seqBase = gs.known, gs.last
	if err == nil {
		err = callGuarded(r, func() error {
			err := r.fn(ptx)
			r.fnErr = err
			return err
		})
	}
	if g.p != nil {
		// A failure of r's own held statement was r's to handle (it was
		// reported to r, which failed or discarded its writes); one of
		// an earlier member's, or of the group's, was not.
		if df := g.p.TakeFailure(); df != nil && df.Owner != r {
			ptx.dropDeferred()
			return false, g.rewind(df)
		}
	}
	if err == nil && tx.Aborted() {
		err = internal("push", errStatementFailed)
	}
	if err == nil {
		r.ok = true
		r.wrote, r.bound, r.appended, r.epoch = ptx.written, ptx.bound, ptx.appended, ptx.epoch
		if ptx.seq != nil {
			gs.last = ptx.seq.last
		}
		return true, nil
	}
	r.err = err
	ptx.dropDeferred()
	if g.p != nil && !tx.Aborted() {
		// Held back too: its failure is the group's own (settle).
		g.p.Defer(nil, "ROLLBACK TO SAVEPOINT "+groupSavepoint, nil, nil)
		return false, nil
	}
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
