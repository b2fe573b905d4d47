package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// section is the state of one subscription section being applied.
type section struct {
	sub      *Subscription
	sec      Section
	fresh    bool // fresh bootstrap: the first page clears first
	cleared  bool
	failed   error
	staged   []stagedTable // applied at SUB_END, in arrival order
	effectiv map[string][]string
	payloads []byte // the chunk staged commit payloads are copied into
}

// stagedTable is a section's writes to one table, in arrival order: when
// finish applies them, a row's later write overrides its earlier one. A
// list, not a map by row id: a catch-up page stages a thousand rows, and
// appending them costs no hashing and no allocation per row.
type stagedTable struct {
	name string
	rows []stagedRow
}

type stagedRow struct {
	id      string
	row     Row
	deleted bool
}

// Commit payloads are copied into chunks that double from 1 KiB to 64
// KiB within a section: a thousand small rows share a few allocations
// instead of one each. A chunk stays alive while any row cut from it is
// in the replica, which for this client (tests and load) is the right
// trade for the allocations spared.
const (
	payloadChunkFirst = 1 << 10
	payloadChunkMax   = 64 << 10
)

// apply applies a response to the replica.
func (c *Client) apply(ctx context.Context, msg *ssp2.Message, sent map[string]reqSub) (*Result, error) {
	res := &Result{Sections: map[string]Section{}, Message: msg}
	var cur *section
	for _, f := range msg.Frames {
		switch f := f.(type) {
		case *ssp2.RespHeader:
			res.Header = *f
			if f.ResetRequired {
				c.resetAll()
			}
			if f.LogEpoch != "" {
				c.epoch = f.LogEpoch
			}
		case *ssp2.Lease:
			// §7.3.5: the held lease; a fresh one clears a lease error.
			c.lease = LeaseState{LeaseID: f.LeaseID, ExpiresAtMs: f.ExpiresAtMs}
			res.Lease = f
		case *ssp2.PushResult:
			res.Pushes = append(res.Pushes, f)
			c.ack(f.ClientCommitID)
		case *ssp2.SubStart:
			s := c.subs[f.ID]
			if s == nil {
				return res, fmt.Errorf("client: SUB_START for unknown subscription %q", f.ID)
			}
			rq := sent[f.ID]
			cur = &section{
				sub:      s,
				sec:      Section{Status: f.Status, Reason: f.ReasonCode, Bootstrap: f.Bootstrap, NextCursor: rq.cursor},
				fresh:    f.Bootstrap && rq.cursor < 0 && !rq.resumed, // §5.6: only a fresh bootstrap clears
				effectiv: f.EffectiveScopes.Map(),
			}
			if f.Status == ssp2.SubRevoked {
				// §3.3 purge: drop the local rows the last effective
				// scopes matched (requested values that never became
				// effective are not the server's to purge).
				c.purge(s.Table, s.Effective)
			}
		case *ssp2.Commit:
			if cur == nil {
				return res, errors.New("client: COMMIT outside a subscription section")
			}
			cur.sec.Commits++
			c.stats.Commits++
			if cur.failed == nil {
				cur.failed = c.stageCommit(cur, f)
			}
		case *ssp2.SegmentInline:
			if cur == nil {
				return res, errors.New("client: SEGMENT_INLINE outside a subscription section")
			}
			cur.sec.InlineSegments++
			c.stats.InlineSegments++
			if cur.failed == nil {
				cur.failed = c.stageSegment(cur, f.Payload)
			}
		case *ssp2.SegmentRef:
			if cur == nil {
				return res, errors.New("client: SEGMENT_REF outside a subscription section")
			}
			cur.sec.SegmentRefs = append(cur.sec.SegmentRefs, f)
			c.stats.SegmentRefs++
			if cur.failed == nil {
				var b []byte
				if b, cur.failed = c.download(ctx, cur.sub, f); cur.failed == nil {
					if f.MediaType == ssp2.MediaSQLite {
						cur.failed = c.stageImage(ctx, cur, f, b)
					} else {
						cur.failed = c.stageSegment(cur, b)
					}
				}
			}
		case *ssp2.SubEnd:
			if cur == nil {
				return res, errors.New("client: SUB_END outside a subscription section")
			}
			c.finish(cur, f)
			res.Sections[cur.sub.ID] = cur.sec
			cur = nil
		case *ssp2.Error:
			return res, &FrameError{Code: f.Code, Message: f.Message, Retryable: f.Retryable, Details: f.Details.Value}
		}
	}
	return res, nil
}

