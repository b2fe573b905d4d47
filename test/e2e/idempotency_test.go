package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// rawFrames returns the frames of type ft in an encoded message, as sent
// (frame header and payload).
func rawFrames(t *testing.T, msg []byte, ft ssp2.FrameType) [][]byte {
	t.Helper()
	var out [][]byte
	for off := ssp2.HeaderSize; off+5 <= len(msg); {
		end := off + 5 + int(binary.LittleEndian.Uint32(msg[off+1:]))
		if end > len(msg) {
			t.Fatalf("truncated frame at offset %d", off)
		}
		if ssp2.FrameType(msg[off]) == ft {
			out = append(out, msg[off:end])
		}
		off = end
	}
	return out
}

// countingValidators count the row and whole-commit validations the
// pipeline asks for.
type countingValidators struct{ rows, commits atomic.Int64 }

func (v *countingValidators) Table() string { return "projects" }

func (v *countingValidators) ValidateRow(context.Context, ports.RowValidation) error {
	v.rows.Add(1)
	return nil
}

func (v *countingValidators) ValidateCommit(context.Context, ports.CommitValidation) error {
	v.commits.Add(1)
	return nil
}

// TestCommitIDIdempotency is SPEC §2.3: the idempotency key binds the
// commit id alone. Once commit K applied, every later delivery of K, with
// its operations unchanged, changed, or invalid (an unknown table, a
// malformed payload, a row the actor may not write), gets the stored result
// byte for byte as cached: its operations are never validated or applied,
// no commit joins the log and the row stays as K wrote it.
func TestCommitIDIdempotency(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		v := &countingValidators{}
		s := start(t, e, serverOpts{extra: []fx.Option{
			app.ProvideRowValidator(func() *countingValidators { return v }),
			app.ProvideCommitValidator(func() *countingValidators { return v }),
		}})
		c := call{}
		ep := s.epoch(c)
		push := func(ops ...ssp2.PushOperation) []byte {
			t.Helper()
			_, body := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep,
				Commits: []*ssp2.PushCommit{ssptest.Commit("K", ops...)}})
			return body
		}
		projects := s.sch.Table("projects")
		original := ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)
		applied := ssptest.DecodeResponse(t, push(original)).Results[0]
		if applied.Status != ssp2.PushApplied || applied.CommitSeq != 1 || v.rows.Load() != 1 || v.commits.Load() != 1 {
			t.Fatalf("first delivery %+v, %d row and %d commit validations", applied, v.rows.Load(), v.commits.Load())
		}
		// The stored result, as a replay answers it: the applied result
		// with its status cached.
		applied.Status = ssp2.PushCached
		want, err := ssp2.AppendFrame(nil, ssp2.KindResponse, 3, applied)
		if err != nil {
			t.Fatal(err)
		}
		rename := ssptest.Sparse(t, projects, ssptest.Cols{"id": rowcodec.String("p-1"), "name": rowcodec.String("Changed")})
		for _, tc := range []struct {
			name string
			ops  []ssp2.PushOperation
		}{
			{"unchanged operations", []ssp2.PushOperation{original}},
			{"changed operations", []ssp2.PushOperation{ssptest.Upsert("projects", "p-1", rename, 1),
				ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "alice", "Two"), -1)}},
			{"a delete instead", []ssp2.PushOperation{ssptest.Delete("projects", "p-1")}},
			{"a stale base version", []ssp2.PushOperation{ssptest.Upsert("projects", "p-1", rename, 7)}},
			{"an unknown table", []ssp2.PushOperation{ssptest.Upsert("nope", "x", []byte{0}, -1)}},
			{"a malformed payload", []ssp2.PushOperation{ssptest.Upsert("projects", "p-1", []byte{0xff, 0xff, 0xff}, -1)}},
			{"a row of another owner", []ssp2.PushOperation{ssptest.Upsert("projects", "p-3", project(t, s.sch, "p-3", "bob", "Bob's"), -1)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := push(tc.ops...)
				if got := rawFrames(t, body, ssp2.TypePushResult); len(got) != 1 || !bytes.Equal(got[0], want) {
					t.Fatalf("PUSH_RESULT frames %x, want %x", got, want)
				}
				if d := rawFrames(t, body, ssp2.TypePushResultDetails); len(d) != 0 {
					t.Fatalf("details frames %x", d)
				}
				if b, err := s.store.LogBounds(ctx, "default"); err != nil || b.MaxSeq != 1 {
					t.Fatalf("log max %d, %v", b.MaxSeq, err)
				}
				row, err := s.store.GetRow(ctx, "default", "projects", "p-1")
				if err != nil || row == nil || row.Version != 1 || ssptest.DecodeRow(t, projects, row.Payload)["name"].Text() != "One" {
					t.Fatalf("row %+v %v", row, err)
				}
				for _, id := range []string{"p-2", "p-3"} {
					if row, err := s.store.GetRow(ctx, "default", "projects", id); err != nil || row != nil {
						t.Fatalf("row %s %+v %v", id, row, err)
					}
				}
				if v.rows.Load() != 1 || v.commits.Load() != 1 {
					t.Fatalf("%d row and %d commit validations", v.rows.Load(), v.commits.Load())
				}
			})
		}
	})
}
