// Package pull is the pull half of POST /sync (SPEC §4, §5.1–§5.4,
// §5.7, §8.4, §A.3): subscription validation, effective scopes, revoked
// and reset sections, the scope-filtered incremental commit window with
// its cursor rules and horizon re-check, bootstrap through whole-table
// SQLite images at the scope pin for clients that take them and otherwise
// through paged, resumable SSG2 rows segments (inline or stored and
// referenced; both built once per publication key and reused by the
// segment builder of app/segments), far-behind catch-up through those
// segments, and the client record prepared after all sections and
// written once the response passed the read-verify.
//
// A pull writes its encoded sections into a Spool; the caller sends the
// spool only after the serve gate was read again (SPEC §C.7).
//
// The read-verify buffer is bounded twice. Memory: at most
// Options.SpoolMemoryBytes (default 4 MiB, --pull-spool-memory-bytes) per
// response; past it the spool continues in an unlinked temporary file.
// Size: once a response passes Options.ResponseBudgetBytes (default
// 64 MiB, --pull-response-budget-bytes) no section adds a bootstrap page
// beyond its first or a commit beyond its first, so a response is at most
// the budget plus, per later subscription, one page (≤ limitSnapshotRows
// rows, inline only when the client takes nothing else or the page is
// under 256 KiB) or one commit (a commit is never split).
package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/segments"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is the storage a pull reads and the client record it writes.
type Store interface {
	LogBounds(ctx context.Context, partition string) (ports.LogBounds, error)
	ReadCommitWindow(ctx context.Context, partition string, w ports.CommitWindow) ([]commit.Commit, error)
	ScanRows(ctx context.Context, partition string, q ports.RowScan) ([]commit.Row, error)
	LatestScopedChange(ctx context.Context, partition string, q ports.ScopedChangeQuery) (int64, error)
	ProbeCommitWindow(ctx context.Context, partition string, p ports.WindowProbe) (ports.WindowSummary, error)
	PutClient(ctx context.Context, r ports.ClientRecord) error
}

// Defaults of Options (those of the segment builder's options are
// app/segments' defaults).
const (
	DefaultResponseBudgetBytes = 64 << 20
	DefaultClientRefresh       = 30 * time.Second
)

// Options configure a Service.
type Options struct {
	Store Store
	// Segments stores pages delivered as SEGMENT_REF; nil serves inline
	// pages only (a client without accept bit 0 then gets
	// sync.internal_error for a bootstrap).
	Segments segments.Publisher
	// Images builds sqlite images (§5.3) for clients that set accept bit
	// 2; nil builds none (stored images are still served).
	Images ports.ImageBuilder
	// ImageScanRows is the keyset batch an image is built from (0 →
	// segments.DefaultImageScanRows).
	ImageScanRows int
	// Signer issues signed URLs (accept bit 3); nil issues none.
	Signer ports.SegmentURLSigner
	// InlineMaxBytes is the §5.7 inline threshold (0 → 256 KiB; negative:
	// never inline a page a client can take as a SEGMENT_REF).
	InlineMaxBytes int
	// SegmentTTL is a publication's lifetime (0 → 24 h).
	SegmentTTL time.Duration
	// ResponseBudgetBytes is a soft cap on one response: once the
	// sections written so far exceed it, a bootstrap emits no further page
	// and an incremental section no further commit beyond its first (the
	// client continues on its next pull). 0 → 64 MiB; negative → none.
	ResponseBudgetBytes int64
	// SpoolMemoryBytes is how much of one response NewSpool keeps in
	// memory before spilling to a file in SpoolDir (0 → 4 MiB; "" → the
	// system temporary directory).
	SpoolMemoryBytes int
	SpoolDir         string
	// ClientRefresh skips the client record write of a pull that changed
	// nothing but the cursor while the stored record is younger than this
	// (same actor, wire version and subscription list; no bootstrap
	// section; a stored cursor of at least 0 that the new one does not
	// pass below). The stored cursor then lags the client's, which only
	// holds the retention floor back, and its timestamp is at most this
	// old, so keep it well below the retention active window (the server
	// configuration caps it at a tenth). 0 → 30 s; negative: always write.
	ClientRefresh time.Duration
	// InlineCacheBytes bounds the in-process cache of built inline pages
	// (0 → 32 MiB; negative: no cache).
	InlineCacheBytes int64
	// CatchUpChanges turns far-behind catch-up through segments on (SPEC
	// §8.4): an incremental pull whose window holds more than this many
	// matching changes (and more than its limitCommits) is answered with a
	// bootstrap section at a fresh pin instead of the commits, when no
	// matching change of the window is a delete; with one, a reset section
	// makes the client re-bootstrap (a re-bootstrap clears, a catch-up
	// bootstrap cannot). 0: off.
	CatchUpChanges int
	Metrics        *Metrics
	Now            func() time.Time
	Log            *zap.Logger
}

