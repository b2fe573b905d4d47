package segments

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// blockRows is the SSG2 block size bootstrap pages are cut into (§5.2).
const blockRows = 1000

// PageRequest asks for one rows page of a bootstrap (SPEC §5.2).
type PageRequest struct {
	// Key is the page's publication key: media rows, its row cursor and
	// page size.
	Key    ports.SegmentKey
	Filter map[string][]string
	Header rowcodec.SegmentHeader
	// Project, when set, projects the stored rows onto an older schema
	// version's table (SPEC §9); Header and Key then name that version.
	Project *schema.Projection
	// Inline and External are the deliveries the client takes (accept
	// bits 0 and 1).
	Inline, External bool
	// Prefetched, when set, is the page's scan (limit+1 rows after its
	// row cursor) already read.
	Prefetched []commit.Row
}

// Page is one rows page to deliver.
type Page struct {
	// Next is the row cursor after the page ("" on the last page).
	Next string
	// Ref reports a page stored at Publication, to deliver as a
	// SEGMENT_REF; otherwise Bytes is the segment to deliver inline.
	Ref         bool
	Publication ports.SegmentPublication
	Bytes       []byte
}

// Page returns one snapshot page, encoding into buf when it reads or
// builds the bytes (Bytes stays valid until buf's next use). A page
// stored under its publication key (or inlined and cached a moment ago)
// is reused; a page is built at most once per key in this process: a
// request that misses joins the key's flight, and the one that leads it
// looks the key up again before building, since another leader may have
// stored the page between the first lookup and the join.
func (s *Builder) Page(ctx context.Context, pg *PageRequest, buf *bytes.Buffer) (Page, error) {
	canRef := pg.External && s.o.Segments != nil
	if !pg.Inline && !canRef {
		return Page{}, syncerr.Newf(syncerr.InternalError, "no segment store to deliver an external rows segment")
	}
	for {
		out, done, err := s.reusePage(ctx, pg, canRef, buf)
		if done || err != nil {
			return out, err
		}
		if !canRef {
			// Inline only: a large page is neither stored nor cached, so
			// waiting on another build would only serialize the builds.
			return s.buildPage(ctx, pg, canRef, buf)
		}
		wait, leader := s.flight.join(pg.Key)
		if leader {
			// Built and left between our lookup and the join: reuse it.
			out, done, err := s.reusePage(ctx, pg, canRef, buf)
			if !done && err == nil {
				out, err = s.buildPage(ctx, pg, canRef, buf)
			}
			s.flight.leave(pg.Key)
			return out, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return Page{}, ctx.Err()
		}
	}
}

// reusePage returns the page from the inline cache or the segment store
// when either holds it; done reports whether it did.
func (s *Builder) reusePage(ctx context.Context, pg *PageRequest, canRef bool, buf *bytes.Buffer) (out Page, done bool, err error) {
	if pg.Inline {
		if c, ok := s.cache.get(pg.Key, s.o.Now().UnixMilli()); ok {
			s.o.Metrics.PageReused()
			return Page{Next: c.next, Bytes: c.b}, true, nil
		}
	}
	if !canRef {
		return Page{}, false, nil
	}
	pub, ok, err := s.o.Segments.Find(ctx, pg.Key, s.o.Now().UnixMilli())
	if err != nil {
		return Page{}, true, fmt.Errorf("find segment: %w", err)
	}
	if !ok {
		return Page{}, false, nil
	}
	s.o.Metrics.PageReused()
	out, err = s.storedPage(ctx, pg, pub, buf)
	return out, true, err
}

// storedPage returns a stored publication: its bytes, read into buf, when
// the client takes inline rows and they are small (or it takes nothing
// else), else the publication to reference.
func (s *Builder) storedPage(ctx context.Context, pg *PageRequest, pub ports.SegmentPublication, buf *bytes.Buffer) (Page, error) {
	if pg.Inline && pub.ByteLength <= int64(s.o.InlineMaxBytes) {
		rc, size, err := s.o.Segments.Open(ctx, pub.SegmentID)
		if err != nil {
			return Page{}, fmt.Errorf("open segment: %w", err)
		}
		buf.Reset()
		buf.Grow(int(size))
		_, err = io.Copy(buf, rc)
		_ = rc.Close()
		if err != nil {
			return Page{}, fmt.Errorf("read segment: %w", err)
		}
		return Page{Next: pub.NextRowCursor, Bytes: buf.Bytes()}, nil
	}
	return Page{Next: pub.NextRowCursor, Ref: true, Publication: pub}, nil
}

// buildPage scans limit+1 rows after the page's row cursor, encodes the
// page as an SSG2 rows segment into buf and caches it to inline, or
// stores it to reference.
func (s *Builder) buildPage(ctx context.Context, pg *PageRequest, canRef bool, buf *bytes.Buffer) (Page, error) {
	limit := pg.Key.PageSize
	rows := pg.Prefetched
	if rows == nil {
		var err error
		if rows, err = s.o.Store.ScanRows(ctx, pg.Key.Partition, ports.RowScan{
			Table:       pg.Key.Table,
			ScopeFilter: pg.Filter,
			AfterRowID:  pg.Key.RowCursor,
			Limit:       limit + 1,
		}); err != nil {
			return Page{}, fmt.Errorf("scan rows: %w", err)
		}
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].RowID
	}
	buf.Reset()
	w, err := rowcodec.NewSegmentWriter(buf, pg.Header)
	if err != nil {
		return Page{}, fmt.Errorf("segment header: %w", err)
	}
	w.BlockRows = blockRows
	var scratch []byte // a projected row; the writer copies it
	for i := range rows {
		row := rows[i].Payload
		if pg.Project != nil {
			if scratch, err = rowcodec.Project(scratch[:0], row, pg.Project); err != nil {
				return Page{}, syncerr.Wrap(syncerr.InternalError, fmt.Errorf("stored row %s/%s: %w", pg.Key.Table, rows[i].RowID, err))
			}
			row = scratch
		}
		if err := w.WriteEncodedRow(rows[i].Version, row); err != nil {
			return Page{}, syncerr.Wrap(syncerr.InternalError, fmt.Errorf("stored row %s/%s: %w", pg.Key.Table, rows[i].RowID, err))
		}
	}
	if err := w.Close(); err != nil {
		return Page{}, fmt.Errorf("segment: %w", err)
	}
	s.o.Metrics.PageBuilt()
	b := buf.Bytes()
	if pg.Inline && (len(b) <= s.o.InlineMaxBytes || !canRef) {
		if len(b) <= s.o.InlineMaxBytes {
			s.cache.put(pg.Key, b, next, s.o.Now().Add(s.o.SegmentTTL).UnixMilli())
		}
		return Page{Next: next, Bytes: b}, nil
	}
	// The store may keep the slice: hand it over and start a new buffer.
	*buf = bytes.Buffer{}
	now := s.o.Now()
	pub, err := s.o.Segments.Put(ctx, b, ports.SegmentPublication{
		SegmentKey:    pg.Key,
		SegmentID:     contentaddr.Of(b),
		NextRowCursor: next,
		RowCount:      int64(len(rows)),
		ByteLength:    int64(len(b)),
		CreatedAtMs:   now.UnixMilli(),
		ExpiresAtMs:   now.Add(s.o.SegmentTTL).UnixMilli(),
	})
	if err != nil {
		return Page{}, fmt.Errorf("store segment: %w", err)
	}
	return Page{Next: next, Ref: true, Publication: pub}, nil
}
