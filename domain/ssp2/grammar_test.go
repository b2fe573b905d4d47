package ssp2_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/domain/wire"
)

type raw struct {
	t       ssp2.FrameType
	payload []byte
}

// envelope builds message bytes from raw frames plus END.
func envelope(kind ssp2.Kind, version uint16, frames ...raw) []byte {
	b := ssp2.AppendHeader(nil, version, kind)
	w := wire.Writer{B: b}
	for _, f := range frames {
		w.U8(uint8(f.t))
		w.U32(uint32(len(f.payload)))
		w.Raw(f.payload)
	}
	w.U8(0)
	w.U32(0)
	return w.B
}

func payload(f func(w *wire.Writer)) []byte {
	var w wire.Writer
	f(&w)
	return w.B
}

func encodeFrame(t *testing.T, kind ssp2.Kind, version uint16, f ssp2.Frame) raw {
	t.Helper()
	b, err := ssp2.AppendFrame(nil, kind, version, f)
	if err != nil {
		t.Fatalf("%T: %v", f, err)
	}
	return raw{t: ssp2.FrameType(b[0]), payload: b[5:]}
}

func TestDecodeRejectsGrammarAndLayoutViolations(t *testing.T) {
	const v3 = 3
	req := ssp2.KindRequest
	resp := ssp2.KindResponse
	reqHdr := encodeFrame(t, req, v3, &ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1})
	pull := encodeFrame(t, req, v3, &ssp2.PullHeader{Accept: 3})
	respHdr := encodeFrame(t, resp, v3, &ssp2.RespHeader{LogEpoch: "e"})
	subStart := encodeFrame(t, resp, v3, &ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeLists{}})
	subEnd := encodeFrame(t, resp, v3, &ssp2.SubEnd{NextCursor: 1})
	errFrame := encodeFrame(t, resp, v3, &ssp2.Error{Code: "sync.internal_error"})
	commit := encodeFrame(t, resp, v3, &ssp2.Commit{CommitSeq: 1, Tables: []string{"t"}, Changes: []ssp2.Change{{RowID: "r", Op: ssp2.OpDelete}}})
	segRef := encodeFrame(t, resp, v3, &ssp2.SegmentRef{SegmentID: "s", MediaType: ssp2.MediaRows})
	lease := encodeFrame(t, resp, v3, &ssp2.Lease{LeaseID: "l", ExpiresAtMs: 1})
	unknown := raw{t: 0x17, payload: []byte("x")}
	rejected := encodeFrame(t, resp, v3, &ssp2.PushResult{ClientCommitID: "c1", Status: ssp2.PushRejected,
		Results: []ssp2.OpResult{{OpIndex: 0, Status: ssp2.OpError, Code: "x.y"}}})
	details := encodeFrame(t, resp, v3, &ssp2.PushResultDetails{ClientCommitID: "c1", Entries: []ssp2.DetailEntry{{OpIndex: 0, Details: ssp2.RejectionDetails{Reason: "bad_value"}}}})
	detailsOp1 := encodeFrame(t, resp, v3, &ssp2.PushResultDetails{ClientCommitID: "c1", Entries: []ssp2.DetailEntry{{OpIndex: 1, Details: ssp2.RejectionDetails{Reason: "bad_value"}}}})

	sub := func(scopes func(w *wire.Writer)) raw {
		return raw{ssp2.TypeSubscription, payload(func(w *wire.Writer) {
			w.Str("s")
			w.Str("t")
			scopes(w)
			w.Opt(false)
			w.I64(0)
			w.Opt(false)
		})}
	}
	pushCommit := func(clientCommitID string, ops int) raw {
		return raw{ssp2.TypePushCommit, payload(func(w *wire.Writer) {
			w.Str(clientCommitID)
			w.U32(uint32(ops))
			for range ops {
				w.Str("t")
				w.Str("r")
				w.U8(2)
				w.Opt(false)
				w.Opt(false)
			}
		})}
	}
	pushResult := func(status uint8, seq bool) raw {
		return raw{ssp2.TypePushResult, payload(func(w *wire.Writer) {
			w.Str("c1")
			w.U8(status)
			w.Opt(seq)
			if seq {
				w.I64(5)
			}
			w.U32(0)
		})}
	}

	cases := []struct {
		name string
		in   []byte
		code syncerr.Code
	}{
		{"request/frame-after-error-is-response-only", envelope(req, v3, reqHdr, pull, errFrame), syncerr.InvalidRequest},
		{"request/response-only-frame", envelope(req, v3, reqHdr, pull, subStart), syncerr.InvalidRequest},
		{"request/no-push-no-pull", envelope(req, v3, reqHdr), syncerr.InvalidRequest},
		{"request/first-frame-unknown", envelope(req, v3, unknown, reqHdr, pull), syncerr.InvalidRequest},
		{"request/duplicate-header", envelope(req, v3, reqHdr, reqHdr, pull), syncerr.InvalidRequest},
		{"request/push-after-pull", envelope(req, v3, reqHdr, pull, pushCommit("c", 1)), syncerr.InvalidRequest},
		{"request/subscription-without-pull", envelope(req, v3, reqHdr, pushCommit("c", 1), sub(func(w *wire.Writer) { w.U32(0) })), syncerr.InvalidRequest},
		{"request/empty-commit", envelope(req, v3, reqHdr, pushCommit("c", 0)), syncerr.EmptyCommit},
		{"request/empty-client-commit-id", envelope(req, v3, reqHdr, pushCommit("", 1)), syncerr.InvalidRequest},
		{"request/unsorted-scope-keys", envelope(req, v3, reqHdr, pull, sub(func(w *wire.Writer) {
			w.U32(2)
			w.Str("b")
			w.U32(0)
			w.Str("a")
			w.U32(0)
		})), syncerr.InvalidRequest},
		{"request/duplicate-scope-keys", envelope(req, v3, reqHdr, pull, sub(func(w *wire.Writer) {
			w.U32(2)
			w.Str("a")
			w.U32(0)
			w.Str("a")
			w.U32(0)
		})), syncerr.InvalidRequest},
		{"request/scope-keys-in-utf8-not-utf16-order", envelope(req, v3, reqHdr, pull, sub(func(w *wire.Writer) {
			w.U32(2)
			w.Str("\uff61")
			w.U32(0)
			w.Str("\U0001F600")
			w.U32(0)
		})), syncerr.InvalidRequest},
		{"request/non-utf8-client-id", envelope(req, v3, raw{ssp2.TypeReqHeader, payload(func(w *wire.Writer) {
			w.Bytes([]byte{0xc0, 0xaf})
			w.I32(1)
			w.Opt(false)
		})}, pull), syncerr.InvalidRequest},
		{"request/schema-version-zero", envelope(req, v3, raw{ssp2.TypeReqHeader, payload(func(w *wire.Writer) {
			w.Str("c")
			w.I32(0)
			w.Opt(false)
		})}, pull), syncerr.InvalidRequest},
		{"request/cursor-beyond-safe-integer", envelope(req, v3, reqHdr, pull, raw{ssp2.TypeSubscription, payload(func(w *wire.Writer) {
			w.Str("s")
			w.Str("t")
			w.U32(0)
			w.Opt(false)
			w.I64(1 << 53)
			w.Opt(false)
		})}), syncerr.InvalidRequest},
		{"request/params-not-json", envelope(req, v3, reqHdr, pull, raw{ssp2.TypeSubscription, payload(func(w *wire.Writer) {
			w.Str("s")
			w.Str("t")
			w.U32(0)
			w.Opt(true)
			w.Str("{nope")
			w.I64(0)
			w.Opt(false)
		})}), syncerr.InvalidRequest},
		{"request/accept-high-bits", envelope(req, v3, reqHdr, raw{ssp2.TypePullHeader, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x13}}), syncerr.InvalidRequest},
		{"request/length-prefix-past-end", envelope(req, v3, raw{ssp2.TypeReqHeader, []byte{0xff, 0, 0, 0, 'c'}}, pull), syncerr.InvalidRequest},
		{"request/trailing-bytes-in-frame", envelope(req, v3, reqHdr, raw{ssp2.TypePullHeader, append(append([]byte(nil), pull.payload...), 0)}), syncerr.InvalidRequest},
		{"request/end-with-length", append(envelope(req, v3, reqHdr, pull)[:len(envelope(req, v3, reqHdr, pull))-4], 1, 0, 0, 0, 0), syncerr.InvalidRequest},
		{"request/bytes-after-end", append(envelope(req, v3, reqHdr, pull), 0), syncerr.InvalidRequest},
		{"request/unknown-msg-kind", func() []byte { b := envelope(req, v3, reqHdr, pull); b[6] = 3; return b }(), syncerr.InvalidRequest},
		{"request/short-header", []byte("SSP2"), syncerr.InvalidRequest},
		{"response/frame-after-error", envelope(resp, v3, respHdr, errFrame, subStart), syncerr.InvalidRequest},
		{"response/unknown-frame-after-error", envelope(resp, v3, respHdr, errFrame, unknown), syncerr.InvalidRequest},
		{"response/commit-then-segment", envelope(resp, v3, respHdr, subStart, commit, segRef, subEnd), syncerr.InvalidRequest},
		{"response/segment-then-commit", envelope(resp, v3, respHdr, subStart, segRef, commit, subEnd), syncerr.InvalidRequest},
		{"response/request-only-frame", envelope(resp, v3, respHdr, pull), syncerr.InvalidRequest},
		{"response/commit-outside-subscription", envelope(resp, v3, respHdr, commit), syncerr.InvalidRequest},
		{"response/nested-sub-start", envelope(resp, v3, respHdr, subStart, subStart), syncerr.InvalidRequest},
		{"response/unterminated-subscription", envelope(resp, v3, respHdr, subStart), syncerr.InvalidRequest},
		{"response/sub-end-without-start", envelope(resp, v3, respHdr, subEnd), syncerr.InvalidRequest},
		{"response/lease-after-body", envelope(resp, v3, respHdr, subStart, subEnd, lease), syncerr.InvalidRequest},
		{"response/duplicate-lease", envelope(resp, v3, respHdr, lease, lease), syncerr.InvalidRequest},
		{"response/push-result-after-sub-start", envelope(resp, v3, respHdr, subStart, subEnd, rejected), syncerr.InvalidRequest},
		{"response/applied-without-commit-seq", envelope(resp, v3, respHdr, pushResult(1, false)), syncerr.InvalidRequest},
		{"response/rejected-with-commit-seq", envelope(resp, v3, respHdr, pushResult(3, true)), syncerr.InvalidRequest},
		{"response/details-without-result", envelope(resp, v3, respHdr, details), syncerr.InvalidRequest},
		{"response/details-for-non-error-op", envelope(resp, v3, respHdr, rejected, detailsOp1), syncerr.InvalidRequest},
		{"response/duplicate-details", envelope(resp, v3, respHdr, rejected, details, details), syncerr.InvalidRequest},
		{"response/details-unknown-member", envelope(resp, v3, respHdr, rejected, raw{ssp2.TypePushResultDetails, payload(func(w *wire.Writer) {
			w.Str("c1")
			w.U32(1)
			w.I32(0)
			w.Str(`{"reason":"x","stack":"boom"}`)
		})}), syncerr.InvalidRequest},
		{"response/url-without-expiry", envelope(resp, v3, respHdr, subStart, raw{ssp2.TypeSegmentRef, payload(func(w *wire.Writer) {
			w.Str("s")
			w.U8(1)
			w.Str("t")
			w.I64(0)
			w.I64(0)
			w.I64(0)
			w.Str("d")
			w.Opt(false)
			w.Opt(false)
			w.Opt(true)
			w.Str("https://x")
			w.Opt(false)
		})}, subEnd), syncerr.InvalidRequest},
		{"response/table-index-out-of-range", envelope(resp, v3, respHdr, subStart, raw{ssp2.TypeCommit, payload(func(w *wire.Writer) {
			w.I64(1)
			w.I64(1)
			w.Str("a")
			w.U32(1)
			w.Str("t")
			w.U32(1)
			w.U16(1)
			w.Str("r")
			w.U8(2)
			w.Opt(false)
			w.U32(0)
			w.Opt(false)
		})}, subEnd), syncerr.InvalidRequest},
		{"response/segment-inline-not-a-segment", envelope(resp, v3, respHdr, subStart, raw{ssp2.TypeSegmentInline, []byte("SSG2\x01\x00")}, subEnd), syncerr.InvalidRequest},
		{"response/empty-log-epoch", envelope(resp, v3, raw{ssp2.TypeRespHeader, []byte{0, 0, 0, 0, 0, 0, 0}}), syncerr.InvalidRequest},
		{"response/huge-change-count", envelope(resp, v3, respHdr, subStart, raw{ssp2.TypeCommit, payload(func(w *wire.Writer) {
			w.I64(1)
			w.I64(1)
			w.Str("a")
			w.U32(0)
			w.U32(0xffffffff)
		})}, subEnd), syncerr.InvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ssp2.Decode(tc.in)
			if syncerr.CodeOf(err) != tc.code {
				t.Fatalf("Decode: want %s, got %v", tc.code, err)
			}
			var e *syncerr.Error
			if !errors.As(err, &e) || e.Reason == "" {
				t.Fatalf("error carries no reason: %v", err)
			}
			_, err = ssp2.NewDecoder(bytes.NewReader(tc.in), ssp2.DecodeOptions{}).ReadMessage()
			if syncerr.CodeOf(err) != tc.code {
				t.Fatalf("Decoder: want %s, got %v", tc.code, err)
			}
		})
	}
}