// Service serves the pull part of sync requests.
type Service struct {
	o Options
	// build builds and publishes the bootstrap segments (app/segments).
	build   *segments.Builder
	buffers spoolBuffers
	counts  windowCounts
}

// New validates opts and builds the Service.
func New(o Options) (*Service, error) {
	if o.Store == nil {
		return nil, errors.New("pull: Store is required")
	}
	if o.ResponseBudgetBytes == 0 {
		o.ResponseBudgetBytes = DefaultResponseBudgetBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.ClientRefresh == 0 {
		o.ClientRefresh = DefaultClientRefresh
	}
	build, err := segments.NewBuilder(segments.BuildOptions{
		Store:            o.Store,
		Segments:         o.Segments,
		Images:           o.Images,
		ImageScanRows:    o.ImageScanRows,
		InlineMaxBytes:   o.InlineMaxBytes,
		SegmentTTL:       o.SegmentTTL,
		InlineCacheBytes: o.InlineCacheBytes,
		Metrics:          o.Metrics,
		Now:              o.Now,
		Log:              o.Log,
	})
	if err != nil {
		return nil, err
	}
	return &Service{o: o, build: build}, nil
}

// NewSpool returns an empty response buffer with the configured bound.
// Its memory is recycled once it is closed.
func (s *Service) NewSpool() *Spool {
	sp := NewSpool(s.o.SpoolMemoryBytes, s.o.SpoolDir)
	sp.buffers = &s.buffers
	return sp
}

// Limits are the clamped PULL_HEADER limits (SPEC §4.2).
type Limits struct {
	Commits       int
	SnapshotRows  int
	SnapshotPages int
	Accept        uint8
}

func clamp(v int32, lo, hi, def int) int {
	switch {
	case v == 0:
		return def
	case int(v) < lo:
		return lo
	case int(v) > hi:
		return hi
	}
	return int(v)
}

// Clamp applies the silent clamps and defaults of §4.2.
func Clamp(h *ssp2.PullHeader) Limits {
	return Limits{
		Commits:       clamp(h.LimitCommits, 1, 1000, 1000),
		SnapshotRows:  clamp(h.LimitSnapshotRows, 1, 50000, 1000),
		SnapshotPages: clamp(h.MaxSnapshotPages, 1, 50, 4),
		Accept:        h.Accept,
	}
}

// Validate is the request-level validation of a pull (SPEC §1.7, §4.1–§4.3):
// rows acceptance, unique subscription ids, known tables, declared requested
// keys and no wildcard. Any failure fails the whole request.
func Validate(sch *schema.Schema, h *ssp2.PullHeader, subs []*ssp2.Subscription) error {
	if h == nil {
		if len(subs) > 0 {
			return syncerr.Newf(syncerr.InvalidRequest, "SUBSCRIPTION without PULL_HEADER")
		}
		return nil
	}
	if h.Accept&(ssp2.AcceptInlineRows|ssp2.AcceptExternalRows) == 0 {
		return syncerr.Newf(syncerr.InvalidRequest, "PULL_HEADER accept has neither inline nor external rows segments")
	}
	seen := make(map[string]struct{}, len(subs))
	for _, sub := range subs {
		if _, dup := seen[sub.ID]; dup {
			return syncerr.Newf(syncerr.InvalidSubscription, "duplicate subscription id %q", sub.ID)
		}
		seen[sub.ID] = struct{}{}
		t := sch.Table(sub.Table)
		if t == nil {
			return syncerr.Newf(syncerr.UnknownTable, "subscription %q: unknown table %q", sub.ID, sub.Table)
		}
		if err := scopes.ValidateRequested(t, requestedMap(sub.Scopes)); err != nil {
			return err
		}
	}
	return nil
}

func requestedMap(l ssp2.ScopeLists) scopes.Map {
	m := make(scopes.Map, len(l))
	for _, e := range l {
		m[e.Key] = e.Values
	}
	return m
}

// Request is one validated pull.
type Request struct {
	Partition   string
	ActorID     string
	ClientID    string
	WireVersion uint16
	LogEpoch    string
	Schema      *schema.Schema
	// View is the client's schema version in the served window (SPEC
	// §9): its tables, the shape and version stamp of the rows it is
	// sent. Nil: the current version.
	View   *schema.View
	Header *ssp2.PullHeader
	// Subscriptions in request order (validated by Validate).
	Subscriptions []*ssp2.Subscription
	// Scopes is the request's one memoized scope resolution.
	Scopes scopes.Resolution
	// Previous is the client's record before this request (nil if none).
	Previous *ports.ClientRecord
	// Bounds are the log bounds when the caller read them already, after
	// every write of the request; nil: Pull reads them.
	Bounds *ports.LogBounds
	// Gate is the serve gate read in the same snapshot as Bounds (nil:
	// none). A pull that reads nothing more hands it on as its verified
	// gate (Spool.VerifiedGate).
	Gate *checkpoint.ServeGate
	// Pushed is the highest commit seq this request's own pushes applied
	// before the pull (0: none). A log maximum read below it is a stale
	// read (SPEC §7), and the pull fails with sync.storage_stale_read.
	Pushed int64
}

// table returns the client's form of a table (nil when its schema
// version does not declare it) and, for an older version's form, the
// projection of stored rows onto it.
func (r *Request) table(name string) (*schema.Table, *schema.Projection) {
	if r.View.IsCurrent() {
		return r.Schema.Table(name), nil
	}
	p := r.View.Table(name)
	switch {
	case p == nil:
		return nil, nil
	case p.Identity():
		return p.Table(), nil
	}
	return p.Table(), p
}

// version is the client's schema version: the version stamp of its
// segments and their publication keys.
func (r *Request) version() int32 {
	if r.View.IsCurrent() {
		return r.Schema.Version
	}
	return r.View.Version()
}

type sectionKind uint8

const (
	kindRevoked sectionKind = iota + 1
	kindReset
	kindBootstrap
	kindIncremental
)

func (k sectionKind) String() string {
	switch k {
	case kindRevoked:
		return "revoked"
	case kindReset:
		return "reset"
	case kindBootstrap:
		return "bootstrap"
	}
	return "incremental"
}

func (v *Served) count(k sectionKind) {
	switch k {
	case kindRevoked:
		v.Revoked++
	case kindReset:
		v.Reset++
	case kindBootstrap:
		v.Bootstrap++
	default:
		v.Incremental++
	}
}

type plan struct {
	sub *ssp2.Subscription
	// table is the client's form of the subscription's table; proj, when
	// set, projects stored rows onto it (an older schema version).
	table     *schema.Table
	proj      *schema.Projection
	kind      sectionKind
	effective scopes.Map
	commits   []commit.Commit
	read      bool
	// firstPage holds the rows of the first bootstrap page when the image
	// lane scanned them and declined.
	firstPage []commit.Row
	// nextCursor is the SUB_END cursor once the section is written.
	nextCursor int64
}

// Result summarizes a pull for its caller.
type Result struct {
	// Sections counts sections by kind name.
	Sections map[string]int
}

// Pull writes the SUB_START … SUB_END section of every subscription, in
// request order, to out (encoded frames of wire version r.WireVersion) and
// then prepares the client record (SPEC §4.5), which RecordClient writes
// once the response is to be sent. A returned error is a request-level
// failure; out is then to be discarded.
func (s *Service) Pull(ctx context.Context, r Request, out *Spool) error {
	lim := Clamp(r.Header)
	var bounds ports.LogBounds
	var err error
	if r.Bounds != nil {
		bounds = *r.Bounds
	} else if bounds, err = s.o.Store.LogBounds(ctx, r.Partition); err != nil {
		return fmt.Errorf("read log bounds: %w", err)
	}
	if err := s.fresh(r, bounds); err != nil {
		return err
	}
	plans := make([]plan, len(r.Subscriptions))
	windows := false
	for i, sub := range r.Subscriptions {
		p := &plans[i]
		p.sub = sub
		if p.table, p.proj = r.table(sub.Table); p.table == nil {
			return syncerr.Newf(syncerr.UnknownTable, "subscription %q: unknown table %q", sub.ID, sub.Table)
		}
		oc := scopes.Effective(requestedMap(sub.Scopes), r.Scopes)
		if oc.Revoked() {
			p.kind = kindRevoked
			continue
		}
		p.effective = oc.Effective
		hasToken := sub.BootstrapState.Present
		switch {
		case !hasToken && sub.Cursor >= 0 && sub.Cursor < bounds.HorizonSeq:
			p.kind = kindReset
		case hasToken || sub.Cursor < 0 || sub.Cursor > bounds.MaxSeq:
			p.kind = kindBootstrap
		default:
			p.kind = kindIncremental
			if sub.Cursor == bounds.MaxSeq {
				continue // an empty window needs no read
			}
			w := ports.CommitWindow{
				Table:        sub.Table,
				ScopeFilter:  p.effective,
				AfterSeq:     sub.Cursor,
				ThroughSeq:   bounds.MaxSeq,
				LimitChanges: lim.Commits + 1,
			}
			held := false
			if rr, ok := s.o.Store.(ports.RecentWindowReader); ok && r.LogEpoch != "" {
				// Held whole in memory: complete, so no recheck (p.read).
				p.commits, held = rr.ReadRecentWindow(r.Partition, r.LogEpoch, w)
			}
			if held {
				s.o.Metrics.window("memory")
			} else {
				if p.commits, err = s.o.Store.ReadCommitWindow(ctx, r.Partition, w); err != nil {
					return fmt.Errorf("read commit window: %w", err)
				}
				p.read = true
				s.o.Metrics.window("log")
			}
			if s.o.CatchUpChanges > 0 && changeCount(p.commits) > lim.Commits {
				if err := s.catchUp(ctx, r, p, bounds); err != nil {
					return err
				}
			}
			windows = windows || p.read
		}
	}
	// §4.6: recheck the horizon after the window reads, before any
	// SUB_START: a prune that passed a cursor during the read turns its
	// section into a reset instead of an incomplete active one.
	// Without a bootstrap section nothing is read after this point, so
	// the recheck can carry the read-verify's gate re-read too.
	bootstrap := false
	for i := range plans {
		bootstrap = bootstrap || plans[i].kind == kindBootstrap
	}
	if !windows && !bootstrap && r.Gate != nil {
		out.gate = r.Gate // nothing read since the head
	}
	if windows {
		again, err := s.recheck(ctx, r, out, bootstrap)
		if err != nil {
			return fmt.Errorf("read log bounds: %w", err)
		}
		if err := s.fresh(r, again); err != nil {
			return err
		}
		for i := range plans {
			p := &plans[i]
			if p.read && p.sub.Cursor < again.HorizonSeq {
				p.kind, p.commits = kindReset, nil
				s.o.Metrics.horizonResets()
			}
		}
		if again.HorizonSeq > bounds.HorizonSeq {
			bounds.HorizonSeq = again.HorizonSeq
		}
	}
	e := &emitter{out: out, wire: r.WireVersion}
	for i := range plans {
		p := &plans[i]
		switch p.kind {
		case kindRevoked:
			err = s.closedSection(e, p, syncerr.ScopeRevoked, ssp2.SubRevoked)
		case kindReset:
			err = s.closedSection(e, p, syncerr.CursorExpired, ssp2.SubReset)
		case kindIncremental:
			err = s.incremental(e, p, lim, bounds)
		case kindBootstrap:
			err = s.bootstrap(ctx, e, r, p, lim, bounds)
		}
		if err != nil {
			return err
		}
		s.o.Metrics.section(p.kind)
		out.served.count(p.kind)
	}
	if out.Spilled() {
		s.o.Metrics.spilled()
	}
	out.client, err = s.clientRecord(r, plans)
	return err
}

func changeCount(cs []commit.Commit) int {
	n := 0
	for i := range cs {
		n += len(cs[i].Changes)
	}
	return n
}

// catchUp applies §8.4 to an incremental section whose window needs more
// than one response: past CatchUpChanges matching changes it becomes a
// bootstrap at a fresh pin (§4.7), whose segments the client upserts over
// its rows. That replaces the window exactly unless the window removes a
// row the client holds, which only a delete does (scope columns are
// immutable, a scope move is a delete and an upsert); a window with a
// matching delete is answered with a reset, a declared discontinuity
// after which the client bootstraps afresh and clears first.
func (s *Service) catchUp(ctx context.Context, r Request, p *plan, b ports.LogBounds) error {
	probe := ports.WindowProbe{
		Table: p.sub.Table, ScopeFilter: p.effective, AfterSeq: p.sub.Cursor, ThroughSeq: b.MaxSeq, Limit: s.o.CatchUpChanges,
	}
	if c, ok := s.o.Store.(ports.WindowChangeCounter); ok {
		// Within the limit counting every change to the table, the
		// matching ones are too: a catch-up whose responses each trigger
		// this test otherwise probes the rest of its window every time.
		// The window read holds every matching change up to its last
		// commit, so only the rest of the window is counted.
		read := changeCount(p.commits)
		if rest := s.o.CatchUpChanges - read; rest >= 0 {
			tail := probe
			tail.AfterSeq, tail.Limit = p.commits[len(p.commits)-1].Seq, rest
			within, err := s.countWithin(ctx, c, r, tail)
			if err != nil {
				return fmt.Errorf("count window changes: %w", err)
			}
			if within {
				return nil
			}
		}
	}
	sum, err := s.o.Store.ProbeCommitWindow(ctx, r.Partition, probe)
	if err != nil {
		return fmt.Errorf("probe commit window: %w", err)
	}
	if sum.Changes <= s.o.CatchUpChanges {
		return nil
	}
	p.commits, p.read = nil, false
	if sum.Deletes {
		p.kind = kindReset
		s.o.Metrics.catchUp("reset")
	} else {
		p.kind = kindBootstrap
		s.o.Metrics.catchUp("segments")
	}
	return nil
}

// countWithin reports whether the window w holds at most w.Limit changes
// to its table, counting only what no earlier count of this partition's
// log covers (windowCounts).
func (s *Service) countWithin(ctx context.Context, c ports.WindowChangeCounter, r Request, w ports.WindowProbe) (bool, error) {
	k := countKey{partition: r.Partition, epoch: r.LogEpoch, table: w.Table}
	memo := r.LogEpoch != ""
	if had, ok := s.counts.covering(k, w.AfterSeq); memo && ok && had.n <= w.Limit {
		if w.ThroughSeq <= had.through {
			return true, nil
		}
		if w.AfterSeq < had.through {
			past := w
			past.AfterSeq, past.Limit = had.through, w.Limit-had.n
			n, err := c.CountWindowChanges(ctx, r.Partition, past)
			if err != nil {
				return false, err
			}
			if had.n+n <= w.Limit {
				s.counts.note(k, countedWindow{after: had.after, through: w.ThroughSeq, n: had.n + n})
				return true, nil
			}
		}
	}
	n, err := c.CountWindowChanges(ctx, r.Partition, w)
	if err != nil {
		return false, err
	}
	if n > w.Limit {
		return false, nil
	}
	if memo && w.ThroughSeq > w.AfterSeq {
		s.counts.note(k, countedWindow{after: w.AfterSeq, through: w.ThroughSeq, n: n})
	}
	return true, nil
}

// recheck reads the log bounds again after the window reads, and the
// serve gate with them when the store can and nothing is read later.
func (s *Service) recheck(ctx context.Context, r Request, out *Spool, bootstrap bool) (ports.LogBounds, error) {
	if bg, ok := s.o.Store.(ports.BoundsGateReader); ok && !bootstrap {
		b, g, complete, err := bg.ReadBoundsAndGate(ctx, r.Partition, r.Schema.Version)
		if err == nil && complete {
			out.gate = &g
		}
		return b, err
	}
	return s.o.Store.LogBounds(ctx, r.Partition)
}

// fresh is the read-after-write check of SPEC §7: sync storage must see
// the request's own commits, so a log maximum below one of them came from
// a query cache or a lagging replica, and answering from it would move
// the client's cursor past commits it never received. The request fails
// before any byte; its pushes stay durable under their idempotency keys.
func (s *Service) fresh(r Request, b ports.LogBounds) error {
	if b.MaxSeq >= r.Pushed {
		return nil
	}
	s.o.Log.Error("sync storage read is stale: its log maximum precedes a commit of this request; disable query caching and replica reads for sync storage",
		zap.String("partition", r.Partition), zap.String("client_id", r.ClientID),
		zap.Int64("commit_seq", r.Pushed), zap.Int64("max_seq", b.MaxSeq))
	return syncerr.Newf(syncerr.StorageStaleRead, "log maximum %d read after commit %d of this request", b.MaxSeq, r.Pushed)
}

// RecordClient writes the client record the Pull into out prepared
// (SPEC §4.5), if it changed. Call it only once the response is to be
// sent, after the serve gate was read again: a refused response leaves
// the stored record (and the retention watermark it feeds) as it was,
// since the client never received those sections.
func (s *Service) RecordClient(ctx context.Context, out *Spool) error {
	if out == nil || out.client == nil {
		return nil
	}
	if err := s.o.Store.PutClient(ctx, *out.client); err != nil {
		return fmt.Errorf("write client record: %w", err)
	}
	out.client = nil
	return nil
}

func (s *Service) overBudget(e *emitter) bool {
	return s.o.ResponseBudgetBytes > 0 && e.out.Len() > s.o.ResponseBudgetBytes
}

// closedSection is a revoked (§3.3) or reset (§4.6) section: no data, an
// empty effective map, the request cursor echoed.
func (s *Service) closedSection(e *emitter, p *plan, reason syncerr.Code, st ssp2.SubStatus) error {
	p.nextCursor = p.sub.Cursor
	if err := e.frame(&ssp2.SubStart{ID: p.sub.ID, Status: st, ReasonCode: string(reason), EffectiveScopes: ssp2.ScopeLists{}}); err != nil {
		return err
	}
	return e.frame(&ssp2.SubEnd{NextCursor: p.sub.Cursor})
}

// incremental writes the §4.5 window: whole commits, oldest first, until
// the change budget; nextCursor = max(cursor, maxSeq) when the window is
// provably exhausted (the lookahead came back within the budget and every
// returned commit was delivered), else the last delivered commit.
func (s *Service) incremental(e *emitter, p *plan, lim Limits, b ports.LogBounds) error {
	if err := e.frame(&ssp2.SubStart{ID: p.sub.ID, Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(p.effective)}); err != nil {
		return err
	}
	delivered, n, total := 0, 0, 0
	last := p.sub.Cursor
	for i := range p.commits {
		total += len(p.commits[i].Changes)
	}
	for i := range p.commits {
		c := &p.commits[i]
		if delivered > 0 && (delivered+len(c.Changes) > lim.Commits || s.overBudget(e)) {
			break
		}
		if err := e.commit(c, p.proj); err != nil {
			return err
		}
		delivered += len(c.Changes)
		n++
		last = c.Seq
		if delivered >= lim.Commits {
			break
		}
	}
	s.o.Metrics.commits(n)
	e.out.served.Commits += n
	if total <= lim.Commits && n == len(p.commits) {
		p.nextCursor = max(p.sub.Cursor, b.MaxSeq)
	} else {
		p.nextCursor = max(p.sub.Cursor, last)
	}
	return e.frame(&ssp2.SubEnd{NextCursor: p.nextCursor})
}

// clientSub is one entry of the persisted subscription list.
type clientSub struct {
	ID         string              `json:"id"`
	Table      string              `json:"table"`
	Scopes     map[string][]string `json:"scopes"`
	Params     json.RawMessage     `json:"params,omitempty"`
	Status     string              `json:"status"`
	NextCursor int64               `json:"nextCursor"`
	// SchemaVersion is the codec version the pull that wrote the entry
	// accepted: realtime projects the subscription's deltas through it.
	SchemaVersion int32 `json:"schemaVersion,omitempty"`
}

// clientRecord is the client record after all sections (§4.5): the
// minimum nextCursor across the active sections (the previous cursor when
// none is active), the time, the request's subscription list replacing the
// stored one, and the wire version; nil when the stored one may stand
// (see unchanged).
func (s *Service) clientRecord(r Request, plans []plan) (*ports.ClientRecord, error) {
	cursor, have := int64(-1), false
	if r.Previous != nil {
		cursor = r.Previous.Cursor
	}
	list := make([]clientSub, 0, len(plans))
	bootstrap := false
	for i := range plans {
		p := &plans[i]
		status := "active"
		switch p.kind {
		case kindRevoked:
			status = "revoked"
		case kindReset:
			status = "reset"
		default:
			bootstrap = bootstrap || p.kind == kindBootstrap
			if !have || p.nextCursor < cursor {
				cursor, have = p.nextCursor, true
			}
		}
		cs := clientSub{ID: p.sub.ID, Table: p.sub.Table, Scopes: requestedMap(p.sub.Scopes), Status: status, NextCursor: p.nextCursor,
			SchemaVersion: r.version()}
		if p.sub.Params.Present {
			cs.Params = json.RawMessage(p.sub.Params.Value)
		}
		list = append(list, cs)
	}
	now := s.o.Now().UnixMilli()
	if !bootstrap && s.unchanged(r, cursor, list, now) {
		s.o.Metrics.clientRecordSkipped()
		return nil, nil
	}
	subs, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("encode subscriptions: %w", err)
	}
	return &ports.ClientRecord{
		Partition:     r.Partition,
		ClientID:      r.ClientID,
		ActorID:       r.ActorID,
		WireVersion:   int(r.WireVersion),
		Cursor:        cursor,
		Subscriptions: subs,
		UpdatedAtMs:   now,
	}, nil
}

