package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestPushPayloadVectors pushes the golden sparse-row payloads (a table
// with every column type, including a crdt column merged by a host merger)
// and the invalid ones, which reject their commit only.
func TestPushPayloadVectors(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{extra: []fx.Option{app.ProvideCRDTMerger(func() ssptest.MaxMerger { return ssptest.MaxMerger{} })}})
		m, ok := vectortest.Load(t, vectortest.Dir(t, "v3"), "push")
		if !ok {
			t.Fatal("no push vectors")
		}
		c := call{}
		ep := s.epoch(c)
		req := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("full", ssptest.Upsert("notes", "n-2", m.Read(t, "sparse-row-full.bin"), -1)),
			ssptest.Commit("partial", ssptest.Upsert("notes", "n-1", m.Read(t, "sparse-row.bin"), -1)),
		}}
		for i, inv := range m.Invalid {
			req.Commits = append(req.Commits, ssptest.Commit(inv.Name, ssptest.Upsert("notes", "n-"+string(rune('a'+i)), m.Read(t, inv.Bin), -1)))
		}
		resp, _ := s.sync(c, req)
		if r := resp.Results[0]; r.Status != ssp2.PushApplied {
			t.Fatalf("full row vector %+v", r)
		}
		rejected(t, resp.Results[1], 0, "sync.row_missing")
		for i, inv := range m.Invalid {
			rejected(t, resp.Results[2+i], 0, inv.Error)
		}
		row, err := s.store.GetRow(t.Context(), "default", "notes", "n-2")
		if err != nil || row == nil {
			t.Fatalf("row %v %v", row, err)
		}
		got := ssptest.DecodeRow(t, s.sch.Table("notes"), row.Payload)
		if !bytes.Equal(got["doc"].Raw(), []byte{0x01, 0x02, 0xfe}) || got["meta"].Text() != `{"k":true}` {
			t.Fatalf("stored row %v", got)
		}
		// The sparse vector as an update of the full row: present-NULL title, new meta.
		resp, _ = s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("n1", ssptest.Upsert("notes", "n-1", m.Read(t, "sparse-row.bin"), 0))}})
		rejected(t, resp.Results[0], 0, "sync.row_missing") // an explicit insert still needs every column
	})
}

func TestZstdRequestAndResponse(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		var ops []ssp2.PushOperation
		for i := range 250 {
			id := fmt.Sprintf("p-%03d", i)
			ops = append(ops, ssptest.Upsert("projects", id, project(t, s.sch, id, "alice", "a project with a long enough name"), -1))
		}
		body := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ops...)}}.Encode(t)
		enc, _ := zstd.NewWriter(nil)
		compressed := enc.EncodeAll(body, nil)
		req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(compressed))
		req.Header.Set("Content-Type", "application/vnd.syncular.sync.v2")
		req.Header.Set("Content-Encoding", "zstd")
		req.Header.Set("Accept-Encoding", "zstd")
		req.Header.Set("X-Syncd-Actor", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		dec, _ := zstd.NewReader(resp.Body)
		defer dec.Close()
		var out bytes.Buffer
		if _, err := out.ReadFrom(dec); err != nil {
			t.Fatalf("zstd response (%q): %v", resp.Header.Get("Content-Encoding"), err)
		}
		if r := ssptest.DecodeResponse(t, out.Bytes()).Results[0]; r.Status != ssp2.PushApplied || len(r.Results) != 250 {
			t.Fatalf("%+v", r)
		}
	})
}

// TestResponseVectorsAsRequests: every response envelope of both
// generations (valid or not) sent as a request body is a 400
// sync.invalid_request, never a 500, also to a server admitting wire 1
// (whose decoder reads the older envelopes through).
func TestResponseVectorsAsRequests(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{minWire: 1})
		for _, gen := range []string{"v3", "v2"} {
			m, ok := vectortest.Load(t, vectortest.Dir(t, gen), "response")
			if !ok {
				t.Fatalf("no %s response vectors", gen)
			}
			var bins []string
			for _, c := range m.Cases {
				bins = append(bins, c.Bin)
			}
			for _, inv := range m.Invalid {
				bins = append(bins, inv.Bin)
			}
			for _, b := range bins {
				s.jsonError(s.post(call{}, m.Read(t, b)), http.StatusBadRequest, syncerr.InvalidRequest)
			}
		}
	})
}

