package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/trace"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// DefaultTouchInterval is the TouchInterval the server runs with: how
// stale a partition's last-seen time may be (refreshing it on every
// request would cost a write each); request heads are reused for at most
// this long (app/round).
const DefaultTouchInterval = time.Second

// Config builds a Store.
type Config struct {
	Dialect Dialect
	// DB is the bun handle of the write path (and of reads on PostgreSQL).
	DB *bun.DB
	// Reader runs reads outside write transactions (SQLite: the read pool
	// with cached prepared statements; PostgreSQL: the pool itself).
	Reader Querier
	// ReadDB is the bun handle reads use for model queries (may equal DB).
	ReadDB *bun.DB
	// Direct, when set, runs the commit window's range reads (catch-up)
	// and the request head instead of Reader.
	Direct DirectReader
	// NewEpoch mints log epochs; nil uses 16 random bytes in hex.
	NewEpoch func() string
	// TouchInterval skips the last-seen write of TouchPartition when the
	// stored value is more recent than this (0 writes every time).
	TouchInterval time.Duration
	// MaxRetries bounds retries of transient write conflicts (default 5).
	MaxRetries int
	// Now is the clock of the store's own stamps (the schema marker) and
	// of the group-commit window; nil is the wall clock. Row and log
	// stamps come from the callers.
	Now func() time.Time
	// Close releases the engine's handles.
	Close func() error
	// Tracer, when set, puts transactions and statements in spans (tracing.go).
	Tracer trace.TracerProvider
	// RecentLogBytes bounds the memory of the recent log, the newest
	// commits kept to answer pulls (recent.go): 0 → DefaultRecentLogBytes,
	// negative → none.
	RecentLogBytes int64
}

// Store implements ports.Storage over a Dialect.
type Store struct {
	d        Dialect
	db       *bun.DB
	rdb      *bun.DB
	rd       Querier
	direct   DirectReader
	types    Types
	epoch    func() string
	touch    int64
	retries  int
	now      func() time.Time
	closeFn  func() error
	closed   sync.Once
	closeErr error
	traced   bool

	cur      atomic.Pointer[schemaState]
	coreDone atomic.Bool

	// Statistics refresh after growth (see Analyzer).
	written     atomic.Int64
	nextAnalyze atomic.Int64
	analyzing   atomic.Bool
	bg          sync.WaitGroup

	sqlMu    sync.Mutex
	sqlCache map[string]string
	// shapes caches composed statements by shape (push.go).
	shapes  sync.Map
	nshapes atomic.Int64

	// pushes groups push transactions (nil: one transaction per push);
	// parts instead groups them per partition.
	pushes *pushBatcher
	parts  *batchSet

	// binds caches committed client-id bindings (bindings.go).
	binds bindingCache
	// recent holds each partition's newest commits (recent.go); nil: none.
	recent *recentLog
	// heads are the request head's four statements, rebound once
	// (head.go: every request reads one).
	heads [4]string
}

var _ ports.Storage = (*Store)(nil)

var _ ports.TableScanner = (*Store)(nil)

// New builds a Store; the caller runs EnsureSchema before row operations.
func New(c Config) *Store {
	if c.Tracer != nil {
		c = traceStorage(c)
	}
	s := &Store{
		d: c.Dialect, db: c.DB, rdb: c.ReadDB, rd: c.Reader, direct: c.Direct, types: c.Dialect.Types(),
		epoch: c.NewEpoch, touch: c.TouchInterval.Milliseconds(), retries: c.MaxRetries,
		closeFn: c.Close, sqlCache: map[string]string{}, now: c.Now, traced: c.Tracer != nil,
		recent: newRecentLog(c.RecentLogBytes),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rdb == nil {
		s.rdb = s.db
	}
	if s.epoch == nil {
		s.epoch = randomEpoch
	}
	if s.retries <= 0 {
		s.retries = 5
	}
	for i := range s.heads {
		s.heads[i] = s.d.Rebind(headQuery(i&1 != 0, i&2 != 0))
	}
	s.nextAnalyze.Store(firstAnalyze)
	if g, ok := c.Dialect.(PartitionGroupCommitter); ok {
		if n, open := g.PushBatch(); n > 1 && open > 0 {
			s.parts = &batchSet{g: g, maxPushes: n, maxOpen: open, now: s.now, m: map[string]*pushBatcher{}}
		}
	} else if g, ok := c.Dialect.(GroupCommitter); ok {
		if n, open := g.PushBatch(); n > 1 && open > 0 {
			s.pushes = &pushBatcher{maxPushes: n, maxOpen: open, now: s.now, mu: new(sync.Mutex), g: g}
		}
	}
	return s
}

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.d }

// DB returns the write-path bun handle (tests and tooling).
func (s *Store) DB() *bun.DB { return s.db }

// Close releases the engine's handles; later calls return the first result.
func (s *Store) Close() error {
	s.closed.Do(func() {
		s.bg.Wait()
		if s.closeFn != nil {
			s.closeErr = s.closeFn()
		}
	})
	return s.closeErr
}

func randomEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// q rebinds a '?' statement for the dialect, memoized by text.
func (s *Store) q(query string) string {
	s.sqlMu.Lock()
	out, ok := s.sqlCache[query]
	if !ok {
		out = s.d.Rebind(query)
		if len(s.sqlCache) < 4096 {
			s.sqlCache[query] = out
		}
	}
	s.sqlMu.Unlock()
	return out
}

// internal wraps an engine failure as an internal error: the engine text
// stays in the reason and the cause, never in the client-facing message.
func internal(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *syncerr.Error
	if errors.As(err, &se) {
		return err
	}
	var ce *ports.ConstraintError
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("storage: %s: %w", op, err)
	}
	return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("storage: %s: %w", op, err))
}

// writeTx runs fn in a write transaction, optionally holding the partition
// lock, committing on nil and retrying transient conflicts.
func (s *Store) writeTx(ctx context.Context, op, partition string, fn func(tx WriteTx) error) error {
	ctx = s.withOp(ctx, op)
	for attempt := 0; ; attempt++ {
		err := s.writeTxOnce(ctx, partition, fn)
		if err == nil {
			return nil
		}
		if attempt+1 < s.retries && s.d.Retryable(err) && ctx.Err() == nil {
			continue
		}
		return internal(op, err)
	}
}

// writeOne runs one write statement: autocommit where the dialect allows
// (one round trip on PostgreSQL), else in a write transaction, grouped with
// pushes on a GroupCommitter dialect (pushbatch.go).
func (s *Store) writeOne(ctx context.Context, op string, fn func(q Querier) error) error {
	q := s.d.Autocommit()
	ctx = s.withOp(ctx, op)
	if q == nil && s.pushes != nil {
		return s.writeGrouped(ctx, op, fn)
	}
	if q == nil {
		return s.writeTx(ctx, op, "", func(tx WriteTx) error { return fn(tx) })
	}
	for attempt := 0; ; attempt++ {
		err := fn(q)
		if err == nil || attempt+1 >= s.retries || !s.d.Retryable(err) || ctx.Err() != nil {
			return internal(op, err)
		}
	}
}

func (s *Store) writeTxOnce(ctx context.Context, partition string, fn func(tx WriteTx) error) (err error) {
	tx, err := s.d.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if partition != "" {
		if err = s.d.LockPartition(ctx, tx, partition); err != nil {
			return err
		}
	}
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// schemaState is what EnsureSchema established: the running schema and
// per-table prepared SQL.
type schemaState struct {
	version int32
	layouts []byte
	tables  map[string]*tableSQL
}

func (s *Store) table(name string) (*tableSQL, error) {
	st := s.cur.Load()
	if st == nil {
		return nil, syncerr.Newf(syncerr.UnknownTable, "table %q: storage schema not ensured", name)
	}
	t, ok := st.tables[name]
	if !ok {
		return nil, syncerr.Newf(syncerr.UnknownTable, "table %q is not in the storage schema", name)
	}
	return t, nil
}

// scanOne scans one row, mapping sql.ErrNoRows to ok=false.
func scanOne(row interface{ Scan(...any) error }, dest ...any) (bool, error) {
	err := row.Scan(dest...)
	if errors.Is(err, sqlErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// placeholders renders "?,?,…" for n values.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	b := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '?')
	}
	return string(b)
}

// validateTable checks a schema table has what storage needs.
func validateTable(t *schema.Table) error {
	if t == nil || t.Name == "" {
		return syncerr.Newf(syncerr.SchemaInvalid, "storage: table without a name")
	}
	return nil
}

// firstAnalyze is the written-row count of the first statistics refresh;
// each later one waits for four times as many.
const firstAnalyze = 2000

// noteWrites counts rows written by committed transactions and, for an
// Analyzer dialect, refreshes statistics in the background whenever the
// count crosses the next threshold.
func (s *Store) noteWrites(n int) {
	a, ok := s.d.(Analyzer)
	if !ok || n <= 0 {
		return
	}
	total := s.written.Add(int64(n))
	next := s.nextAnalyze.Load()
	if total < next || !s.nextAnalyze.CompareAndSwap(next, next*4) || !s.analyzing.CompareAndSwap(false, true) {
		return
	}
	var tables []string
	if st := s.cur.Load(); st != nil {
		for name := range st.tables {
			tables = append(tables, name)
		}
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.analyzing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, stmt := range a.AnalyzeStatements(tables) {
			if _, err := s.db.DB.ExecContext(ctx, stmt); err != nil {
				return // statistics are an optimization; autovacuum catches up
			}
		}
	}()
}

// Ping implements ports.HealthChecker: SELECT 1 on the read path (the
// SQLite read pool; the PostgreSQL pool), which never queues behind the
// writer. One failure is retried at once: after a database restart the
// first query on each stale pooled connection fails before the pool
// drops it, which says nothing about the database.
func (s *Store) Ping(ctx context.Context) error {
	var err error
	for range 2 {
		var one int
		if err = s.rd.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil || ctx.Err() != nil {
			break
		}
	}
	return internal("ping", err)
}
