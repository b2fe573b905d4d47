// Package memory is an in-memory ports.Storage with the observable
// behaviour of the SQL engines: partition-serialized push transactions that
// publish all-or-nothing, dense commit seqs, scope-filtered windows and
// scans, tombstones, blob references, reactions, first-writer-wins
// idempotency, epoch-bound pruning, client records, backfill checkpoints
// with the writer fence and the serve gate, and EnsureSchema with the
// stored-layout checks. It backs the app layer's unit tests and runs the
// storage contract suite.
//
// Several Store handles may share one database (Reopen), the way several
// processes share one SQL database: each handle keeps its own ensured
// schema.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// db is the shared "database".
type db struct {
	// schemaLock is the migration barrier: a schema bump holds it
	// exclusively; partition writers hold it shared (PostgreSQL's
	// LOCK TABLE sync_partitions IN EXCLUSIVE MODE).
	schemaLock sync.RWMutex

	mu    sync.Mutex // guards everything below
	parts map[string]*partition
	locks map[string]chan struct{}

	markerSet     bool
	markerVersion int32
	layouts       map[string]schema.Layout
	tables        map[string]*physTable
}

// Store is one handle on an in-memory database.
type Store struct {
	db *db

	now func() time.Time

	mu     sync.Mutex
	schema *schema.Schema
	closed bool
}

var _ ports.Storage = (*Store)(nil)

var _ ports.TableScanner = (*Store)(nil)

// Options configure a new in-memory database.
type Options struct {
	// Now is the clock of the store's own stamps (the schema marker); nil
	// is the wall clock. Row and log stamps come from the callers.
	Now func() time.Time
}

// New returns a handle on a new, empty database on the wall clock.
func New() *Store { return NewWithOptions(Options{}) }

// NewWithOptions returns a handle on a new, empty database.
func NewWithOptions(o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{now: o.Now, db: &db{
		parts:   map[string]*partition{},
		locks:   map[string]chan struct{}{},
		layouts: map[string]schema.Layout{},
		tables:  map[string]*physTable{},
	}}
}

// Reopen returns another handle on the same database, as a second process
// would open it: it shares all stored state and must run EnsureSchema
// itself.
func (s *Store) Reopen() *Store { return &Store{db: s.db, now: s.now} }

// Close marks the handle closed; the database stays for other handles.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *Store) ensured() (*schema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, syncerr.Newf(syncerr.InternalError, "storage closed")
	}
	if s.schema == nil {
		return nil, syncerr.Newf(syncerr.InternalError, "storage schema not ensured")
	}
	return s.schema, nil
}

func (s *Store) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return syncerr.Newf(syncerr.InternalError, "storage closed")
	}
	return nil
}

func (s *Store) table(name string) (*schema.Table, error) {
	sc, err := s.ensured()
	if err != nil {
		return nil, err
	}
	t := sc.Table(name)
	if t == nil {
		return nil, syncerr.Newf(syncerr.UnknownTable, "table %q is not in the ensured schema", name)
	}
	return t, nil
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return syncerr.Wrap(syncerr.InternalError, err)
	}
	return nil
}

// ready refuses a closed store and a done context.
func (s *Store) ready(ctx context.Context) error {
	if err := s.open(); err != nil {
		return err
	}
	return ctxErr(ctx)
}

// peekPartition runs fn on an existing partition under the database mutex;
// a missing partition yields T's zero value.
func peekPartition[T any](ctx context.Context, s *Store, name string, fn func(p *partition) (T, error)) (T, error) {
	var zero T
	if err := s.ready(ctx); err != nil {
		return zero, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return zero, nil
	}
	return fn(p)
}