func TestDecodeAcceptsUnknownFramesAndKeepsThem(t *testing.T) {
	req := ssp2.KindRequest
	reqHdr := encodeFrame(t, req, 3, &ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1})
	pull := encodeFrame(t, req, 3, &ssp2.PullHeader{Accept: 3})
	for _, ft := range []ssp2.FrameType{0x17, 0x18, 0x1A, 0x1C, 0x1D, 0x1E, 0x20, 0x2F, 0x05, 0xFF} {
		in := envelope(req, 3, reqHdr, raw{ft, []byte{1, 2, 3}}, pull)
		m, err := ssp2.Decode(in)
		if err != nil {
			t.Fatalf("type 0x%02x: %v", ft, err)
		}
		if u, ok := m.Frames[1].(*ssp2.Unknown); !ok || u.Type != ft {
			t.Fatalf("type 0x%02x not kept as unknown", ft)
		}
		out, err := ssp2.Encode(m)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("type 0x%02x: round trip failed: %v", ft, err)
		}
	}
}

func TestEncoderRefusesUnknownFrameUnderRegisteredType(t *testing.T) {
	for _, ft := range []ssp2.FrameType{ssp2.TypeEnd, ssp2.TypePushCommit, ssp2.TypeCommit, ssp2.TypeError} {
		m := &ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
			&ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1}, &ssp2.Unknown{Type: ft}, &ssp2.PullHeader{Accept: 3},
		}}
		if _, err := ssp2.Encode(m); err == nil {
			t.Fatalf("encoder emitted an unknown frame under type 0x%02x", ft)
		}
	}
}

