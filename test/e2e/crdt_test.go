package e2e

import (
	"bytes"
	"encoding/hex"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/yjs"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// yjsIR is the test schema with notes.doc a yjs-doc column.
func yjsIR() []byte { return bytes.ReplaceAll(ssptest.IR(), []byte(`"test-max"`), []byte(`"yjs-doc"`)) }

func yjsNote(t *testing.T, s *server, doc []byte, full bool) []byte {
	c := ssptest.Cols{"id": rowcodec.String("n-1"), "doc": rowcodec.CRDT(doc)}
	if full {
		c["title"], c["body"], c["count"], c["score"] = rowcodec.Null(), rowcodec.String("b"), rowcodec.Null(), rowcodec.Float(1)
		c["done"], c["meta"], c["blob"] = rowcodec.Bool(false), rowcodec.Null(), rowcodec.Null()
	}
	return ssptest.Sparse(t, s.sch.Table("notes"), c)
}

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStockServerMergesYjsDocColumns: the stock graph registers the
// built-in yjs-doc merger (SPEC §5.10.1), so two clients' Yjs updates merge
// into the reference's bytes, and an update that is not one fails the
// operation with sync.crdt_merge_failed.
func TestStockServerMergesYjsDocColumns(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{ir: yjsIR()})
		c := call{}
		ep := s.epoch(c)
		ab := unhex(t, "010101000401017402616200") // client 1: "ab" in text t
		x := unhex(t, "01010200840100017800")      // client 2: "x" after "a"
		resp, _ := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("notes", "n-1", yjsNote(t, s, ab, true), -1))}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("insert %+v", resp.Results[0])
		}
		resp, _ = s.sync(call{actor: "bob"}, ssptest.Req{ClientID: "c2", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("notes", "n-1", yjsNote(t, s, x, false), -1))}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("update %+v", resp.Results[0])
		}
		row, err := s.store.GetRow(t.Context(), "default", "notes", "n-1")
		if err != nil || row == nil {
			t.Fatalf("row %v %v", row, err)
		}
		want, err := yjs.Merge(ab, x, yjs.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ssptest.DecodeRow(t, s.sch.Table("notes"), row.Payload)["doc"].Raw(); !bytes.Equal(got, want) {
			t.Fatalf("stored doc %x, want %x", got, want)
		}
		resp, _ = s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k2", ssptest.Upsert("notes", "n-1", yjsNote(t, s, []byte("not an update"), false), -1))}})
		rejected(t, resp.Results[0], 0, "sync.crdt_merge_failed")
	})
}

// hostYjs is a host's own yjs-doc merger: it keeps the longer state.
type hostYjs struct{}

func (hostYjs) Type() string { return "yjs-doc" }
func (hostYjs) Merge(stored, incoming []byte) ([]byte, error) {
	if len(stored) > len(incoming) {
		return stored, nil
	}
	return incoming, nil
}

// TestHostMergerReplacesTheBuiltIn: a host that provides a merger for
// yjs-doc gets its own, not a conflict with the built-in one.
func TestHostMergerReplacesTheBuiltIn(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{ir: yjsIR(), extra: []fx.Option{
			app.ProvideCRDTMerger(func() ports.CRDTMerger { return hostYjs{} })}})
		c := call{}
		ep := s.epoch(c)
		resp, _ := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("notes", "n-1", yjsNote(t, s, []byte("not yjs at all"), true), -1))}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("host merger not used: %+v", resp.Results[0])
		}
	})
}
