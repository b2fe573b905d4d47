package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// blockRows is the SSG2 block size bootstrap pages are cut into (§5.2).
const blockRows = 1000

// resumeToken is the §4.7 bootstrap resume token.
type resumeToken struct {
	AsOfCommitSeq int64    `json:"asOfCommitSeq"`
	Tables        []string `json:"tables"`
	TableIndex    int      `json:"tableIndex"`
	RowCursor     *string  `json:"rowCursor"`
}

// parseToken reads a resume token strictly: exactly the four fields, a
// non-negative integer pin, the one-table list naming table, table index
// 0 and a non-empty row cursor or null. Anything else is unusable.
func parseToken(raw, table string) (pin int64, rowCursor string, ok bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil || len(fields) != 4 {
		return 0, "", false
	}
	for _, k := range []string{"asOfCommitSeq", "tables", "tableIndex", "rowCursor"} {
		if _, present := fields[k]; !present {
			return 0, "", false
		}
	}
	var t resumeToken
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return 0, "", false
	}
	if t.AsOfCommitSeq < 0 || len(t.Tables) != 1 || t.Tables[0] != table || t.TableIndex != 0 {
		return 0, "", false
	}
	if t.RowCursor != nil {
		if *t.RowCursor == "" {
			return 0, "", false
		}
		rowCursor = *t.RowCursor
	}
	return t.AsOfCommitSeq, rowCursor, true
}

func encodeToken(pin int64, table, rowCursor string) string {
	rc := rowCursor
	b, _ := json.Marshal(resumeToken{AsOfCommitSeq: pin, Tables: []string{table}, TableIndex: 0, RowCursor: &rc})
	return string(b)
}

// bootstrap writes a §4.7 bootstrap section: pinned at maxSeq (or the
// usable resume token's pin, or for a client taking sqlite images the
// scope pin), the whole table as one sqlite image when the client takes
// images and the table qualifies (§5.3), else up to SnapshotPages pages of
// SnapshotRows rows keyset by row id; nextCursor = pin, and a resume token
// while rows remain.
func (s *Service) bootstrap(ctx context.Context, e *emitter, r Request, p *plan, lim Limits, b ports.LogBounds) error {
	pin, rowCursor, resumed := b.MaxSeq, "", false
	if p.sub.BootstrapState.Present {
		tp, tc, ok := parseToken(p.sub.BootstrapState.Value, p.sub.Table)
		switch {
		case ok && tp >= b.HorizonSeq && tp <= b.MaxSeq:
			pin, rowCursor, resumed = tp, tc, true
		default:
			s.o.Metrics.restart()
		}
	}
	// §4.7: a bootstrap eligible for the image lane pins at its scope pin,
	// so a stored image stays the match for its key until a change
	// reaches its scope. Lanes are chosen only at a table's start (§5.3).
	imageLane := lim.Accept&ssp2.AcceptSQLite != 0 && sqliteimage.Eligible(p.table) && rowCursor == ""
	if imageLane && !resumed {
		var err error
		if pin, err = s.scopePin(ctx, r, p, b); err != nil {
			return err
		}
	}
	if err := e.frame(&ssp2.SubStart{ID: p.sub.ID, Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(p.effective), Bootstrap: true}); err != nil {
		return err
	}
	p.nextCursor = pin
	if imageLane {
		served, err := s.image(ctx, e, r, p, lim, pin)
		if err != nil {
			return err
		}
		if served {
			return e.frame(&ssp2.SubEnd{NextCursor: pin})
		}
	}
	pg := pageSpec{
		key: ports.SegmentKey{
			Partition:     r.Partition,
			LogEpoch:      r.LogEpoch,
			Table:         p.table.Name,
			SchemaVersion: r.Schema.Version,
			MediaType:     ports.SegmentRows,
			ScopeDigest:   p.effective.Digest(),
			AsOfCommitSeq: pin,
			PageSize:      lim.SnapshotRows,
		},
		filter: p.effective,
		header: rowcodec.SegmentHeader{Table: p.table.Name, SchemaVersion: r.Schema.Version, Columns: p.table.Columns},
		accept: lim.Accept,
	}
	if rowCursor == "" {
		pg.prefetched = p.firstPage
	}
	complete := false
	for page := 0; page < lim.SnapshotPages; page++ {
		if page > 0 && s.overBudget(e) {
			break
		}
		pg.key.RowCursor = rowCursor
		next, err := s.page(ctx, e, r, &pg)
		if err != nil {
			return err
		}
		pg.prefetched = nil
		if next == "" {
			complete = true
			break
		}
		rowCursor = next
	}
	end := &ssp2.SubEnd{NextCursor: pin}
	if !complete {
		end.BootstrapState = ssp2.Some(encodeToken(pin, p.sub.Table, rowCursor))
	}
	return e.frame(end)
}

