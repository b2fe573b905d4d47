package ssp2_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

var benchCodec = rowcodec.NewColumns([]schema.Column{
	{Name: "id", Type: schema.TypeString},
	{Name: "title", Type: schema.TypeString, Nullable: true},
	{Name: "body", Type: schema.TypeString},
	{Name: "count", Type: schema.TypeInteger, Nullable: true},
	{Name: "score", Type: schema.TypeFloat},
	{Name: "done", Type: schema.TypeBoolean},
	{Name: "meta", Type: schema.TypeJSON, Nullable: true},
	{Name: "blob", Type: schema.TypeBytes, Nullable: true},
}, 0)

func benchValues(i int) []rowcodec.Value {
	return []rowcodec.Value{
		rowcodec.String(fmt.Sprintf("n-%06d", i)),
		rowcodec.String(fmt.Sprintf("Note number %d", i)),
		rowcodec.String("The quick brown fox jumps over the lazy dog, again and again."),
		rowcodec.Int(int64(i)), rowcodec.Float(0.5), rowcodec.Bool(true),
		rowcodec.JSON(`{"tags":["a","b"],"ok":true}`), rowcodec.Bytes([]byte{1, 2, 3, 4, 5, 6, 7, 8}),
	}
}

// commitResponse is a response with one subscription section carrying one
// COMMIT of 1,000 upserts.
func commitResponse(b testing.TB) *ssp2.Message {
	changes := make([]ssp2.Change, 1000)
	for i := range changes {
		row, err := benchCodec.AppendRow(nil, benchValues(i))
		if err != nil {
			b.Fatal(err)
		}
		changes[i] = ssp2.Change{RowID: fmt.Sprintf("n-%06d", i), Op: ssp2.OpUpsert, RowVersion: int64(i + 1),
			Scopes: ssp2.StoredScopes{{Key: "project", Value: "p1"}}, Row: row}
	}
	return &ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{
		&ssp2.RespHeader{LogEpoch: "epoch-1"},
		&ssp2.SubStart{ID: "sub", Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeLists{{Key: "project", Values: []string{"p1"}}}},
		&ssp2.Commit{CommitSeq: 42, CreatedAtMs: 1782993600000, ActorID: "actor-1", Tables: []string{"notes"}, Changes: changes},
		&ssp2.SubEnd{NextCursor: 42},
	}}
}

// pushRequest is a request with 100 upsert operations (sparse payloads)
// across 10 commits, plus a pull.
func pushRequest(b testing.TB) *ssp2.Message {
	frames := []ssp2.Frame{&ssp2.ReqHeader{ClientID: "client-a", SchemaVersion: 1, LogEpoch: ssp2.Some("epoch-1")}}
	for c := range 10 {
		ops := make([]ssp2.PushOperation, 10)
		for i := range ops {
			vals := benchValues(c*10 + i)
			vals[2], vals[6] = rowcodec.Absent, rowcodec.Absent
			payload, err := benchCodec.AppendSparse(nil, vals)
			if err != nil {
				b.Fatal(err)
			}
			ops[i] = ssp2.PushOperation{Table: "notes", RowID: fmt.Sprintf("n-%06d", c*10+i), Op: ssp2.OpUpsert, BaseVersion: ssp2.Some(int64(3)), Payload: payload}
		}
		frames = append(frames, &ssp2.PushCommit{ClientCommitID: fmt.Sprintf("c-%04d", c), Operations: ops})
	}
	return &ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: frames}
}

func benchDecode(b *testing.B, m *ssp2.Message) {
	enc, err := ssp2.Encode(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ssp2.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func benchEncode(b *testing.B, m *ssp2.Message) {
	enc, err := ssp2.Encode(m)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, len(enc))
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = ssp2.AppendEncode(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeCommitResponse1000 decodes a 1,000-change COMMIT response.
func BenchmarkDecodeCommitResponse1000(b *testing.B) { benchDecode(b, commitResponse(b)) }

// BenchmarkEncodeCommitResponse1000 encodes a 1,000-change COMMIT response.
func BenchmarkEncodeCommitResponse1000(b *testing.B) { benchEncode(b, commitResponse(b)) }

// BenchmarkStreamEncodeCommitResponse1000 streams the same response frame
// by frame to an io.Writer.
func BenchmarkStreamEncodeCommitResponse1000(b *testing.B) {
	m := commitResponse(b)
	enc, _ := ssp2.Encode(m)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	e := ssp2.NewEncoder(io.Discard, m.Kind, m.WireVersion)
	for b.Loop() {
		e.Reset(io.Discard, m.Kind, m.WireVersion)
		for _, f := range m.Frames {
			if err := e.WriteFrame(f); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamDecodeCommitResponse1000 decodes it frame by frame from
// an io.Reader.
func BenchmarkStreamDecodeCommitResponse1000(b *testing.B) {
	enc, _ := ssp2.Encode(commitResponse(b))
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		d := ssp2.NewDecoder(bytes.NewReader(enc), ssp2.DecodeOptions{})
		if _, err := d.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePushRequest100 decodes a 100-operation push request.
func BenchmarkDecodePushRequest100(b *testing.B) { benchDecode(b, pushRequest(b)) }

// BenchmarkEncodePushRequest100 encodes a 100-operation push request.
func BenchmarkEncodePushRequest100(b *testing.B) { benchEncode(b, pushRequest(b)) }

// BenchmarkDecodePushPayloads100 decodes the 100 sparse payloads of that
// request (the push path's row work).
func BenchmarkDecodePushPayloads100(b *testing.B) {
	m := pushRequest(b)
	var payloads [][]byte
	size := 0
	for _, f := range m.Frames {
		if pc, ok := f.(*ssp2.PushCommit); ok {
			for _, op := range pc.Operations {
				payloads = append(payloads, op.Payload)
				size += len(op.Payload)
			}
		}
	}
	dst := make([]rowcodec.Value, 8)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range payloads {
			var err error
			if dst, err = benchCodec.DecodeSparse(p, dst); err != nil {
				b.Fatal(err)
			}
		}
	}
}