// ack removes an acknowledged pending commit.
func (c *Client) ack(id string) {
	for i, p := range c.pending {
		if p.ClientCommitID == id {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return
		}
	}
}

// resetAll forgets every cursor and row: the server's log epoch changed
// (restore), so the replica re-bootstraps.
func (c *Client) resetAll() {
	for _, s := range c.subs {
		s.Cursor, s.BootstrapState = -1, ""
	}
	c.rows = map[string]map[string]Row{}
}

// finish persists a section's SUB_END, or drops it when the section failed.
func (c *Client) finish(cur *section, f *ssp2.SubEnd) {
	s := cur.sub
	s.Status, s.Reason = cur.sec.Status, cur.sec.Reason
	if cur.sec.Status == ssp2.SubActive {
		// §3.3: only an active echo replaces the persisted effective
		// scopes; a reset or revocation echoes an empty map, and the
		// purge and eviction rules need the last active one.
		s.Effective = cur.effectiv
	}
	s.Err = cur.failed
	cur.sec.Err = cur.failed
	if cur.failed != nil {
		return
	}
	for _, st := range cur.staged {
		if len(c.rows[st.name]) == 0 {
			c.rows[st.name] = make(map[string]Row, len(st.rows)) // a bootstrap: sized once
		}
		t := c.table(st.name)
		for _, r := range st.rows {
			if r.deleted {
				delete(t, r.id)
			} else {
				t[r.id] = r.row
			}
		}
	}
	cur.sec.NextCursor = f.NextCursor
	switch cur.sec.Status {
	case ssp2.SubActive:
		s.Cursor = f.NextCursor
		s.BootstrapState = ""
		if f.BootstrapState.Present {
			s.BootstrapState = f.BootstrapState.Value
			cur.sec.BootstrapState = f.BootstrapState.Value
		}
	case ssp2.SubReset:
		s.Cursor, s.BootstrapState = -1, ""
	case ssp2.SubRevoked:
		s.BootstrapState = ""
	}
}

func (c *Client) table(name string) map[string]Row {
	t := c.rows[name]
	if t == nil {
		t = map[string]Row{}
		c.rows[name] = t
	}
	return t
}

// stage records a write of row id of table; stageDelete its deletion.
func (cur *section) stage(table, id string, r Row) {
	t := cur.stagedTo(table)
	t.rows = append(t.rows, stagedRow{id: id, row: r})
}

func (cur *section) stageDelete(table, id string) {
	t := cur.stagedTo(table)
	t.rows = append(t.rows, stagedRow{id: id, deleted: true})
}

// reserve makes room for n more staged writes to table.
func (cur *section) reserve(table string, n int) {
	t := cur.stagedTo(table)
	t.rows = slices.Grow(t.rows, n)
}

// stagedTo returns table's staged writes; a section holds one table's
// rows, rarely more, so a scan beats a map.
func (cur *section) stagedTo(table string) *stagedTable {
	for i := range cur.staged {
		if cur.staged[i].name == table {
			return &cur.staged[i]
		}
	}
	cur.staged = append(cur.staged, stagedTable{name: table})
	return &cur.staged[len(cur.staged)-1]
}

// copyPayload copies a commit payload out of the response body into the
// section's chunk, capped so that nothing appended to it reaches a
// neighbour.
func (cur *section) copyPayload(b []byte) []byte {
	if len(b) > payloadChunkMax/4 {
		return bytes.Clone(b)
	}
	if cap(cur.payloads)-len(cur.payloads) < len(b) {
		cur.payloads = make([]byte, 0, max(min(2*cap(cur.payloads), payloadChunkMax), payloadChunkFirst))
	}
	n := len(cur.payloads)
	cur.payloads = append(cur.payloads, b...)
	return cur.payloads[n:len(cur.payloads):len(cur.payloads)]
}

