package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// ProtocolError is an SSP2 failure the server reported or the loader
// detected in a response: an ERROR frame, a rejected commit, an undecodable
// response, an unexpected reset. Any one fails the run.
type ProtocolError struct {
	Code   string
	Detail string
}

func (e *ProtocolError) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

func protoErr(code, format string, args ...any) error {
	return &ProtocolError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// errorCode classifies err for the error table.
func errorCode(err error) string {
	var pe *ProtocolError
	var se *StatusError
	switch {
	case errors.As(err, &pe):
		return pe.Code
	case errors.As(err, &se):
		var body struct {
			Code string `json:"code"`
		}
		if json.Unmarshal([]byte(se.Body), &body) == nil && body.Code != "" {
			return fmt.Sprintf("%s (HTTP %d)", body.Code, se.Status)
		}
		return fmt.Sprintf("http.%d", se.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "transport.timeout"
	default:
		return "transport.error"
	}
}

// session is one virtual SSP2 client: its identity, client id and log
// epoch. It speaks the wire directly with domain/ssp2 and domain/rowcodec.
type session struct {
	t        Transport
	id       Identity
	wire     uint16
	clientID string
	fx       *fixture
	epoch    string
	buf      []byte
	// segment, when set, times each segment download as its own request.
	segment func(ctx context.Context, f func() (bytes, items int, err error)) error
}

func (s *session) header(epoch bool) *ssp2.ReqHeader {
	h := &ssp2.ReqHeader{ClientID: s.clientID, SchemaVersion: s.fx.schema.Version}
	if epoch {
		h.LogEpoch = ssp2.Some(s.epoch)
	}
	return h
}

// exchange encodes frames as one request, sends it and decodes the answer.
func (s *session) exchange(ctx context.Context, frames []ssp2.Frame) (*ssp2.Message, int, error) {
	var err error
	s.buf, err = ssp2.AppendEncode(s.buf[:0], &ssp2.Message{WireVersion: s.wire, Kind: ssp2.KindRequest, Frames: frames})
	if err != nil {
		return nil, 0, fmt.Errorf("encode request: %w", err)
	}
	body, err := s.t.Sync(ctx, s.id, s.buf)
	if err != nil {
		return nil, 0, err
	}
	m, err := ssp2.DecodeWith(body, ssp2.DecodeOptions{Versions: []uint16{s.wire}})
	if err != nil {
		return nil, len(body), protoErr("loader.bad_response", "%v", err)
	}
	if m.Kind != ssp2.KindResponse {
		return nil, len(body), protoErr("loader.bad_response", "message kind %v", m.Kind)
	}
	for _, f := range m.Frames {
		if e, ok := f.(*ssp2.Error); ok {
			return m, len(body), &ProtocolError{Code: e.Code, Detail: e.Message}
		}
	}
	rh, ok := m.Frames[0].(*ssp2.RespHeader)
	if !ok {
		return nil, len(body), protoErr("loader.bad_response", "first frame %T", m.Frames[0])
	}
	if rh.RequiredSchemaVersion.Present {
		return m, len(body), protoErr("loader.schema_floor", "server requires schema version %d", rh.RequiredSchemaVersion.Value)
	}
	return m, len(body), nil
}

// acquireEpoch is a fresh client's first request: no log epoch, a pull
// without subscriptions; the server answers a reset carrying the epoch.
func (s *session) acquireEpoch(ctx context.Context) error {
	m, _, err := s.exchange(ctx, []ssp2.Frame{s.header(false), &ssp2.PullHeader{Accept: ssp2.AcceptInlineRows}})
	if err != nil {
		return err
	}
	rh := m.Frames[0].(*ssp2.RespHeader)
	if rh.LogEpoch == "" {
		return protoErr("loader.bad_response", "epoch acquisition answered no log epoch")
	}
	s.epoch = rh.LogEpoch
	return nil
}

// checkReset fails on a reset answer to a request that carried the epoch.
func (s *session) checkReset(m *ssp2.Message) error {
	rh := m.Frames[0].(*ssp2.RespHeader)
	if rh.ResetRequired {
		return protoErr("loader.unexpected_reset", "log epoch %q replaced by %q", s.epoch, rh.LogEpoch)
	}
	return nil
}

// push sends commits and checks that every one was applied (or cached).
func (s *session) push(ctx context.Context, commits []*ssp2.PushCommit) (int, error) {
	_, n, err := s.pushResults(ctx, commits)
	return n, err
}

// pushSeqs pushes and returns the commit seqs.
func (s *session) pushSeqs(ctx context.Context, commits []*ssp2.PushCommit) ([]int64, error) {
	seqs, _, err := s.pushResults(ctx, commits)
	return seqs, err
}

func (s *session) pushResults(ctx context.Context, commits []*ssp2.PushCommit) ([]int64, int, error) {
	seqs := make([]int64, 0, len(commits))
	frames := make([]ssp2.Frame, 0, 1+len(commits))
	frames = append(frames, s.header(true))
	for _, c := range commits {
		frames = append(frames, c)
	}
	m, n, err := s.exchange(ctx, frames)
	if err != nil {
		return nil, n, err
	}
	if err := s.checkReset(m); err != nil {
		return nil, n, err
	}
	got := 0
	for _, f := range m.Frames {
		pr, ok := f.(*ssp2.PushResult)
		if !ok {
			continue
		}
		got++
		if pr.Status == ssp2.PushRejected {
			code, msg := "sync.push_rejected", ""
			for _, r := range pr.Results {
				if r.Status != ssp2.OpApplied {
					code, msg = r.Code, r.Message
					break
				}
			}
			return nil, n, protoErr(code, "commit %s rejected: %s", pr.ClientCommitID, msg)
		}
		seqs = append(seqs, pr.CommitSeq)
	}
	if got != len(commits) {
		return nil, n, protoErr("loader.bad_response", "%d push results for %d commits", got, len(commits))
	}
	return seqs, n, nil
}

// sub is one subscription's client-side state.
type sub struct {
	id        string
	table     string
	scopes    ssp2.ScopeLists
	scopeJSON string // canonical JSON of scopes, for segment downloads
	cursor    int64
	state     ssp2.Optional[string]
}

// pullStats is what one pull delivered.
type pullStats struct {
	bytes     int // response and segment bytes
	commits   int
	changes   int
	rows      int // bootstrap rows (inline and downloaded)
	segments  int // downloaded segments
	segBytes  int
	resets    int // subscriptions answered with status reset
	bootstrap bool
	more      bool // some subscription has a bootstrap still in progress
}

// pullOptions are the PULL_HEADER knobs.
type pullOptions struct {
	limitCommits, limitRows, maxPages int32
	accept                            uint8
	allowReset                        bool
}

// pull runs one pull round over subs, applies what arrives (decodes every
// row, downloads referenced segments) and advances the subscriptions.
func (s *session) pull(ctx context.Context, subs []*sub, o pullOptions) (pullStats, error) {
	var st pullStats
	frames := make([]ssp2.Frame, 0, 2+len(subs))
	frames = append(frames, s.header(true), &ssp2.PullHeader{
		LimitCommits: o.limitCommits, LimitSnapshotRows: o.limitRows, MaxSnapshotPages: o.maxPages, Accept: o.accept,
	})
	for _, sb := range subs {
		frames = append(frames, &ssp2.Subscription{ID: sb.id, Table: sb.table, Scopes: sb.scopes,
			Cursor: sb.cursor, BootstrapState: sb.state})
	}
	m, n, err := s.exchange(ctx, frames)
	st.bytes = n
	if err != nil {
		return st, err
	}
	if err := s.checkReset(m); err != nil {
		return st, err
	}
	byID := make(map[string]*sub, len(subs))
	for _, sb := range subs {
		byID[sb.id] = sb
	}
	var cur *sub
	for _, f := range m.Frames[1:] {
		switch f := f.(type) {
		case *ssp2.SubStart:
			cur = byID[f.ID]
			if cur == nil {
				return st, protoErr("loader.bad_response", "SUB_START for unknown subscription %q", f.ID)
			}
			switch f.Status {
			case ssp2.SubActive:
			case ssp2.SubReset:
				if !o.allowReset {
					return st, protoErr(f.ReasonCode, "subscription %s reset", f.ID)
				}
				st.resets++
			default:
				return st, protoErr(f.ReasonCode, "subscription %s %v", f.ID, f.Status)
			}
			if f.Bootstrap {
				st.bootstrap = true
			}
		case *ssp2.Commit:
			st.commits++
			st.changes += len(f.Changes)
			for _, ch := range f.Changes {
				if ch.Op == ssp2.OpUpsert {
					if err := s.applyRow(ch.Row); err != nil {
						return st, err
					}
				}
			}
		case *ssp2.SegmentInline:
			rows, err := s.applySegment(f.Payload)
			if err != nil {
				return st, err
			}
			st.rows += rows
		case *ssp2.SegmentRef:
			if cur == nil {
				return st, protoErr("loader.bad_response", "SEGMENT_REF outside a subscription")
			}
			ref := f.SegmentID
			if f.URL.Present {
				ref = f.URL.Value
			}
			var b []byte
			download := func() (int, int, error) {
				var err error
				b, err = s.t.Segment(ctx, s.id, ref, cur.scopeJSON)
				return len(b), int(f.RowCount), err
			}
			if s.segment != nil {
				err = s.segment(ctx, download)
			} else {
				_, _, err = download()
			}
			if err != nil {
				return st, err
			}
			st.segments++
			st.segBytes += len(b)
			st.bytes += len(b)
			if int64(len(b)) != f.ByteLength {
				return st, protoErr("loader.bad_segment", "segment %s: %d bytes, ref says %d", f.SegmentID, len(b), f.ByteLength)
			}
			rows, err := s.applySegment(b)
			if err != nil {
				return st, err
			}
			if int64(rows) != f.RowCount {
				return st, protoErr("loader.bad_segment", "segment %s: %d rows, ref says %d", f.SegmentID, rows, f.RowCount)
			}
			st.rows += rows
		case *ssp2.SubEnd:
			if cur == nil {
				return st, protoErr("loader.bad_response", "SUB_END outside a subscription")
			}
			cur.cursor = f.NextCursor
			cur.state = f.BootstrapState
			if f.BootstrapState.Present {
				st.more = true
			}
			cur = nil
		}
	}
	return st, nil
}

// applyRow decodes a COMMIT row the way a client applying it would.
func (s *session) applyRow(row []byte) error {
	if err := s.fx.codec.ValidateRow(row); err != nil {
		return protoErr("loader.bad_row", "%v", err)
	}
	return nil
}

// applySegment decodes every row of an SSG2 rows segment and returns the
// row count.
func (s *session) applySegment(b []byte) (int, error) {
	r, err := rowcodec.NewSegmentReader(b)
	if err != nil {
		return 0, protoErr("loader.bad_segment", "%v", err)
	}
	r.Reuse = true
	n := 0
	for {
		rows, err := r.NextBlock()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, protoErr("loader.bad_segment", "%v", err)
		}
		n += len(rows)
	}
}
