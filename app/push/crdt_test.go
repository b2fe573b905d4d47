package push_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// recordingMerger merges like ssptest.MaxMerger, records every call, and
// fails on a poison incoming value.
type recordingMerger struct {
	mu    sync.Mutex
	calls [][2][]byte
}

var poison = []byte("poison")

func (m *recordingMerger) Type() string { return "test-max" }

func (m *recordingMerger) Merge(stored, incoming []byte) ([]byte, error) {
	m.mu.Lock()
	m.calls = append(m.calls, [2][]byte{stored, incoming})
	m.mu.Unlock()
	if bytes.Equal(incoming, poison) {
		return nil, errors.New("not an update of this type")
	}
	return ssptest.MaxMerger{}.Merge(stored, incoming)
}

func (m *recordingMerger) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

func (m *recordingMerger) last() [2][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[len(m.calls)-1]
}

// TestCRDTColumnSemantics follows SPEC §5.10.3: an absent crdt column keeps
// the stored state, NULL clears it without a merge, empty bytes are a value
// and merge, a failed merge rejects the commit as a whole, crdt columns take
// no part in conflict detection, and a replay is answered from the cache
// without merging again.
func TestCRDTColumnSemantics(t *testing.T) {
	m := &recordingMerger{}
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Round.Resolver = roundtest.ResolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
			return scopes.Allowed{"id": {"*"}}, nil
		})
		o.Push.Mergers = []ports.CRDTMerger{m}
	})
	cols := func(extra ssptest.Cols) []byte {
		c := ssptest.Cols{"id": rowcodec.String("n-1")}
		for k, v := range extra {
			c[k] = v
		}
		return ssptest.Sparse(t, e.Table("notes"), c)
	}
	full := func(doc rowcodec.Value, body string) []byte {
		return cols(ssptest.Cols{"title": rowcodec.Null(), "body": rowcodec.String(body), "count": rowcodec.Null(),
			"score": rowcodec.Float(1), "done": rowcodec.Bool(false), "meta": rowcodec.Null(), "blob": rowcodec.Null(), "doc": doc})
	}
	stored := func() (rowcodec.Value, int64) {
		t.Helper()
		row, err := e.Store.GetRow(context.Background(), "p1", "notes", "n-1")
		if err != nil || row == nil {
			t.Fatalf("row: %v %v", row, err)
		}
		return ssptest.DecodeRow(t, e.Table("notes"), row.Payload)["doc"], row.Version
	}
	applied := func(resp ssptest.Resp) {
		t.Helper()
		if len(resp.Results) != 1 || resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("want applied: %+v", resp.Results)
		}
	}

	// An insert merges into nothing: the merger sees a nil stored state.
	resp, _ := e.Must(e.Req(ssptest.Commit("k1", ssptest.Upsert("notes", "n-1", full(rowcodec.CRDT([]byte{5}), "a"), -1))))
	applied(resp)
	if m.count() != 1 || m.last()[0] != nil || !bytes.Equal(m.last()[1], []byte{5}) {
		t.Fatalf("insert merged %v", m.calls)
	}

	// Absent: a write that leaves the column out keeps the state, unmerged.
	resp, _ = e.Must(e.Req(ssptest.Commit("k2", ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"body": rowcodec.String("b")}), -1))))
	applied(resp)
	if doc, _ := stored(); !bytes.Equal(doc.Raw(), []byte{5}) || m.count() != 1 {
		t.Fatalf("absent column: doc %x after %d merges", doc.Raw(), m.count())
	}

	// Empty bytes are present: they merge (and the larger state stays).
	resp, _ = e.Must(e.Req(ssptest.Commit("k3", ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"doc": rowcodec.CRDT([]byte{})}), -1))))
	applied(resp)
	if last := m.last(); m.count() != 2 || !bytes.Equal(last[0], []byte{5}) || last[1] == nil || len(last[1]) != 0 {
		t.Fatalf("empty bytes merged as %v", m.calls)
	}

	// A failed merge rejects the commit: its earlier operations roll back.
	before, version := stored()
	resp, _ = e.Must(e.Req(ssptest.Commit("k4",
		ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"body": rowcodec.String("lost")}), -1),
		ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"doc": rowcodec.CRDT(poison)}), -1))))
	roundtest.WantRejected(t, resp.Results[0], 1, "sync.crdt_merge_failed")
	if resp.Results[0].Results[0].Message != "CRDT merger failed" {
		t.Fatalf("message %q", resp.Results[0].Results[0].Message)
	}
	if doc, v := stored(); !bytes.Equal(doc.Raw(), before.Raw()) || v != version {
		t.Fatalf("rejected commit left doc %x at version %d", doc.Raw(), v)
	}
	row, _ := e.Store.GetRow(context.Background(), "p1", "notes", "n-1")
	if body := ssptest.DecodeRow(t, e.Table("notes"), row.Payload)["body"]; body.Equal(rowcodec.String("lost")) {
		t.Fatal("the rejected commit's first operation persisted")
	}

	// Conflicts: a crdt-only write at a stale base merges; a stale write of
	// another column conflicts on that column alone, never on the crdt one,
	// and its serverRow carries the merged state.
	resp, _ = e.Must(e.Req(ssptest.Commit("k5", ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"doc": rowcodec.CRDT([]byte{7})}), 1))))
	applied(resp)
	merges := m.count()
	resp, _ = e.Must(e.Req(ssptest.Commit("k6", ssptest.Upsert("notes", "n-1",
		cols(ssptest.Cols{"body": rowcodec.String("stale"), "doc": rowcodec.CRDT([]byte{9})}), 1))))
	r := resp.Results[0]
	if r.Status != ssp2.PushRejected || len(r.Results) != 1 || r.Results[0].Code != "sync.version_conflict" {
		t.Fatalf("stale write: %+v", r)
	}
	tbl := e.Table("notes")
	if cc, want := r.Results[0].ConflictColumns, dompush.ColumnBitmap(len(tbl.Columns), []int{tbl.ColumnIndex("body")}); !bytes.Equal(cc, want) {
		t.Fatalf("conflict columns %x, want %x (body alone)", cc, want)
	}
	if doc := ssptest.DecodeRow(t, e.Table("notes"), r.Results[0].ServerRow)["doc"]; !bytes.Equal(doc.Raw(), []byte{7}) {
		t.Fatalf("serverRow doc %x", doc.Raw())
	}
	if m.count() != merges {
		t.Fatalf("a conflicting write merged")
	}

	// A replay answers from the idempotency cache and merges nothing.
	resp, _ = e.Must(e.Req(ssptest.Commit("k5", ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"doc": rowcodec.CRDT([]byte{7})}), 1))))
	if resp.Results[0].Status != ssp2.PushCached || m.count() != merges {
		t.Fatalf("replay: %+v after %d merges (want %d)", resp.Results[0], m.count(), merges)
	}

	// NULL clears the state and is never merged.
	resp, _ = e.Must(e.Req(ssptest.Commit("k7", ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"doc": rowcodec.Null()}), -1))))
	applied(resp)
	if doc, _ := stored(); !doc.IsNull() || m.count() != merges {
		t.Fatalf("NULL: doc %v after %d merges (want %d)", doc, m.count(), merges)
	}
	// After a clear the next write merges into nothing again.
	resp, _ = e.Must(e.Req(ssptest.Commit("k8", ssptest.Upsert("notes", "n-1", cols(ssptest.Cols{"doc": rowcodec.CRDT([]byte{1})}), -1))))
	applied(resp)
	if last := m.last(); last[0] != nil || !bytes.Equal(last[1], []byte{1}) {
		t.Fatalf("merge after a clear: %v", last)
	}
}