// unchanged reports whether the stored record may stand for this pull:
// younger than ClientRefresh, same actor and wire version, the same
// subscriptions (id, table, scopes, params and status; their cursors
// aside), and a stored cursor the client's new one equals or, when the
// stored one is at least 0, passes. Retention then reads a cursor the
// client holds or has passed (pruning waits a little longer, never too
// little) and a client seen within the active window stays seen; a
// cursor moving back or leaving -1 is always written.
func (s *Service) unchanged(r Request, cursor int64, list []clientSub, now int64) bool {
	p := r.Previous
	if p == nil || s.o.ClientRefresh <= 0 || p.ActorID != r.ActorID || p.WireVersion != int(r.WireVersion) ||
		now < p.UpdatedAtMs || now-p.UpdatedAtMs >= s.o.ClientRefresh.Milliseconds() {
		return false
	}
	if cursor != p.Cursor && (p.Cursor < 0 || cursor < p.Cursor) {
		return false
	}
	var stored []clientSub
	if err := json.Unmarshal(p.Subscriptions, &stored); err != nil || len(stored) != len(list) {
		return false
	}
	for i := range list {
		a, b := &list[i], &stored[i]
		if a.ID != b.ID || a.Table != b.Table || a.Status != b.Status || a.SchemaVersion != b.SchemaVersion || !sameScopes(a.Scopes, b.Scopes) {
			return false
		}
		if len(a.Params) != 0 || len(b.Params) != 0 {
			// Stored params went through json.Marshal (compacted,
			// HTML-escaped); compare in that form.
			enc, err := json.Marshal(a.Params)
			if err != nil || !bytes.Equal(enc, b.Params) {
				return false
			}
		}
	}
	return true
}

