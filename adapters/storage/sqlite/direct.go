package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
)

// directReads is the store's sqlstore.DirectReader: read-only statements
// on connections of its own, through the SQLite C API that modernc
// transpiles, instead of database/sql. On a 1,000-row range read that
// path costs ~5× the engine's own work (BenchmarkDirectRead): modernc
// opens every connection SQLITE_OPEN_FULLMUTEX, so each of the two or
// three calls per column value takes and releases the connection's
// recursive mutex, and every value is boxed, copied and converted again
// by Scan. These connections are NOMUTEX (a connection is held by one
// goroutine at a time, which is what SQLite's multi-thread mode asks) and
// hand out column bytes borrowed from SQLite's row.
type directReads struct {
	path string
	busy time.Duration
	// slots bounds the open connections; idle holds the unused ones.
	slots  chan struct{}
	mu     sync.Mutex
	idle   []*directConn
	closed bool
}

var _ sqlstore.DirectReader = (*directReads)(nil)

// directConn is one connection: its libc thread state, handle, cached
// statements and a scratch buffer in C memory for text arguments.
type directConn struct {
	tls     *libc.TLS
	db      uintptr
	stmts   map[string]uintptr
	scratch uintptr
	cap     int
	stmt    uintptr // the statement being stepped (DirectRow's)
}

// maxDirectStmts bounds a connection's statement cache: the store reads
// a handful of texts this way.
const maxDirectStmts = 64

// directCheckEvery is how many rows pass between checks of the context.
const directCheckEvery = 256

func newDirectReads(path string, busy time.Duration, conns int) *directReads {
	return &directReads{path: path, busy: busy, slots: make(chan struct{}, conns)}
}

// errDirectClosed is returned once the store is closed.
var errDirectClosed = errors.New("sqlite: direct reads closed")

// directError is an SQLite result code and the engine's message; it stays
// internal (the store maps it like any engine error).
type directError struct {
	code int
	msg  string
}

func (e *directError) Error() string { return fmt.Sprintf("sqlite: %s (%d)", e.msg, e.code) }

// ReadDirect implements sqlstore.DirectReader.
func (d *directReads) ReadDirect(ctx context.Context, query string, args []any, each func(sqlstore.DirectRow) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	err = c.read(ctx, query, args, each)
	d.release(c, err)
	return err
}

func (d *directReads) acquire(ctx context.Context) (*directConn, error) {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		<-d.slots
		return nil, errDirectClosed
	}
	if n := len(d.idle); n > 0 {
		c := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		return c, nil
	}
	d.mu.Unlock()
	c, err := openDirect(d.path, d.busy)
	if err != nil {
		<-d.slots
		return nil, err
	}
	return c, nil
}

// release returns c to the pool, or closes it after an engine error (a
// fresh connection costs little beside the read that failed) or once the
// pool is closed.
func (d *directReads) release(c *directConn, err error) {
	var de *directError
	d.mu.Lock()
	keep := !d.closed && !errors.As(err, &de)
	if keep {
		d.idle = append(d.idle, c)
	}
	d.mu.Unlock()
	if !keep {
		c.close()
	}
	<-d.slots
}

// Close closes the idle connections; those in use close on release.
func (d *directReads) Close() {
	d.mu.Lock()
	d.closed = true
	idle := d.idle
	d.idle = nil
	d.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

func openDirect(path string, busy time.Duration) (*directConn, error) {
	c := &directConn{tls: libc.NewTLS(), stmts: map[string]uintptr{}}
	if err := c.open(path, busy); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *directConn) open(path string, busy time.Duration) error {
	cpath, err := libc.CString(fileURI(path))
	if err != nil {
		return err
	}
	pdb := libc.Xmalloc(c.tls, 8)
	// No SQLITE_OPEN_CREATE: the writer creates the file; query_only
	// below keeps this connection from ever writing to it.
	rc := sqlite3.Xsqlite3_open_v2(c.tls, cpath, pdb, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_NOMUTEX|sqlite3.SQLITE_OPEN_URI, 0)
	c.db = *(*uintptr)(cmem(pdb))
	libc.Xfree(c.tls, pdb)
	libc.Xfree(c.tls, cpath)
	if rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	sqlite3.Xsqlite3_extended_result_codes(c.tls, c.db, 1)
	for _, p := range []string{fmt.Sprintf("PRAGMA busy_timeout=%d", busy.Milliseconds()), "PRAGMA query_only=1"} {
		if err := c.exec(p); err != nil {
			return err
		}
	}
	return nil
}

func (c *directConn) exec(sql string) error {
	csql, err := libc.CString(sql)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, csql)
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, csql, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	return nil
}

func (c *directConn) err(rc int32) error {
	msg := "unknown error"
	if c.db != 0 {
		msg = libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
	}
	return &directError{code: int(rc), msg: msg}
}