// vectorNotesIR is the table the request vectors of the wire-1/2
// generation write and subscribe to: their notes columns, with the
// project scope they name kept in id (the vectors' rows carry no column
// of their own for it).
const vectorNotesIR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{ "version": 1, "migrations": ["0001"] }],
  "tables": [
    { "name": "notes", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false },
                   { "name": "title", "type": "string", "nullable": true },
                   { "name": "body", "type": "string", "nullable": false },
                   { "name": "count", "type": "integer", "nullable": true },
                   { "name": "score", "type": "float", "nullable": false },
                   { "name": "done", "type": "boolean", "nullable": false },
                   { "name": "meta", "type": "json", "nullable": true },
                   { "name": "blob", "type": "bytes", "nullable": true } ],
      "scopes": [{ "pattern": "project:{project}", "variable": "project", "column": "id" }] }
  ],
  "subscriptions": []
}`

// TestWireOneRequestVectors: every valid request vector of the wire-1/2
// generation, sent as it is to a server admitting wire 1, is decoded and
// served, and answered in the request's wire version: a wire-1 request
// at another schema version gets the schema floor, one at this server's
// version one PUSH_RESULT per PUSH_COMMIT (a commit refused only for the
// rows its baseVersions name, which this server never had) and a section
// per subscription; the wire-2 vector, whose epoch is not the
// partition's, is told to reset.
func TestWireOneRequestVectors(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{minWire: 1, ir: []byte(vectorNotesIR)})
		m, ok := vectortest.Load(t, vectortest.Dir(t, "v2"), "request")
		if !ok {
			t.Fatal("no v2 request vectors")
		}
		c := call{actor: "client-a-owner", scopes: `{"project":["*"]}`}
		wire1 := 0
		for _, vc := range m.Cases {
			t.Run(vc.Name, func(t *testing.T) {
				bin := m.Read(t, vc.Bin)
				req, err := ssp2.Decode(bin)
				if err != nil {
					t.Fatal(err)
				}
				var hdr *ssp2.ReqHeader
				var commits, subs int
				for _, f := range req.Frames {
					switch f := f.(type) {
					case *ssp2.ReqHeader:
						hdr = f
					case *ssp2.PushCommit:
						commits++
					case *ssp2.Subscription:
						subs++
					}
				}
				rep := s.post(c, bin)
				if rep.status != http.StatusOK {
					t.Fatalf("status %d: %s", rep.status, rep.body)
				}
				resp := ssptest.DecodeResponse(t, rep.body)
				if resp.Msg.WireVersion != req.WireVersion {
					t.Fatalf("a wire-%d request answered in wire %d", req.WireVersion, resp.Msg.WireVersion)
				}
				h := resp.Header
				starts := 0
				for _, f := range resp.Msg.Frames {
					if _, ok := f.(*ssp2.SubStart); ok {
						starts++
					}
				}
				switch {
				case req.WireVersion >= 2:
					if !h.ResetRequired || h.LogEpoch == "" || len(resp.Msg.Frames) != 1 {
						t.Fatalf("wire-%d request with a foreign epoch: %+v", req.WireVersion, resp.Msg.Frames)
					}
				case hdr.SchemaVersion != s.sch.Version:
					wire1++
					if h.RequiredSchemaVersion != ssp2.Some(s.sch.Version) || len(resp.Msg.Frames) != 1 {
						t.Fatalf("schema floor: %+v", resp.Msg.Frames)
					}
				default:
					wire1++
					if h.LogEpoch != "" || h.LatestSchemaVersion != ssp2.Some(s.sch.Version) || len(resp.Results) != commits || starts != subs {
						t.Fatalf("header %+v, %d results for %d commits, %d sections for %d subscriptions: %+v",
							h, len(resp.Results), commits, starts, subs, resp.Msg.Frames)
					}
					for _, r := range resp.Results {
						if r.Status == ssp2.PushRejected && r.Results[0].Code != string(syncerr.RowMissing) {
							t.Fatalf("commit %s refused: %+v", r.ClientCommitID, r.Results[0])
						}
					}
				}
			})
		}
		if wire1 == 0 {
			t.Fatal("no wire-1 request vector was served")
		}
	})
}
