package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/syncd-dev/syncd/app/segments"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

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
		if pin, err = s.build.ScopePin(ctx, r.Partition, p.table.Name, p.effective, b); err != nil {
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
	pg := segments.PageRequest{
		Key: ports.SegmentKey{
			Partition:     r.Partition,
			LogEpoch:      r.LogEpoch,
			Table:         p.table.Name,
			SchemaVersion: r.version(),
			MediaType:     ports.SegmentRows,
			ScopeDigest:   p.effective.Digest(),
			AsOfCommitSeq: pin,
			PageSize:      lim.SnapshotRows,
		},
		Filter:   p.effective,
		Header:   rowcodec.SegmentHeader{Table: p.table.Name, SchemaVersion: r.version(), Columns: p.table.Columns},
		Project:  p.proj,
		Inline:   lim.Accept&ssp2.AcceptInlineRows != 0,
		External: lim.Accept&ssp2.AcceptExternalRows != 0,
	}
	if rowCursor == "" {
		pg.Prefetched = p.firstPage
	}
	complete := false
	for page := 0; page < lim.SnapshotPages; page++ {
		if page > 0 && s.overBudget(e) {
			break
		}
		pg.Key.RowCursor = rowCursor
		next, err := s.page(ctx, e, r, &pg, lim.Accept)
		if err != nil {
			return err
		}
		pg.Prefetched = nil
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

// image serves the subscription's table as one sqlite image (§5.3),
// built or reused by the segment builder, and reports whether it did;
// when the builder declined, the rows lane serves the table.
func (s *Service) image(ctx context.Context, e *emitter, r Request, p *plan, lim Limits, pin int64) (bool, error) {
	key := ports.SegmentKey{
		Partition:     r.Partition,
		LogEpoch:      r.LogEpoch,
		Table:         p.table.Name,
		SchemaVersion: r.version(),
		MediaType:     ports.SegmentSQLite,
		ScopeDigest:   p.effective.Digest(),
		AsOfCommitSeq: pin,
	}
	img, err := s.build.Image(ctx, segments.ImageRequest{Key: key, Table: p.table, Project: p.proj, Filter: p.effective, PageSize: lim.SnapshotRows})
	if err != nil {
		return false, err
	}
	if !img.Found {
		p.firstPage = img.FirstPage
		return false, nil
	}
	return true, s.ref(ctx, e, r, key, lim.Accept, img.Publication)
}

// page delivers one snapshot page, built or reused by the segment
// builder, inline or as a SEGMENT_REF, and returns the row cursor after
// it ("" on the last page).
func (s *Service) page(ctx context.Context, e *emitter, r Request, pg *segments.PageRequest, accept uint8) (string, error) {
	out, err := s.build.Page(ctx, pg, &e.seg)
	if err != nil {
		return "", err
	}
	if out.Ref {
		return out.Next, s.ref(ctx, e, r, pg.Key, accept, out.Publication)
	}
	return out.Next, e.raw(ssp2.TypeSegmentInline, out.Bytes)
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
		url, exp, err := s.o.Signer.SignSegmentURL(ctx, ports.SegmentURLRequest{SegmentID: pub.SegmentID, ScopeDigest: key.ScopeDigest, Partition: r.Partition, NowMs: s.o.Now().UnixMilli()})
		if err != nil {
			return fmt.Errorf("sign segment url: %w", err)
		}
		if url != "" {
			f.URL, f.URLExpiresAtMs = ssp2.Some(url), ssp2.Some(exp)
		}
	}
	return e.frame(f)
}
