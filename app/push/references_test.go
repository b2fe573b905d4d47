package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

const refIR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{ "version": 1, "migrations": ["0001"] }],
  "tables": [
    { "name": "folders", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false } ],
      "scopes": ["ws:{ws}"] },
    { "name": "docs", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "folder_id", "type": "string", "nullable": true } ],
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
                   { "name": "folder_id", "type": "string", "nullable": false } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "pins_folder", "columns": ["folder_id"] } ],
      "references": [ { "column": "folder_id", "parentTable": "folders", "onDelete": "restrict" } ] }
  ],
  "subscriptions": []
}`

func TestDeclaredReferences(t *testing.T) {
	sch, err := schema.Load([]byte(refIR))
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	ctx := context.Background()
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	svc, _ := roundtest.Assemble(t, sch, roundtest.Options{Store: st, Now: time.Now, Round: round.Options{
		Resolver: roundtest.ResolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
			return scopes.Allowed{"ws": {"*"}}, nil
		})}})
	epoch, _ := st.TouchPartition(ctx, "p", 1)
	id := ports.Identity{ActorID: "a", Partition: "p"}
	do := func(commits ...*ssp2.PushCommit) *ssp2.PushResult {
		t.Helper()
		resp, err := svc.Handle(ctx, id, ssptest.Req{ClientID: "c", SchemaVersion: 1, Epoch: epoch, Commits: commits}.Encode(t))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Frames[1].(*ssp2.PushResult)
	}
	row := func(table, rid string, ref string, refCol string) ssp2.PushOperation {
		c := ssptest.Cols{"id": rowcodec.String(rid), "ws": rowcodec.String("w")}
		if refCol != "" {
			c[refCol] = rowcodec.String(ref)
		}
		return ssptest.Upsert(table, rid, ssptest.Sparse(t, sch.Table(table), c), -1)
	}
	// Missing parent, then the same commit with the parent staged first.
	r := do(ssptest.Commit("k1", row("docs", "d1", "f1", "folder_id")))
	roundtest.WantRejected(t, r, 0, "sync.reference_violation")
	r = do(ssptest.Commit("k2", row("docs", "d1", "f1", "folder_id"), row("folders", "f1", "", "")))
	if r.Status != ssp2.PushApplied {
		t.Fatalf("parent staged later in the commit: %+v", r)
	}
	r = do(ssptest.Commit("k3", row("notes", "n1", "d1", "doc_id"), row("pins", "x1", "f1", "folder_id")))
	if r.Status != ssp2.PushApplied {
		t.Fatalf("%+v", r)
	}
	// RESTRICT: pins hold the folder.
	r = do(ssptest.Commit("k4", row("folders", "f2", "", ""), ssptest.Delete("folders", "f1")))
	roundtest.WantRejected(t, r, 1, "sync.reference_violation")
	// Deleting the pin in the same commit lets the cascade run: docs go,
	// notes lose their doc.
	r = do(ssptest.Commit("k5", ssptest.Delete("pins", "x1"), ssptest.Delete("folders", "f1")))
	if r.Status != ssp2.PushApplied {
		t.Fatalf("cascade %+v", r)
	}
	if d, _ := st.GetRow(ctx, "p", "docs", "d1"); d != nil {
		t.Fatal("cascaded child survived")
	}
	n, _ := st.GetRow(ctx, "p", "notes", "n1")
	if n == nil || n.Version != 2 || !ssptest.DecodeRow(t, sch.Table("notes"), n.Payload)["doc_id"].IsNull() {
		t.Fatalf("set null %+v", n)
	}
	win, _ := st.ReadCommitWindow(ctx, "p", ports.CommitWindow{Table: "docs", ScopeFilter: map[string][]string{"ws": {"w"}},
		AfterSeq: 2, ThroughSeq: 10, LimitChanges: 100})
	if len(win) != 1 || len(win[0].Changes) != 1 || win[0].Changes[0].RowID != "d1" {
		t.Fatalf("cascade change %+v", win)
	}
}