func sameScopes(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !slices.Equal(va, vb) {
			return false
		}
	}
	return true
}

// emitter encodes response frames into the spool, reusing its buffers.
type emitter struct {
	out     *Spool
	wire    uint16
	buf     []byte
	changes []ssp2.Change
	tables  []string
	scopes  []ssp2.ScopeValue // arena of one frame's stored scopes
	rows    []byte            // arena of one frame's projected rows
	seg     bytes.Buffer
}

func (e *emitter) frame(f ssp2.Frame) error {
	var err error
	e.buf, err = ssp2.AppendFrame(e.buf[:0], ssp2.KindResponse, e.wire, f)
	if err != nil {
		return fmt.Errorf("encode %s: %w", f.FrameType(), err)
	}
	_, err = e.out.Write(e.buf)
	return err
}

// raw writes a frame whose payload is already encoded.
func (e *emitter) raw(t ssp2.FrameType, payload []byte) error {
	n := len(payload)
	hdr := [5]byte{byte(t), byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)}
	if _, err := e.out.Write(hdr[:]); err != nil {
		return err
	}
	_, err := e.out.Write(payload)
	return err
}

// project replaces the rows of the frame's changes with their projection
// onto an older schema version, all of them written into one arena
// first, so no row aliases a buffer that grew after it.
func (e *emitter) project(c *commit.Commit, proj *schema.Projection) error {
	e.rows = e.rows[:0]
	ends := make([]int, len(c.Changes))
	for i := range c.Changes {
		ch := &c.Changes[i]
		if ch.Op == commit.OpUpsert && ch.Table == proj.Current().Name {
			var err error
			if e.rows, err = rowcodec.Project(e.rows, ch.Row, proj); err != nil {
				return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("stored change %s/%s: %w", ch.Table, ch.RowID, err))
			}
		}
		ends[i] = len(e.rows)
	}
	start := 0
	for i := range c.Changes {
		if ends[i] > start {
			e.changes[i].Row = e.rows[start:ends[i]:ends[i]]
		}
		start = ends[i]
	}
	return nil
}

