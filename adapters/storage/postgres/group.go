package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
)

// PushBatch makes the dialect a sqlstore.PartitionGroupCommitter: pushes to
// one partition serialize on its row lock anyway, so those that queue
// behind a running one share its successor's transaction and COMMIT.
func (d *dialect) PushBatch() (int, time.Duration) { return d.group, d.groupOpen }

// BeginGroup implements sqlstore.PartitionGroupCommitter: BEGIN, the
// partition lock (the row created first when missing; the insert takes no
// lock when the row exists), the first member's savepoint and the read
// ahead go as one pipeline, one round trip. The transaction runs on a
// connection of its own, taken from the pool, with transaction control in
// its own hands (not database/sql's, which would roll the whole group back
// when the leader's context ends).
func (d *dialect) BeginGroup(ctx context.Context, partition, savepoint string, ahead ...*sqlstore.ReadAhead) (sqlstore.GroupTx, error) {
	conn, err := d.pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	t := &groupTx{conn: conn, savepoint: savepoint}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("INSERT INTO sync_partitions(partition) VALUES ($1) ON CONFLICT (partition) DO NOTHING", partition)
	b.Queue("SELECT 1 FROM sync_partitions WHERE partition=$1 FOR UPDATE", partition)
	b.Queue("SAVEPOINT " + savepoint)
	// The wait for the lock honours ctx: a cancellation drops the
	// connection, and nothing but this push is in the group yet.
	if err := t.send(ctx, b, ahead); err != nil {
		t.end("ROLLBACK")
		return nil, err
	}
	return t, nil
}

// groupTx is a push group's transaction on its pooled connection. It
// holds statements back (sqlstore.Pipeliner) and sends them ahead of the
// next statement, in its round trip.
type groupTx struct {
	conn      *sql.Conn
	savepoint string
	done      bool
	held      []heldStmt
	// failed is the first held statement failure a send met since the
	// last TakeFailure: a later one cannot hide it.
	failed *sqlstore.DeferredFailure
}

// heldStmt is a statement held back, with its owner and the mapping of
// its failure.
type heldStmt struct {
	owner any
	query string
	args  []any
	fail  func(error) error
}

// failure records and returns h's failure.
func (t *groupTx) failure(h heldStmt, err error) *sqlstore.DeferredFailure {
	if h.fail != nil {
		err = h.fail(err)
	}
	df := &sqlstore.DeferredFailure{Owner: h.owner, Err: err}
	if t.failed == nil {
		t.failed = df
	}
	return df
}

var (
	_ sqlstore.GroupTx   = (*groupTx)(nil)
	_ sqlstore.Pipeliner = (*groupTx)(nil)
)

// flush sends what is held back on its own, before a statement that
// cannot join the pipeline (database/sql's own calls).
func (t *groupTx) flush(ctx context.Context) error {
	if len(t.held) == 0 {
		return nil
	}
	return t.send(ctx, &pgx.Batch{}, nil)
}

func (t *groupTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.conn.ExecContext(ctx, q, args...)
}

func (t *groupTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.conn.QueryContext(ctx, q, args...)
}

// QueryRowContext sends what is held back first; should that fail, the
// transaction is aborted and the row's own statement reports it. The push
// path reads single rows through QueryOne instead.
func (t *groupTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	_ = t.flush(ctx)
	return t.conn.QueryRowContext(ctx, q, args...)
}

// Defer implements sqlstore.Pipeliner.
func (t *groupTx) Defer(owner any, query string, args []any, fail func(error) error) {
	t.held = append(t.held, heldStmt{owner: owner, query: query, args: args, fail: fail})
}

// DropDeferred implements sqlstore.Pipeliner.
func (t *groupTx) DropDeferred(owner any) {
	kept := t.held[:0]
	for _, h := range t.held {
		if h.owner != owner {
			kept = append(kept, h)
		}
	}
	clear(t.held[len(kept):])
	t.held = kept
}

// TakeFailure implements sqlstore.Pipeliner.
func (t *groupTx) TakeFailure() *sqlstore.DeferredFailure {
	df := t.failed
	t.failed = nil
	return df
}

// QueryOne implements sqlstore.Pipeliner: the held statements and q in
// one round trip.
func (t *groupTx) QueryOne(ctx context.Context, q string, args []any, dest ...any) (bool, error) {
	ra := &sqlstore.ReadAhead{Query: q, Args: args, Dest: dest}
	err := t.send(ctx, &pgx.Batch{}, []*sqlstore.ReadAhead{ra})
	var df *sqlstore.DeferredFailure
	switch {
	case errors.As(err, &df):
		return false, df.Err // its owner's, the group learns (TakeFailure)
	case err != nil:
		return false, err
	case errors.Is(ra.Err, pgx.ErrNoRows):
		return false, nil
	default:
		return ra.Err == nil, ra.Err
	}
}