// withPartition runs fn on the partition (created when missing) under its
// write lock and the database mutex.
func (s *Store) withPartition(ctx context.Context, name string, fn func(p *partition) error) error {
	if err := s.open(); err != nil {
		return err
	}
	unlock, err := s.db.lockPartition(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return fn(s.db.part(name))
}

// part returns the partition, creating it; callers hold db.mu.
func (d *db) part(name string) *partition {
	p := d.parts[name]
	if p == nil {
		p = &partition{d: newData(), clients: map[string]*ports.ClientRecord{}, bindings: map[string]string{}}
		d.parts[name] = p
	}
	return p
}

// peek returns the partition or nil; callers hold db.mu.
func (d *db) peek(name string) *partition { return d.parts[name] }

// lockPartition takes the migration barrier shared and the partition's
// write lock, honouring ctx while waiting for the latter.
func (d *db) lockPartition(ctx context.Context, name string) (func(), error) {
	d.schemaLock.RLock()
	d.mu.Lock()
	ch := d.locks[name]
	if ch == nil {
		ch = make(chan struct{}, 1)
		d.locks[name] = ch
	}
	d.mu.Unlock()
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		d.schemaLock.RUnlock()
		return nil, syncerr.Wrap(syncerr.InternalError, ctx.Err())
	}
	return func() {
		<-ch
		d.schemaLock.RUnlock()
	}, nil
}

func mintEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- partitions and epochs ----

// TouchPartition registers the partition on first use and refreshes last-seen.
func (s *Store) TouchPartition(ctx context.Context, name string, nowMs int64) (string, error) {
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.part(name)
	if !p.registered {
		p.registered, p.logEpoch = true, mintEpoch()
	}
	p.lastAuthMs = nowMs
	return p.logEpoch, nil
}

// RotateLogEpoch mints a new required epoch and deletes the client records.
func (s *Store) RotateLogEpoch(ctx context.Context, name string) (string, error) {
	var epoch string
	err := s.withPartition(ctx, name, func(p *partition) error {
		if !p.registered {
			return syncerr.Newf(syncerr.StoragePartitionUnregistered, "partition %q is not registered", name)
		}
		p.logEpoch, p.epochRequired = mintEpoch(), true
		p.clients = map[string]*ports.ClientRecord{}
		epoch = p.logEpoch
		return nil
	})
	return epoch, err
}