// storedScopes renders a change's scopes in key order into the frame's
// arena (sized up front, so earlier slices stay valid).
func (e *emitter) storedScopes(m map[string]string) ssp2.StoredScopes {
	start := len(e.scopes)
	for k, v := range m {
		e.scopes = append(e.scopes, ssp2.ScopeValue{Key: k, Value: v})
	}
	out := ssp2.StoredScopes(e.scopes[start:len(e.scopes):len(e.scopes)])
	if len(out) > 1 {
		// Keys compare by UTF-16 code units on the wire; the codec's own
		// helper owns that order.
		sorted := ssp2.StoredScopesFromMap(m)
		copy(out, sorted)
	}
	return out
}

// commit writes one COMMIT frame with a frame-local table dictionary;
// proj, when set, projects each row onto the client's older schema
// version (the window's changes are of the one table it projects).
func (e *emitter) commit(c *commit.Commit, proj *schema.Projection) error {
	e.tables = e.tables[:0]
	e.changes = e.changes[:0]
	n := 0
	for i := range c.Changes {
		n += len(c.Changes[i].Scopes)
	}
	if cap(e.scopes) < n {
		e.scopes = make([]ssp2.ScopeValue, 0, n)
	}
	e.scopes = e.scopes[:0]
	for i := range c.Changes {
		ch := &c.Changes[i]
		ti := -1
		for j, t := range e.tables {
			if t == ch.Table {
				ti = j
				break
			}
		}
		if ti < 0 {
			ti = len(e.tables)
			e.tables = append(e.tables, ch.Table)
		}
		out := ssp2.Change{TableIndex: uint16(ti), RowID: ch.RowID, Op: ssp2.Op(ch.Op), Scopes: e.storedScopes(ch.Scopes)}
		if ch.Op == commit.OpUpsert {
			out.RowVersion, out.Row = ch.RowVersion, ch.Row
		}
		e.changes = append(e.changes, out)
	}
	if proj != nil {
		if err := e.project(c, proj); err != nil {
			return err
		}
	}
	return e.frame(&ssp2.Commit{CommitSeq: c.Seq, CreatedAtMs: c.CreatedAtMs, ActorID: c.ActorID, Tables: e.tables, Changes: e.changes})
}