// NextSavepoint implements sqlstore.GroupTx: what the members before held
// back, RELEASE, SAVEPOINT and the reads ahead as one pipeline. A held
// statement's failure is a *sqlstore.DeferredFailure naming its owner.
func (t *groupTx) NextSavepoint(ctx context.Context, savepoint string, ahead ...*sqlstore.ReadAhead) error {
	b := &pgx.Batch{}
	b.Queue("RELEASE " + savepoint)
	b.Queue("SAVEPOINT " + savepoint)
	return t.send(ctx, b, ahead)
}

// send runs the held statements, b's, then the reads ahead, as one
// pipeline. A held statement's failure is a *sqlstore.DeferredFailure
// carrying its mapped error; b's failure is returned as is; a read's own
// goes to its Err, and the reads after it (which the engine then skips)
// carry the same.
func (t *groupTx) send(ctx context.Context, b *pgx.Batch, ahead []*sqlstore.ReadAhead) error {
	held := t.held
	t.held = nil
	all := &pgx.Batch{}
	for _, h := range held {
		all.Queue(h.query, h.args...)
	}
	for _, q := range b.QueuedQueries {
		all.Queue(q.SQL, q.Arguments...)
	}
	n := len(b.QueuedQueries)
	for _, a := range ahead {
		all.Queue(a.Query, a.Args...)
	}
	return t.conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres: unexpected driver connection %T", dc)
		}
		br := c.Conn().SendBatch(ctx, all)
		for _, h := range held {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return t.failure(h, err)
			}
		}
		for range n {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return err
			}
		}
		for i, a := range ahead {
			if a.Err = br.QueryRow().Scan(a.Dest...); a.Err != nil {
				for _, later := range ahead[i+1:] {
					later.Err = a.Err
				}
				_ = br.Close() // reports a.Err again
				return nil
			}
		}
		return br.Close()
	})
}

// txStatus is the backend's transaction status from its last
// ReadyForQuery ('I' idle, 'T' in a transaction, 'E' failed), or 0 when
// the connection is unusable.
func (t *groupTx) txStatus() byte {
	var st byte
	_ = t.conn.Raw(func(dc any) error {
		if c, ok := dc.(*stdlib.Conn); ok && !c.Conn().IsClosed() {
			st = c.Conn().PgConn().TxStatus()
		}
		return nil
	})
	return st
}

func (t *groupTx) Aborted() bool { return t.txStatus() != 'T' }

// errCommitRolledBack is a COMMIT the server answered with a rollback.
var errCommitRolledBack = errors.New("postgres: commit of the push group was rolled back")

// Commit sends what the last member held back with the COMMIT. Should a
// held statement fail, nothing is committed and the transaction stays
// open: a *sqlstore.DeferredFailure says so, the caller rolls back to the
// last savepoint and commits again.
func (t *groupTx) Commit() error { return t.CommitReading(nil, nil) }

var _ sqlstore.GateCommitter = (*groupTx)(nil)

// CommitReading implements sqlstore.GateCommitter: the held statements,
// the savepoint's RELEASE and closing (when there is one), the COMMIT and
// after's query in one round trip; after runs only once the COMMIT
// succeeded, outside the transaction. The engine skips what follows a
// failed statement up to the batch's end, COMMIT included.
func (t *groupTx) CommitReading(closing *sqlstore.Statement, after *sqlstore.ReadAhead) error {
	if t.done {
		return sql.ErrTxDone
	}
	var tag string
	held := t.held
	t.held = nil
	err := t.conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres: unexpected driver connection %T", dc)
		}
		b := &pgx.Batch{}
		for _, h := range held {
			b.Queue(h.query, h.args...)
		}
		if closing != nil {
			b.Queue("RELEASE " + t.savepoint)
			b.Queue(closing.SQL, closing.Args...)
		}
		b.Queue("COMMIT")
		if after != nil {
			b.Queue(after.Query, after.Args...)
		}
		br := c.Conn().SendBatch(context.Background(), b)
		for _, h := range held {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return t.failure(h, err)
			}
		}
		if closing != nil {
			for range 2 {
				if _, err := br.Exec(); err != nil {
					_ = br.Close()
					return err
				}
			}
		}
		ct, err := br.Exec()
		tag = ct.String()
		if err == nil && after != nil && tag == "COMMIT" {
			after.Err = br.QueryRow().Scan(after.Dest...)
		}
		if cerr := br.Close(); err == nil && (after == nil || after.Err == nil) {
			err = cerr
		}
		return err
	})
	var df *sqlstore.DeferredFailure
	if errors.As(err, &df) {
		return err
	}
	if err == nil && tag != "COMMIT" {
		err = errCommitRolledBack
	}
	t.end("")
	return err
}

func (t *groupTx) Rollback() error {
	if t.done {
		return sql.ErrTxDone
	}
	t.held = nil
	t.end("ROLLBACK")
	return nil
}

// end runs stmt (if any) and gives the connection back: to the pool when
// it is idle outside a transaction, else closed, so no transaction
// outlives the group.
func (t *groupTx) end(stmt string) {
	t.done = true
	if stmt != "" && t.txStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = t.conn.ExecContext(ctx, stmt)
		cancel()
	}
	if t.txStatus() != 'I' {
		discardConn(t.conn)
		return
	}
	_ = t.conn.Close()
}