type pageSpec struct {
	key    ports.SegmentKey
	filter map[string][]string
	header rowcodec.SegmentHeader
	accept uint8
	// prefetched, when set, is the page's scan (limit+1 rows after its
	// row cursor) already read.
	prefetched []commit.Row
}

// page delivers one snapshot page and returns the row cursor after it ("" on
// the last page). A page stored under its publication key (or inlined
// and cached a moment ago) is reused; a page is built at most once per key
// in this process: a request that misses joins the key's flight, and the
// one that leads it looks the key up again before building, since another
// leader may have stored the page between the first lookup and the join.
func (s *Service) page(ctx context.Context, e *emitter, r Request, pg *pageSpec) (string, error) {
	canInline := pg.accept&ssp2.AcceptInlineRows != 0
	canRef := pg.accept&ssp2.AcceptExternalRows != 0 && s.o.Segments != nil
	if !canInline && !canRef {
		return "", syncerr.Newf(syncerr.InternalError, "no segment store to deliver an external rows segment")
	}
	for {
		next, done, err := s.reusePage(ctx, e, r, pg, canInline, canRef)
		if done || err != nil {
			return next, err
		}
		if !canRef {
			// Inline only: a large page is neither stored nor cached, so
			// waiting on another build would only serialize the builds.
			return s.buildPage(ctx, e, r, pg, canInline, canRef)
		}
		wait, leader := s.flight.join(pg.key)
		if leader {
			// Built and left between our lookup and the join: reuse it.
			next, done, err := s.reusePage(ctx, e, r, pg, canInline, canRef)
			if !done && err == nil {
				next, err = s.buildPage(ctx, e, r, pg, canInline, canRef)
			}
			s.flight.leave(pg.key)
			return next, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// reusePage delivers the page from the inline cache or the segment store
// when either holds it; done reports whether it did.
func (s *Service) reusePage(ctx context.Context, e *emitter, r Request, pg *pageSpec, canInline, canRef bool) (next string, done bool, err error) {
	if canInline {
		if c, ok := s.cache.get(pg.key, s.o.Now().UnixMilli()); ok {
			s.o.Metrics.reused()
			return c.next, true, e.raw(ssp2.TypeSegmentInline, c.b)
		}
	}
	if !canRef {
		return "", false, nil
	}
	pub, ok, err := s.o.Segments.Find(ctx, pg.key, s.o.Now().UnixMilli())
	if err != nil {
		return "", true, fmt.Errorf("find segment: %w", err)
	}
	if !ok {
		return "", false, nil
	}
	s.o.Metrics.reused()
	next, err = s.deliverStored(ctx, e, r, pg, pub)
	return next, true, err
}

// deliverStored emits a stored publication: inline when the client takes
// inline rows and the bytes are small (or it takes nothing else), else as
// a SEGMENT_REF.
func (s *Service) deliverStored(ctx context.Context, e *emitter, r Request, pg *pageSpec, pub ports.SegmentPublication) (string, error) {
	canInline := pg.accept&ssp2.AcceptInlineRows != 0
	if canInline && pub.ByteLength <= int64(s.o.InlineMaxBytes) {
		rc, size, err := s.o.Segments.Open(ctx, pub.SegmentID)
		if err != nil {
			return "", fmt.Errorf("open segment: %w", err)
		}
		e.seg.Reset()
		e.seg.Grow(int(size))
		_, err = io.Copy(&e.seg, rc)
		_ = rc.Close()
		if err != nil {
			return "", fmt.Errorf("read segment: %w", err)
		}
		if err := e.raw(ssp2.TypeSegmentInline, e.seg.Bytes()); err != nil {
			return "", err
		}
		return pub.NextRowCursor, nil
	}
	if err := s.ref(ctx, e, r, pg.key, pg.accept, pub); err != nil {
		return "", err
	}
	return pub.NextRowCursor, nil
}

// buildPage scans limit+1 rows after the page's row cursor, encodes the
// page as an SSG2 rows segment and delivers it inline or stored.
func (s *Service) buildPage(ctx context.Context, e *emitter, r Request, pg *pageSpec, canInline, canRef bool) (string, error) {
	limit := pg.key.PageSize
	rows := pg.prefetched
	if rows == nil {
		var err error
		if rows, err = s.o.Store.ScanRows(ctx, r.Partition, ports.RowScan{
			Table:       pg.key.Table,
			ScopeFilter: pg.filter,
			AfterRowID:  pg.key.RowCursor,
			Limit:       limit + 1,
		}); err != nil {
			return "", fmt.Errorf("scan rows: %w", err)
		}
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].RowID
	}
	e.seg.Reset()
	w, err := rowcodec.NewSegmentWriter(&e.seg, pg.header)
	if err != nil {
		return "", fmt.Errorf("segment header: %w", err)
	}
	w.BlockRows = blockRows
	for i := range rows {
		if err := w.WriteEncodedRow(rows[i].Version, rows[i].Payload); err != nil {
			return "", syncerr.Wrap(syncerr.InternalError, fmt.Errorf("stored row %s/%s: %w", pg.key.Table, rows[i].RowID, err))
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("segment: %w", err)
	}
	s.o.Metrics.built()
	b := e.seg.Bytes()
	if canInline && (len(b) <= s.o.InlineMaxBytes || !canRef) {
		if len(b) <= s.o.InlineMaxBytes {
			s.cache.put(pg.key, b, next, s.o.Now().Add(s.o.SegmentTTL).UnixMilli())
		}
		return next, e.raw(ssp2.TypeSegmentInline, b)
	}
	// The store may keep the slice: hand it over and start a new buffer.
	e.seg = bytes.Buffer{}
	now := s.o.Now()
	pub, err := s.o.Segments.Put(ctx, b, ports.SegmentPublication{
		SegmentKey:    pg.key,
		SegmentID:     contentaddr.Of(b),
		NextRowCursor: next,
		RowCount:      int64(len(rows)),
		ByteLength:    int64(len(b)),
		CreatedAtMs:   now.UnixMilli(),
		ExpiresAtMs:   now.Add(s.o.SegmentTTL).UnixMilli(),
	})
	if err != nil {
		return "", fmt.Errorf("store segment: %w", err)
	}
	return next, s.ref(ctx, e, r, pg.key, pg.accept, pub)
}

// ref writes a SEGMENT_REF for pub published under key, with a signed URL
// when the client set accept bit 3 and a signer is configured (§5.4).
func (s *Service) ref(ctx context.Context, e *emitter, r Request, key ports.SegmentKey, accept uint8, pub ports.SegmentPublication) error {
	f := &ssp2.SegmentRef{
		SegmentID:     pub.SegmentID,
		MediaType:     ssp2.MediaType(key.MediaType),
		Table:         key.Table,
		ByteLength:    pub.ByteLength,
		RowCount:      pub.RowCount,
		AsOfCommitSeq: key.AsOfCommitSeq,
		ScopeDigest:   key.ScopeDigest,
	}
	if key.RowCursor != "" {
		f.RowCursor = ssp2.Some(key.RowCursor)
	}
	if pub.NextRowCursor != "" {
		f.NextRowCursor = ssp2.Some(pub.NextRowCursor)
	}
	if accept&ssp2.AcceptSignedURLs != 0 && s.o.Signer != nil {
		url, exp, err := s.o.Signer.SignSegmentURL(ctx, SignRequest{SegmentID: pub.SegmentID, ScopeDigest: key.ScopeDigest, Partition: r.Partition, NowMs: s.o.Now().UnixMilli()})
		if err != nil {
			return fmt.Errorf("sign segment url: %w", err)
		}
		if url != "" {
			f.URL, f.URLExpiresAtMs = ssp2.Some(url), ssp2.Some(exp)
		}
	}
	return e.frame(f)
}

// flight lets one request build a page while others with the same key wait.
type flight struct {
	mu    sync.Mutex
	calls map[ports.SegmentKey]*flightCall
}

type flightCall struct{ done chan struct{} }

func (f *flight) join(k ports.SegmentKey) (<-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.calls[k]; ok {
		return c.done, false
	}
	c := &flightCall{done: make(chan struct{})}
	f.calls[k] = c
	return c.done, true
}

func (f *flight) leave(k ports.SegmentKey) {
	f.mu.Lock()
	c := f.calls[k]
	delete(f.calls, k)
	f.mu.Unlock()
	if c != nil {
		close(c.done)
	}
}
