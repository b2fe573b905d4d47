package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
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
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		w.reset(err)
		<-w.sem
		return nil, err
	}
	return &writeTx{w: w}, nil
}

// reset drops a broken connection and its statements.
func (w *writer) reset(err error) {
	if !errors.Is(err, driver.ErrBadConn) && !errors.Is(err, sql.ErrConnDone) {
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
	if err != nil {
		t.w.reset(err)
	}
	<-t.w.sem
	return err
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