func TestEncoderRefusesInvalidFrames(t *testing.T) {
	hdr := &ssp2.RespHeader{LogEpoch: "e"}
	cases := map[string]*ssp2.Message{
		"request-frame-in-response": {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.PullHeader{}}},
		"frame-after-error":         {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.Error{}, &ssp2.SubStart{Status: 1}}},
		"epoch-fields-at-wire-1":    {WireVersion: 1, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr}},
		"unsafe-i64":                {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.Lease{LeaseID: "l", ExpiresAtMs: 1 << 60}}},
		"unsorted-scopes":           {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.SubStart{Status: 1, EffectiveScopes: ssp2.ScopeLists{{Key: "b"}, {Key: "a"}}}, &ssp2.SubEnd{}}},
		"delete-with-row":           {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.SubStart{Status: 1}, &ssp2.Commit{Tables: []string{"t"}, Changes: []ssp2.Change{{Op: ssp2.OpDelete, Row: []byte{}}}}, &ssp2.SubEnd{}}},
		"invalid-utf8":              {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.Error{Code: "\xff"}}},
		"empty-commit":              {WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{&ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1}, &ssp2.PushCommit{ClientCommitID: "x"}}},
		"bad-segment-inline":        {WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{hdr, &ssp2.SubStart{Status: 1}, &ssp2.SegmentInline{Payload: []byte("nope")}, &ssp2.SubEnd{}}},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ssp2.Encode(m); err == nil {
				t.Fatal("encoder accepted an invalid message")
			}
		})
	}
}