func (c *Client) stageCommit(cur *section, f *ssp2.Commit) error {
	for _, ch := range f.Changes {
		if int(ch.TableIndex) >= len(f.Tables) {
			return fmt.Errorf("client: commit %d: table index %d out of range", f.CommitSeq, ch.TableIndex)
		}
		table := f.Tables[ch.TableIndex]
		codec := c.codecs[table]
		if codec == nil {
			return fmt.Errorf("client: commit %d: unknown table %q", f.CommitSeq, table)
		}
		if ch.Op == ssp2.OpDelete {
			cur.stageDelete(table, ch.RowID)
			continue
		}
		if err := codec.ValidateRow(ch.Row); err != nil {
			return fmt.Errorf("client: commit %d: %s/%s: %w", f.CommitSeq, table, ch.RowID, err)
		}
		cur.stage(table, ch.RowID, Row{Version: ch.RowVersion, Payload: cur.copyPayload(ch.Row)})
	}
	return nil
}

// stageSegment applies a rows segment: on the first page of a fresh
// bootstrap it first clears the rows the effective scopes match (§5.6).
func (c *Client) stageSegment(cur *section, b []byte) error {
	sr, err := rowcodec.NewSegmentReader(b)
	if err != nil {
		return fmt.Errorf("client: segment: %w", err)
	}
	t := c.o.Schema.Table(sr.Header().Table)
	if t == nil || t.Name != cur.sub.Table {
		return fmt.Errorf("client: segment for table %q in a %q section", sr.Header().Table, cur.sub.Table)
	}
	if err := sr.Header().CheckTable(t); err != nil {
		return fmt.Errorf("client: segment: %w", err)
	}
	if cur.fresh && !cur.cleared {
		cur.cleared = true
		for id, r := range c.rows[t.Name] {
			if c.matches(t, r.Payload, cur.effectiv) {
				cur.stageDelete(t.Name, id)
			}
		}
	}
	codec := c.codecs[t.Name]
	for {
		rows, err := sr.NextBlock()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("client: segment: %w", err)
		}
		for _, row := range rows {
			id, ok := rowcodec.ScopeString(row.Values[t.PKIndex])
			if !ok {
				return errors.New("client: segment row without a primary key")
			}
			p, err := codec.AppendRow(nil, row.Values)
			if err != nil {
				return fmt.Errorf("client: segment row %s: %w", id, err)
			}
			cur.stage(t.Name, id, Row{Version: row.ServerVersion, Payload: p})
			c.stats.BootstrapRows++
		}
	}
}

