package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds a StmtDB's prepared statements.
const maxCachedStmts = 2048

// StmtDB is a pool whose statements with arguments run as prepared
// statements, prepared once per text (and per connection by database/sql).
// Statements without arguments (DDL) run directly.
type StmtDB struct {
	DB *sql.DB
	mu sync.RWMutex
	m  map[string]*sql.Stmt
}

// NewStmtDB wraps db.
func NewStmtDB(db *sql.DB) *StmtDB { return &StmtDB{DB: db, m: map[string]*sql.Stmt{}} }

func (c *StmtDB) stmt(ctx context.Context, q string) *sql.Stmt {
	c.mu.RLock()
	st := c.m[q]
	c.mu.RUnlock()
	if st != nil {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st = c.m[q]; st != nil || len(c.m) >= maxCachedStmts {
		return st
	}
	st, err := c.DB.PrepareContext(ctx, q)
	if err != nil {
		return nil // run unprepared; the error surfaces there
	}
	c.m[q] = st
	return st
}

// ExecContext implements Querier.
func (c *StmtDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if len(args) > 0 {
		if st := c.stmt(ctx, q); st != nil {
			return st.ExecContext(ctx, args...)
		}
	}
	return c.DB.ExecContext(ctx, q, args...)
}

// QueryContext implements Querier.
func (c *StmtDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if len(args) > 0 {
		if st := c.stmt(ctx, q); st != nil {
			return st.QueryContext(ctx, args...)
		}
	}
	return c.DB.QueryContext(ctx, q, args...)
}

// QueryRowContext implements Querier.
func (c *StmtDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if len(args) > 0 {
		if st := c.stmt(ctx, q); st != nil {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return c.DB.QueryRowContext(ctx, q, args...)
}

// Close closes the cached statements.
func (c *StmtDB) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.m {
		_ = st.Close()
		delete(c.m, k)
	}
}