// TestDecoderRefusesOversizeLengthBeforeAllocating: a frame claiming 1 GiB
// is refused by the frame limit, and a frame under the limit that lies
// about its length fails at the real end of input.
func TestDecoderRefusesOversizeLengthBeforeAllocating(t *testing.T) {
	hdr := ssp2.AppendHeader(nil, 3, ssp2.KindRequest)
	huge := append(append([]byte(nil), hdr...), 0x01, 0, 0, 0, 0x40)
	// Bytes, not allocation counts: the race detector adds allocations of
	// its own, never a buffer of the claimed size.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := ssp2.NewDecoder(bytes.NewReader(huge), ssp2.DecodeOptions{MaxFrameBytes: 1 << 20})
	_, err := d.Next()
	runtime.ReadMemStats(&after)
	if syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("got %v", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown >= 1<<20 {
		t.Fatalf("%d bytes allocated refusing an oversize frame", grown)
	}
	lying := append(append([]byte(nil), hdr...), 0x01, 0, 0, 0, 0x01) // 16 MiB, no payload
	d = ssp2.NewDecoder(bytes.NewReader(lying), ssp2.DecodeOptions{})
	if _, err := d.Next(); syncerr.CodeOf(err) != syncerr.InvalidRequest || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("got %v", err)
	}
	msg := envelope(ssp2.KindRequest, 3, encodeFrame(t, ssp2.KindRequest, 3, &ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1}),
		encodeFrame(t, ssp2.KindRequest, 3, &ssp2.PullHeader{Accept: 3}))
	if _, err := ssp2.NewDecoder(bytes.NewReader(msg), ssp2.DecodeOptions{MaxMessageBytes: 20}).ReadMessage(); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("message limit not enforced: %v", err)
	}
	if _, err := ssp2.DecodeWith(msg, ssp2.DecodeOptions{MaxMessageBytes: 20}); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("message limit not enforced by DecodeWith: %v", err)
	}
}