// matches is the §3.3 matching rule on a local row.
func (c *Client) matches(t *schema.Table, payload []byte, m map[string][]string) bool {
	vals, err := c.codecs[t.Name].DecodeRow(payload, nil)
	if err != nil {
		return false
	}
	for k, allowed := range m {
		sc, ok := t.ScopeFor(k)
		if !ok {
			return false
		}
		i := t.ColumnIndex(scopes.Column(sc))
		if i < 0 {
			return false
		}
		v, ok := rowcodec.ScopeString(vals[i])
		if !ok {
			return false
		}
		found := false
		for _, a := range allowed {
			if a == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (c *Client) purge(table string, m map[string][]string) {
	t := c.o.Schema.Table(table)
	if t == nil || len(m) == 0 {
		return // no scopes match nothing, never everything
	}
	for id, r := range c.rows[table] {
		if c.matches(t, r.Payload, m) {
			delete(c.rows[table], id)
		}
	}
}

// SegmentError is a failed segment download.
type SegmentError struct {
	SegmentID string
	Signed    bool
	Err       error
}

func (e *SegmentError) Error() string {
	how := "direct"
	if e.Signed {
		how = "signed url"
	}
	return fmt.Sprintf("segment %s (%s): %v", e.SegmentID, how, e.Err)
}

func (e *SegmentError) Unwrap() error { return e.Err }

// download fetches a referenced segment (§5.4, §5.5) and verifies its
// content address and length.
func (c *Client) download(ctx context.Context, s *Subscription, f *ssp2.SegmentRef) ([]byte, error) {
	switch {
	case f.MediaType == ssp2.MediaSQLite && c.o.Accept&ssp2.AcceptSQLite == 0:
		// §4.2: a media type the client did not advertise is a broken server.
		return nil, &SegmentError{SegmentID: f.SegmentID, Err: syncerr.Newf(syncerr.InvalidRequest, "sqlite segment but accept bit 2 was not sent")}
	case f.MediaType == ssp2.MediaSQLite && (f.RowCursor.Present || f.NextRowCursor.Present):
		// §5.3: an image is the whole table, never a page.
		return nil, &SegmentError{SegmentID: f.SegmentID, Err: syncerr.Newf(syncerr.InvalidRequest, "sqlite segment with a row cursor")}
	case f.MediaType != ssp2.MediaRows && f.MediaType != ssp2.MediaSQLite:
		return nil, &SegmentError{SegmentID: f.SegmentID, Err: fmt.Errorf("media type %d", f.MediaType)}
	}
	signed := f.URL.Present
	if signed && c.o.Accept&ssp2.AcceptSignedURLs == 0 {
		// §5.4: a url the client did not ask for is a broken server.
		return nil, &SegmentError{SegmentID: f.SegmentID, Signed: true, Err: errors.New("descriptor has a url but accept bit 3 was not sent")}
	}
	b, err := c.fetchSegment(ctx, s, f)
	if err != nil {
		return nil, &SegmentError{SegmentID: f.SegmentID, Signed: signed, Err: err}
	}
	if contentaddr.Of(b) != f.SegmentID {
		return nil, &SegmentError{SegmentID: f.SegmentID, Signed: signed, Err: errors.New("content address mismatch")}
	}
	if int64(len(b)) != f.ByteLength {
		return nil, &SegmentError{SegmentID: f.SegmentID, Signed: signed, Err: fmt.Errorf("%d bytes, descriptor says %d", len(b), f.ByteLength)}
	}
	c.stats.SegmentDownloads++
	if signed {
		c.stats.SignedDownloads++
	}
	c.stats.SegmentBytes += int64(len(b))
	return b, nil
}

// DownloadSegment fetches a segment through the direct endpoint with the
// subscription's requested scopes (tests of the endpoint). The bytes are
// verified against the content address.
func (c *Client) DownloadSegment(ctx context.Context, subID, segmentID string) ([]byte, error) {
	s := c.subs[subID]
	if s == nil {
		return nil, fmt.Errorf("client: no subscription %q", subID)
	}
	b, err := c.fetchSegment(ctx, s, &ssp2.SegmentRef{SegmentID: segmentID})
	if err != nil {
		return nil, err
	}
	if contentaddr.Of(b) != segmentID {
		return nil, errors.New("client: content address mismatch")
	}
	return b, nil
}

// FetchURL fetches a signed segment URL the way a descriptor's url is
// fetched: no host authentication, no scopes header.
func (c *Client) FetchURL(ctx context.Context, url string) ([]byte, error) {
	return c.fetchSegment(ctx, nil, &ssp2.SegmentRef{URL: ssp2.Some(url)})
}

func (c *Client) fetchSegment(ctx context.Context, s *Subscription, f *ssp2.SegmentRef) ([]byte, error) {
	var req *http.Request
	var err error
	if f.URL.Present {
		if f.URLExpiresAtMs.Present && time.Now().UnixMilli() >= f.URLExpiresAtMs.Value {
			return nil, &HTTPError{Status: 0, Code: "sync.segment_expired", Message: "signed url expired before fetch"}
		}
		// The URL is the entire grant: no host credentials (§5.4).
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, f.URL.Value, nil)
		if err != nil {
			return nil, err
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.o.BaseURL+"/segments/"+f.SegmentID, nil)
		if err != nil {
			return nil, err
		}
		for k, vs := range c.o.Header {
			req.Header[k] = append([]string(nil), vs...)
		}
		req.Header.Set("X-Syncular-Scopes", string(canonjson.ScopeJSON(s.Scopes)))
	}
	req.Header.Set("Accept-Encoding", c.o.AcceptEncoding)
	return c.do(req, "GET segment")
}