// LogEpoch returns the partition's epoch.
func (s *Store) LogEpoch(ctx context.Context, name string) (string, bool, error) {
	if err := s.ready(ctx); err != nil {
		return "", false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil || !p.registered {
		return "", false, nil
	}
	return p.logEpoch, true, nil
}

// ListPartitions lists the registry ordered by partition.
func (s *Store) ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var out []ports.PartitionInfo
	for name, p := range s.db.parts {
		if p.registered {
			out = append(out, ports.PartitionInfo{Partition: name, LogEpoch: p.logEpoch, EpochRequired: p.epochRequired, LastAuthenticatedAtMs: p.lastAuthMs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// ---- idempotency ----

// GetPushResult reads a committed push result.
func (s *Store) GetPushResult(ctx context.Context, name, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	if err := s.ready(ctx); err != nil {
		return ports.PushRecord{}, false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return ports.PushRecord{}, false, nil
	}
	r, ok := p.d.results[resultKey{clientID, clientCommitID}]
	r.Result = slices.Clone(r.Result)
	return r, ok, nil
}

// ---- log reads ----

// LogBounds returns the partition's max seq and horizon.
func (s *Store) LogBounds(ctx context.Context, name string) (ports.LogBounds, error) {
	return peekPartition(ctx, s, name, func(p *partition) (ports.LogBounds, error) {
		return ports.LogBounds{MaxSeq: p.d.maxSeq, HorizonSeq: p.horizon}, nil
	})
}

// ReadCommitWindow returns the commits in the window with their matching changes.
func (s *Store) ReadCommitWindow(ctx context.Context, name string, w ports.CommitWindow) ([]commit.Commit, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if _, err := s.table(w.Table); err != nil {
		return nil, err
	}
	if len(w.ScopeFilter) == 0 {
		return nil, syncerr.Newf(syncerr.StorageScanRequiresScope, "commit window on %q without a scope filter", w.Table)
	}
	if w.LimitChanges < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "limitChanges %d", w.LimitChanges)
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	return readWindow(p.d, w), nil
}

// ReadCommitRange returns whole commits by seq, within the change limit.
func (s *Store) ReadCommitRange(ctx context.Context, name string, r ports.CommitRange) (ports.CommitSpan, error) {
	if err := s.ready(ctx); err != nil {
		return ports.CommitSpan{}, err
	}
	if r.LimitChanges < 1 {
		return ports.CommitSpan{}, syncerr.Newf(syncerr.StorageInvalidLimit, "limitChanges %d", r.LimitChanges)
	}
	span := ports.CommitSpan{ThroughSeq: max(r.AfterSeq, r.ThroughSeq)}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return span, nil
	}
	n := 0
	d := p.d
	i := sort.Search(len(d.commits), func(i int) bool { return d.commits[i].c.Seq > r.AfterSeq })
	for ; i < len(d.commits) && d.commits[i].c.Seq <= r.ThroughSeq; i++ {
		c := d.commits[i].c
		// A commit without changes still takes a row in the SQL adapters.
		if n += max(1, len(c.Changes)); n > r.LimitChanges {
			span.ThroughSeq = c.Seq - 1
			break
		}
		changes := make([]commit.Change, len(c.Changes))
		for j, ch := range c.Changes {
			changes[j] = copyChange(ch)
		}
		c.Changes = changes
		span.Commits = append(span.Commits, c)
	}
	return span, nil
}

// LatestScopedChange returns the newest retained commit ≤ q.ThroughSeq
// with a change to q.Table under one of q.Values.
func (s *Store) LatestScopedChange(ctx context.Context, name string, q ports.ScopedChangeQuery) (int64, error) {
	if len(q.Values) == 0 {
		return 0, syncerr.Newf(syncerr.StorageScanRequiresScope, "scope pin of %q without values", q.Table)
	}
	return peekPartition(ctx, s, name, func(p *partition) (int64, error) {
		cs := p.d.commits
		for i := len(cs) - 1; i >= 0; i-- {
			c := cs[i].c
			if c.Seq > q.ThroughSeq {
				continue
			}
			for _, ch := range c.Changes {
				if ch.Table == q.Table && slices.Contains(q.Values, ch.Scopes[q.Variable]) {
					return c.Seq, nil
				}
			}
		}
		return 0, nil
	})
}

// ProbeCommitWindow counts the window's matching changes and looks for a
// matching delete.
func (s *Store) ProbeCommitWindow(ctx context.Context, name string, pr ports.WindowProbe) (ports.WindowSummary, error) {
	if len(pr.ScopeFilter) == 0 {
		return ports.WindowSummary{}, syncerr.Newf(syncerr.StorageScanRequiresScope, "window probe on %q without a scope filter", pr.Table)
	}
	if pr.Limit < 0 {
		return ports.WindowSummary{}, syncerr.Newf(syncerr.StorageInvalidLimit, "window probe limit %d", pr.Limit)
	}
	return peekPartition(ctx, s, name, func(p *partition) (ports.WindowSummary, error) {
		var sum ports.WindowSummary
		for _, rec := range p.d.commits {
			c := rec.c
			if c.Seq <= pr.AfterSeq || c.Seq > pr.ThroughSeq {
				continue
			}
			for _, ch := range c.Changes {
				if ch.Table == pr.Table && matches(ch.Scopes, pr.ScopeFilter) {
					sum.Changes = min(sum.Changes+1, pr.Limit+1)
					sum.Deletes = sum.Deletes || ch.Op == commit.OpDelete
				}
			}
			if sum.Changes > pr.Limit && sum.Deletes {
				break
			}
		}
		return sum, nil
	})
}

// CountWindowChanges implements ports.WindowChangeCounter.
func (s *Store) CountWindowChanges(ctx context.Context, name string, pr ports.WindowProbe) (int, error) {
	if pr.Limit < 0 {
		return 0, syncerr.Newf(syncerr.StorageInvalidLimit, "window count limit %d", pr.Limit)
	}
	return peekPartition(ctx, s, name, func(p *partition) (int, error) {
		n := 0
		for _, rec := range p.d.commits {
			if rec.c.Seq <= pr.AfterSeq || rec.c.Seq > pr.ThroughSeq {
				continue
			}
			for _, ch := range rec.c.Changes {
				if ch.Table == pr.Table {
					n = min(n+1, pr.Limit+1)
				}
			}
		}
		return n, nil
	})
}

var _ ports.WindowChangeCounter = (*Store)(nil)

func readWindow(d *data, w ports.CommitWindow) []commit.Commit {
	var out []commit.Commit
	n := 0
	i := sort.Search(len(d.commits), func(i int) bool { return d.commits[i].c.Seq > w.AfterSeq })
	for ; i < len(d.commits) && d.commits[i].c.Seq <= w.ThroughSeq; i++ {
		c := d.commits[i].c
		var matched []commit.Change
		for _, ch := range c.Changes {
			if ch.Table == w.Table && matches(ch.Scopes, w.ScopeFilter) {
				matched = append(matched, copyChange(ch))
			}
		}
		if len(matched) == 0 {
			continue
		}
		c.Changes = matched
		c.ClientID, c.ClientCommitID = "", "" // not a window's (ports.LogReader)
		out = append(out, c)
		n += len(matched)
		if n >= w.LimitChanges {
			break
		}
	}
	return out
}

func matches(scopes map[string]string, filter map[string][]string) bool {
	return commit.MatchScopes(scopes, filter)
}

func copyChange(c commit.Change) commit.Change {
	c.Scopes = copyScopes(c.Scopes)
	c.Row = slices.Clone(c.Row)
	return c
}

func copyScopes(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyRow(r commit.Row) commit.Row {
	r.Scopes = copyScopes(r.Scopes)
	r.Payload = slices.Clone(r.Payload)
	r.ColumnVersions = slices.Clone(r.ColumnVersions)
	return r
}

// ---- row reads ----

// ScanRows pages current rows by scope in row-id byte order.
func (s *Store) ScanRows(ctx context.Context, name string, q ports.RowScan) ([]commit.Row, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if _, err := s.table(q.Table); err != nil {
		return nil, err
	}
	if err := checkScan(q); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	return scanRows(p.d, q), nil
}

func checkScan(q ports.RowScan) error {
	if len(q.ScopeFilter) == 0 {
		return syncerr.Newf(syncerr.StorageScanRequiresScope, "row scan on %q without a scope filter", q.Table)
	}
	if q.Limit < 1 {
		return syncerr.Newf(syncerr.StorageInvalidLimit, "limit %d", q.Limit)
	}
	return nil
}

func scanRows(d *data, q ports.RowScan) []commit.Row {
	t := d.tables[q.Table]
	if t == nil {
		return nil
	}
	ids := t.sortedIDs()
	i := sort.SearchStrings(ids, q.AfterRowID)
	var out []commit.Row
	for ; i < len(ids) && len(out) < q.Limit; i++ {
		if ids[i] == q.AfterRowID {
			continue
		}
		r := t.rows[ids[i]]
		if matches(r.row.Scopes, q.ScopeFilter) {
			out = append(out, copyRow(r.row))
		}
	}
	return out
}

// ScanTable returns committed current rows of a table by row id, without
// a scope filter.
func (s *Store) ScanTable(ctx context.Context, name string, q ports.TableScan) ([]commit.Row, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if _, err := s.table(q.Table); err != nil {
		return nil, err
	}
	if q.Limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "limit %d", q.Limit)
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil || p.d.tables[q.Table] == nil {
		return nil, nil
	}
	t := p.d.tables[q.Table]
	ids := t.sortedIDs()
	var out []commit.Row
	for i := sort.SearchStrings(ids, q.AfterRowID); i < len(ids) && len(out) < q.Limit; i++ {
		if ids[i] != q.AfterRowID {
			out = append(out, copyRow(t.rows[ids[i]].row))
		}
	}
	return out, nil
}

// GetRow returns the committed current row or nil.
func (s *Store) GetRow(ctx context.Context, name, table, rowID string) (*commit.Row, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if _, err := s.table(table); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	return getRow(p.d, table, rowID), nil
}

func getRow(d *data, table, rowID string) *commit.Row {
	t := d.tables[table]
	if t == nil {
		return nil
	}
	r := t.rows[rowID]
	if r == nil {
		return nil
	}
	c := copyRow(r.row)
	return &c
}

// ---- blob references ----

// ListRowsReferencingBlob lists the rows referencing blobID.
func (s *Store) ListRowsReferencingBlob(ctx context.Context, name, blobID string) ([]ports.BlobRowRef, error) {
	return peekPartition(ctx, s, name, func(p *partition) ([]ports.BlobRowRef, error) {
		var out []ports.BlobRowRef
		for k, ids := range p.d.blobRefs {
			if !slices.Contains(ids, blobID) {
				continue
			}
			if r := getRow(p.d, k.table, k.rowID); r != nil {
				out = append(out, ports.BlobRowRef{Table: k.table, RowID: k.rowID, Scopes: r.Scopes})
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Table != out[j].Table {
				return out[i].Table < out[j].Table
			}
			return out[i].RowID < out[j].RowID
		})
		return out, nil
	})
}

// ListReferencedBlobIDs lists every referenced blob id, sorted and distinct.
func (s *Store) ListReferencedBlobIDs(ctx context.Context, name string) ([]string, error) {
	return peekPartition(ctx, s, name, func(p *partition) ([]string, error) {
		var out []string
		for _, ids := range p.d.blobRefs {
			out = append(out, ids...)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	})
}

// ListBlobClaims lists the partition's claims of the blob GC (the orphan
// sweep), sorted.
func (s *Store) ListBlobClaims(ctx context.Context, name string) ([]string, error) {
	return peekPartition(ctx, s, name, func(p *partition) ([]string, error) {
		out := slices.Collect(maps.Keys(p.d.blobClaims))
		slices.Sort(out)
		return out, nil
	})
}

// ReleaseBlobClaims ends claims of the blob GC.
func (s *Store) ReleaseBlobClaims(ctx context.Context, name string, blobIDs []string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	return s.withPartition(ctx, name, func(p *partition) error {
		for _, id := range blobIDs {
			delete(p.d.blobClaims, id)
		}
		return nil
	})
}

// ---- reactions ----

// GetReaction returns a reaction or nil.
func (s *Store) GetReaction(ctx context.Context, name, key string) (*ports.StoredReaction, error) {
	return peekPartition(ctx, s, name, func(p *partition) (*ports.StoredReaction, error) {
		r := p.d.reactions[key]
		if r == nil {
			return nil, nil
		}
		c := copyReaction(*r)
		return &c, nil
	})
}

// ListReactions lists reactions by (created time, key), optionally by status.
func (s *Store) ListReactions(ctx context.Context, name string, statuses []ports.ReactionStatus, limit int) ([]ports.StoredReaction, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, syncerr.Newf(syncerr.StorageInvalidLimit, "limit %d", limit)
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	var out []ports.StoredReaction
	for _, r := range p.d.reactions {
		if len(statuses) == 0 || slices.Contains(statuses, r.Status) {
			out = append(out, copyReaction(*r))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source.CreatedAtMs != out[j].Source.CreatedAtMs {
			return out[i].Source.CreatedAtMs < out[j].Source.CreatedAtMs
		}
		return out[i].IdempotencyKey < out[j].IdempotencyKey
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func copyReaction(r ports.StoredReaction) ports.StoredReaction {
	r.Payload = slices.Clone(r.Payload)
	r.LastFailure = slices.Clone(r.LastFailure)
	return r
}

// ---- pruning ----

// PruneCommitsThrough raises the horizon and drops the log below it, bound to the epoch.
func (s *Store) PruneCommitsThrough(ctx context.Context, name string, r ports.PruneRequest) (ports.PruneResult, error) {
	if err := s.open(); err != nil {
		return ports.PruneResult{}, err
	}
	if r.ThroughSeq < 0 {
		return ports.PruneResult{}, syncerr.Newf(syncerr.StorageInvalidPruneCursor, "throughSeq %d", r.ThroughSeq)
	}
	unlock, err := s.db.lockPartition(ctx, name)
	if err != nil {
		return ports.PruneResult{}, err
	}
	defer unlock()
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil || !p.registered || r.LogEpoch == "" || p.logEpoch != r.LogEpoch {
		return ports.PruneResult{}, syncerr.Newf(syncerr.StoragePruneEpochMismatch, "prune bound to a stale or unknown log epoch")
	}
	res := ports.PruneResult{PreviousHorizonSeq: p.horizon, HorizonSeq: max(p.horizon, r.ThroughSeq)}
	p.horizon = res.HorizonSeq
	d := p.d
	cut := sort.Search(len(d.commits), func(i int) bool { return d.commits[i].c.Seq > res.HorizonSeq })
	res.RemovedCommits = int64(cut)
	d.commits = slices.Clone(d.commits[cut:])
	for k, seq := range d.tombstones {
		if seq <= res.HorizonSeq {
			delete(d.tombstones, k)
		}
	}
	return res, nil
}

// ActiveClientCursorFloor returns the minimum cursor (of at least 0) of
// clients seen since cutoffMs.
func (s *Store) ActiveClientCursorFloor(ctx context.Context, name string, cutoffMs int64) (int64, bool, error) {
	if err := s.ready(ctx); err != nil {
		return 0, false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return 0, false, nil
	}
	var floor int64
	found := false
	for _, c := range p.clients {
		if c.UpdatedAtMs >= cutoffMs && c.Cursor >= 0 && (!found || c.Cursor < floor) {
			floor, found = c.Cursor, true
		}
	}
	return floor, found, nil
}

// CommitSeqBefore returns the newest retained seq created strictly before ms.
func (s *Store) CommitSeqBefore(ctx context.Context, name string, ms int64) (int64, error) {
	return peekPartition(ctx, s, name, func(p *partition) (int64, error) {
		var seq int64
		for _, c := range p.d.commits {
			if c.c.CreatedAtMs < ms && c.c.Seq > seq {
				seq = c.c.Seq
			}
		}
		return seq, nil
	})
}

// ---- clients ----

// GetClient returns a client record or nil.
func (s *Store) GetClient(ctx context.Context, name, clientID string) (*ports.ClientRecord, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil || p.clients[clientID] == nil {
		return nil, nil
	}
	c := *p.clients[clientID]
	c.Subscriptions = slices.Clone(c.Subscriptions)
	return &c, nil
}

// PutClient creates or replaces a client record.
func (s *Store) PutClient(ctx context.Context, r ports.ClientRecord) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	r.Subscriptions = slices.Clone(r.Subscriptions)
	s.db.part(r.Partition).clients[r.ClientID] = &r
	return nil
}

// BindClient binds the client id to actorID unless it is bound, under the
// partition's write lock (so it serializes with push transactions), and
// returns the bound actor.
func (s *Store) BindClient(ctx context.Context, name, clientID, actorID string) (string, error) {
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	var bound string
	err := s.withPartition(ctx, name, func(p *partition) error {
		var ok bool
		if bound, ok = p.bindings[clientID]; !ok {
			p.bindings[clientID], bound = actorID, actorID
		}
		return nil
	})
	return bound, err
}

// ClientBinding returns the actor the client id is bound to.
func (s *Store) ClientBinding(ctx context.Context, name, clientID string) (string, bool, error) {
	if err := s.ready(ctx); err != nil {
		return "", false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return "", false, nil
	}
	a, ok := p.bindings[clientID]
	return a, ok, nil
}

// AdvanceClientCursor moves an existing record's cursor forward for the
// same actor under the live epoch.
func (s *Store) AdvanceClientCursor(ctx context.Context, a ports.CursorAdvance) (bool, error) {
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(a.Partition)
	if p == nil || !p.registered || p.logEpoch != a.LogEpoch {
		return false, nil
	}
	c := p.clients[a.ClientID]
	if c == nil || c.ActorID != a.ActorID {
		return false, nil
	}
	n := *c
	n.Cursor, n.UpdatedAtMs = max(c.Cursor, a.Cursor), max(c.UpdatedAtMs, a.NowMs)
	p.clients[a.ClientID] = &n
	return true, nil
}

// Ping implements ports.HealthChecker: it fails once the handle is closed.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return s.open()
}