func TestStreamingDecoderReadsFrameByFrame(t *testing.T) {
	var buf bytes.Buffer
	e := ssp2.NewEncoder(&buf, ssp2.KindResponse, 3)
	frames := []ssp2.Frame{
		&ssp2.RespHeader{LogEpoch: "e"},
		&ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(map[string][]string{"b": {"2"}, "a": {"1"}})},
		&ssp2.Commit{CommitSeq: 7, Tables: []string{"t"}, Changes: []ssp2.Change{{RowID: "r", Op: ssp2.OpUpsert, RowVersion: 1, Scopes: ssp2.StoredScopesFromMap(map[string]string{"p": "1"}), Row: []byte{0}}}},
		&ssp2.SubEnd{NextCursor: 7},
	}
	for _, f := range frames {
		if err := e.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.WriteFrame(&ssp2.SubEnd{}); err == nil {
		t.Fatal("grammar violation accepted by the encoder")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Feed the decoder one byte at a time.
	d := ssp2.NewDecoder(io.MultiReader(oneByteReader{bytes.NewReader(buf.Bytes())}), ssp2.DecodeOptions{})
	n := 0
	for {
		f, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.FrameType() != frames[n].FrameType() {
			t.Fatalf("frame %d: %s", n, f.FrameType())
		}
		n++
	}
	if n != len(frames) {
		t.Fatalf("%d frames", n)
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func TestDecodePrefersFrameErrorsOverEarlierGrammarErrors(t *testing.T) {
	req := ssp2.KindRequest
	reqHdr := encodeFrame(t, req, 3, &ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1})
	pull := encodeFrame(t, req, 3, &ssp2.PullHeader{Accept: 3})
	empty := raw{ssp2.TypePushCommit, payload(func(w *wire.Writer) { w.Str("c"); w.U32(0) })}
	_, err := ssp2.Decode(envelope(req, 3, reqHdr, pull, empty))
	if syncerr.CodeOf(err) != syncerr.EmptyCommit {
		t.Fatalf("got %v", err)
	}
}

func TestDecoderStopAtEndLeavesTheRestOfTheStream(t *testing.T) {
	req := ssp2.KindRequest
	msg := envelope(req, 3, encodeFrame(t, req, 3, &ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1}), encodeFrame(t, req, 3, &ssp2.PullHeader{Accept: 3}))
	r := bytes.NewReader(append(append([]byte(nil), msg...), msg...))
	for i := range 2 {
		if _, err := ssp2.NewDecoder(r, ssp2.DecodeOptions{StopAtEnd: true}).ReadMessage(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if r.Len() != 0 {
		t.Fatalf("%d bytes left", r.Len())
	}
}

func TestEncoderRefusesNilFrames(t *testing.T) {
	for _, f := range []ssp2.Frame{nil, (*ssp2.Commit)(nil), (*ssp2.Unknown)(nil)} {
		if _, err := ssp2.AppendFrame(nil, ssp2.KindResponse, 3, f); err == nil {
			t.Fatalf("%T accepted", f)
		}
	}
	if _, err := ssp2.Encode(nil); err == nil {
		t.Fatal("nil message accepted")
	}
}