// prepared returns the cached statement for query, preparing it once.
func (c *directConn) prepared(query string) (uintptr, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	cq, err := libc.CString(query)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(c.tls, cq)
	pst := libc.Xmalloc(c.tls, 8)
	defer libc.Xfree(c.tls, pst)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, cq, -1, pst, 0); rc != sqlite3.SQLITE_OK {
		return 0, c.err(rc)
	}
	st := *(*uintptr)(cmem(pst))
	if len(c.stmts) < maxDirectStmts {
		c.stmts[query] = st
	}
	return st, nil
}

func (c *directConn) read(ctx context.Context, query string, args []any, each func(sqlstore.DirectRow) error) (err error) {
	st, err := c.prepared(query)
	if err != nil {
		return err
	}
	// No sqlite3_clear_bindings after the read: bind sets every parameter
	// each time, and clearing expires a statement whose plan depends on a
	// parameter being 0 or 1, so that its next step prepares it afresh
	// (the request head, read at schema version 1, spent four fifths of
	// its time in the parser).
	defer func() {
		sqlite3.Xsqlite3_reset(c.tls, st)
		if _, cached := c.stmts[query]; !cached {
			sqlite3.Xsqlite3_finalize(c.tls, st)
		}
		c.stmt = 0
	}()
	if err := c.bind(st, args); err != nil {
		return err
	}
	c.stmt = st
	for n := 1; ; n++ {
		switch rc := sqlite3.Xsqlite3_step(c.tls, st); rc {
		case sqlite3.SQLITE_ROW:
			if err := each(c); err != nil {
				return err
			}
		case sqlite3.SQLITE_DONE:
			return nil
		default:
			return c.err(rc)
		}
		if n%directCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
}

// bind binds args; text goes through the scratch buffer and is copied by
// SQLite (SQLITE_TRANSIENT), so the buffer is reused by the next one.
func (c *directConn) bind(st uintptr, args []any) error {
	if want := int(sqlite3.Xsqlite3_bind_parameter_count(c.tls, st)); want != len(args) {
		return fmt.Errorf("sqlite: direct read: %d arguments for %d parameters", len(args), want)
	}
	for i, a := range args {
		var rc int32
		switch v := a.(type) {
		case int64:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, st, int32(i+1), v)
		case int:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, st, int32(i+1), int64(v))
		case int32:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, st, int32(i+1), int64(v))
		case string:
			p := c.text(v)
			if p == 0 {
				return errors.New("sqlite: direct read: out of memory")
			}
			rc = sqlite3.Xsqlite3_bind_text(c.tls, st, int32(i+1), p, int32(len(v)), ^uintptr(0))
		default:
			return fmt.Errorf("sqlite: direct read: argument %d is %T", i+1, a)
		}
		if rc != sqlite3.SQLITE_OK {
			return c.err(rc)
		}
	}
	return nil
}

// text copies s into the scratch buffer (grown as needed); never 0, which
// SQLite would bind as NULL.
func (c *directConn) text(s string) uintptr {
	if c.scratch == 0 || len(s) > c.cap {
		if c.scratch != 0 {
			libc.Xfree(c.tls, c.scratch)
		}
		c.cap = max(64, 2*len(s))
		if c.scratch = libc.Xmalloc(c.tls, uint64(c.cap)); c.scratch == 0 {
			c.cap = 0
			return 0
		}
	}
	copy(unsafe.Slice((*byte)(cmem(c.scratch)), len(s)), s)
	return c.scratch
}

// Int64 implements sqlstore.DirectRow.
func (c *directConn) Int64(col int) (int64, bool) {
	if sqlite3.Xsqlite3_column_type(c.tls, c.stmt, int32(col)) == sqlite3.SQLITE_NULL {
		return 0, false
	}
	return sqlite3.Xsqlite3_column_int64(c.tls, c.stmt, int32(col)), true
}

// Bytes implements sqlstore.DirectRow.
func (c *directConn) Bytes(col int) []byte {
	if sqlite3.Xsqlite3_column_type(c.tls, c.stmt, int32(col)) == sqlite3.SQLITE_NULL {
		return nil
	}
	// blob before bytes, the order SQLite documents for a stable length.
	p := sqlite3.Xsqlite3_column_blob(c.tls, c.stmt, int32(col))
	n := sqlite3.Xsqlite3_column_bytes(c.tls, c.stmt, int32(col))
	if p == 0 || n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(cmem(p)), n)
}

func (c *directConn) close() {
	for _, st := range c.stmts {
		sqlite3.Xsqlite3_finalize(c.tls, st)
	}
	c.stmts = nil
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.db = 0
	}
	if c.scratch != 0 {
		libc.Xfree(c.tls, c.scratch)
		c.scratch = 0
	}
	c.tls.Close()
}

// cmem is C memory at p (libc's allocator, outside the Go heap) as a
// pointer; the indirection keeps vet's uintptr check quiet for memory the
// Go collector never owns.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
