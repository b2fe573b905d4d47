package e2e

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// refIR has an integer-keyed parent so child lookups run on typed values.
const refIR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{ "version": 1, "migrations": ["0001"] }],
  "tables": [
    { "name": "folders", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "integer", "nullable": false }, { "name": "ws", "type": "string", "nullable": false } ],
      "scopes": ["ws:{ws}"] },
    { "name": "docs", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "folder_id", "type": "integer", "nullable": true } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "docs_folder", "columns": ["folder_id"] } ],
      "references": [ { "column": "folder_id", "parentTable": "folders", "onDelete": "cascade" } ] },
    { "name": "notes", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "doc_id", "type": "string", "nullable": true } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "notes_doc", "columns": ["doc_id"] } ],
      "references": [ { "column": "doc_id", "parentTable": "docs", "onDelete": "set_null" } ] },
    { "name": "pins", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "folder_id", "type": "integer", "nullable": false } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "pins_folder", "columns": ["folder_id"] } ],
      "references": [ { "column": "folder_id", "parentTable": "folders", "onDelete": "restrict" } ] }
  ],
  "subscriptions": []
}`

func TestDeclaredReferencesOnEngines(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{ir: []byte(refIR)})
		c := call{}
		ep := s.epoch(c)
		op := func(table, rid string, cols ssptest.Cols) ssp2.PushOperation {
			cols["ws"] = rowcodec.String("w")
			return ssptest.Upsert(table, rid, ssptest.Sparse(t, s.sch.Table(table), cols), -1)
		}
		push := func(id string, ops ...ssp2.PushOperation) ssptest.Resp {
			resp, _ := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: 1, Epoch: ep, Commits: []*ssp2.PushCommit{ssptest.Commit(id, ops...)}})
			return resp
		}
		resp := push("k1", op("docs", "d1", ssptest.Cols{"id": rowcodec.String("d1"), "folder_id": rowcodec.Int(7)}))
		rejected(t, resp.Results[0], 0, "sync.reference_violation")
		if d := resp.Details["k1"]; d == nil || d.Entries[0].Details.Reason != "missing_parent" {
			t.Fatalf("details %+v", resp.Details)
		}
		resp = push("k2",
			op("docs", "d1", ssptest.Cols{"id": rowcodec.String("d1"), "folder_id": rowcodec.Int(7)}),
			op("folders", "7", ssptest.Cols{"id": rowcodec.Int(7)}),
			op("notes", "n1", ssptest.Cols{"id": rowcodec.String("n1"), "doc_id": rowcodec.String("d1")}),
			op("pins", "x1", ssptest.Cols{"id": rowcodec.String("x1"), "folder_id": rowcodec.Int(7)}))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("%+v", resp.Results[0])
		}
		resp = push("k3", ssptest.Delete("folders", "7"))
		rejected(t, resp.Results[0], 0, "sync.reference_violation")
		resp = push("k4", ssptest.Delete("pins", "x1"), ssptest.Delete("folders", "7"))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("cascade %+v", resp.Results[0])
		}
		if d, _ := s.store.GetRow(t.Context(), "default", "docs", "d1"); d != nil {
			t.Fatal("cascaded child survived")
		}
		n, _ := s.store.GetRow(t.Context(), "default", "notes", "n1")
		if n == nil || n.Version != 2 || !ssptest.DecodeRow(t, s.sch.Table("notes"), n.Payload)["doc_id"].IsNull() {
			t.Fatalf("set null %+v", n)
		}
	})
}
