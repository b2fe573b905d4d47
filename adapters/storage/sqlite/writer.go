package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
)

// writer is the one write connection. Every write transaction holds it
// exclusively (BEGIN IMMEDIATE), so statements are prepared once on it and
// reused across transactions.
type writer struct {
	db  *sql.DB
	sem chan struct{} // one slot: held for a whole transaction, it guards conn and stmts

	conn  *sql.Conn
	stmts map[string]*sql.Stmt

	commits    atomic.Int64                 // COMMITs that succeeded (tests)
	commitHook atomic.Pointer[func() error] // fails a COMMIT before it runs (tests)
}

func newWriter(db *sql.DB) *writer {
	return &writer{db: db, sem: make(chan struct{}, 1), stmts: map[string]*sql.Stmt{}}
}

// begin waits for the writer (honouring ctx) and opens BEGIN IMMEDIATE.
func (w *writer) begin(ctx context.Context) (*writeTx, error) {
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if w.conn == nil {
		c, err := w.db.Conn(ctx)
		if err != nil {
			<-w.sem
			return nil, err
		}
		w.conn = c
	}
	// BEGIN runs without the caller's cancellation: an interrupt racing a
	// BEGIN that already took effect would report failure while leaving
	// the transaction open on the shared connection, and every later
	// BEGIN would fail. Waiting for the lock is bounded by busy_timeout;
	// a caller cancelled meanwhile is rolled back below.
	if err := w.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		w.reset(err)
		<-w.sem
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		_ = (&writeTx{w: w}).end("ROLLBACK")
		return nil, err
	}
	return &writeTx{w: w}, nil
}

// exec runs a transaction-control statement, uncancellable. A connection
// found inside a transaction no open writeTx owns (left by a failure that
// could not be rolled back) is rolled back and the statement retried once.
func (w *writer) exec(ctx context.Context, stmt string) error {
	ctx = context.WithoutCancel(ctx)
	_, err := w.conn.ExecContext(ctx, stmt)
	if err != nil && strings.Contains(err.Error(), "within a transaction") {
		if _, rerr := w.conn.ExecContext(ctx, "ROLLBACK"); rerr == nil {
			_, err = w.conn.ExecContext(ctx, stmt)
		}
	}
	return err
}

// reset drops a broken connection and its statements.
func (w *writer) reset(err error) {
	if !errors.Is(err, driver.ErrBadConn) && !errors.Is(err, sql.ErrConnDone) {
		return
	}
	w.drop()
}

// drop closes the connection and its statements; the next begin opens a
// fresh one.
func (w *writer) drop() {
	if w.conn == nil {
		return
	}
	for k, st := range w.stmts {
		_ = st.Close()
		delete(w.stmts, k)
	}
	_ = w.conn.Close()
	w.conn = nil
}

func (w *writer) close() {
	w.sem <- struct{}{}
	for k, st := range w.stmts {
		_ = st.Close()
		delete(w.stmts, k)
	}
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// writeTx is one open write transaction on the writer connection.
type writeTx struct {
	w    *writer
	done bool
}

func (t *writeTx) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st := t.w.stmts[q]; st != nil {
		return st, nil
	}
	st, err := t.w.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(t.w.stmts) < 2048 {
		t.w.stmts[q] = st
	}
	return st, nil
}

func (t *writeTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if len(args) == 0 {
		return t.w.conn.ExecContext(ctx, q)
	}
	st, err := t.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (t *writeTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if len(args) == 0 {
		return t.w.conn.QueryContext(ctx, q)
	}
	st, err := t.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (t *writeTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if len(args) > 0 {
		if st, err := t.stmt(ctx, q); err == nil {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return t.w.conn.QueryRowContext(ctx, q, args...)
}

func (t *writeTx) end(stmt string) error {
	if t.done {
		return sql.ErrTxDone
	}
	t.done = true
	_, err := t.w.conn.ExecContext(context.Background(), stmt)
	if err != nil && !noTransaction(err) {
		// The transaction's state is unknown: drop the connection (closing
		// it discards any open transaction) so the next writer starts clean.
		t.w.drop()
	} else {
		// SQLite already rolled the transaction back (an interrupted or
		// failed statement can do that); nothing is left open.
		err = nil
	}
	<-t.w.sem
	return err
}

// noTransaction reports SQLite's answer to a ROLLBACK or COMMIT after the
// engine already ended the transaction itself.
func noTransaction(err error) bool {
	return strings.Contains(err.Error(), "no transaction is active")
}

func (t *writeTx) Commit() error {
	if err := func() error {
		if t.done {
			return sql.ErrTxDone
		}
		if h := t.w.commitHook.Load(); h != nil {
			if err := (*h)(); err != nil {
				return err
			}
		}
		_, err := t.w.conn.ExecContext(context.Background(), "COMMIT")
		return err
	}(); err != nil {
		// A failed COMMIT leaves the transaction open: roll it back.
		if !t.done {
			_ = t.end("ROLLBACK")
		}
		return err
	}
	t.done = true
	t.w.commits.Add(1)
	<-t.w.sem
	return nil
}

func (t *writeTx) Rollback() error { return t.end("ROLLBACK") }
