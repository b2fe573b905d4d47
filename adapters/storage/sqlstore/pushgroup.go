package sqlstore

import (
	"context"
	"errors"
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
// and the COMMIT. The partition lock is taken at the top level, outside
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
	tx, err := b.set.g.BeginGroup(self.ctx, self.partition, groupSavepoint)
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
		if pending {
			if broken = releaseAndSave(r.ctx, tx); broken != nil {
				r.err = broken
				break
			}
			pending = false
		}
		if pending, broken = s.runMember(tx, r); broken != nil {
			break
		}
	}
	b.finish(tx, self, group, broken)
}

// releaseAndSave ends the previous member's savepoint and opens the next
// member's.
func releaseAndSave(ctx context.Context, tx GroupTx) error {
	bg := context.WithoutCancel(ctx)
	if tx.MultiStatement() {
		_, err := tx.ExecContext(bg, "RELEASE "+groupSavepoint+"; SAVEPOINT "+groupSavepoint)
		return err
	}
	if _, err := tx.ExecContext(bg, "RELEASE "+groupSavepoint); err != nil {
		return err
	}
	_, err := tx.ExecContext(bg, "SAVEPOINT "+groupSavepoint)
	return err
}

// runMember runs one push of a partition group in the open savepoint. ok
// reports success (the savepoint stays open until the next member or the
// COMMIT); on failure the savepoint is rolled back to, clean for the next
// member. A non-nil broken means the transaction is lost.
func (s *Store) runMember(tx GroupTx, r *pushReq) (ok bool, broken error) {
	q := pushQuerier{tx: tx, db: s.db.DB}
	ptx := &pushTx{s: s, tx: q, partition: r.partition, writerVersion: r.opts.WriterVersion, actorID: r.opts.ActorID,
		discardTo: groupSavepoint}
	err := callGuarded(r, func() error {
		err := r.fn(ptx)
		r.fnErr = err
		return err
	})
	if err == nil && tx.Aborted() {
		err = internal("push", errStatementFailed)
	}
	if err == nil {
		r.ok = true
		r.wrote, r.bound = ptx.written, ptx.bound
		return true, nil
	}
	r.err = err
	if _, err := tx.ExecContext(context.WithoutCancel(r.ctx), "ROLLBACK TO SAVEPOINT "+groupSavepoint); err != nil {
		return false, err
	}
	return false, nil
}
