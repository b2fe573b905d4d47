package seed_test

import (
	"context"
	"errors"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/seed"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

const ir = `{"irVersion":1,"schemaVersion":1,"schemaVersions":[{"version":1,"migrations":["0001"]}],
"tables":[{"name":"tasks","primaryKey":"id","columns":[
 {"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},
 {"name":"title","type":"string","nullable":false},{"name":"done","type":"boolean","nullable":false},
 {"name":"priority","type":"integer","nullable":false}],
 "scopes":[{"pattern":"project:{project_id}","variable":"project_id","column":"project_id"}],"extensions":{}}],
"subscriptions":[],"extensions":{}}`

func TestRunWritesOrdinaryCommits(t *testing.T) {
	ctx := context.Background()
	sch, err := schema.Load([]byte(ir))
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	var progress []int
	res, err := seed.Run(ctx, st, seed.Options{Schema: sch, Table: "tasks", Value: "storm", Rows: 25, Batch: 10,
		Progress: func(rows int, _ int64) { progress = append(progress, rows) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 25 || res.Commits != 3 || res.FirstSeq != 1 || res.LastSeq != 3 || len(progress) != 3 {
		t.Fatalf("result %+v, progress %v", res, progress)
	}
	rows, err := st.ScanRows(ctx, "default", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project_id": {"storm"}}, Limit: 100})
	if err != nil || len(rows) != 25 {
		t.Fatalf("scan: %d rows, %v", len(rows), err)
	}
	vals, err := rowcodec.New(sch.Table("tasks")).DecodeRow(rows[0].Payload, nil)
	if err != nil || vals[0].Text() != seed.RowID("storm", 0) || vals[1].Text() != "storm" || rows[0].Version != 1 {
		t.Fatalf("row %+v: %v", rows[0], err)
	}
	cs, err := st.ReadCommitWindow(ctx, "default", ports.CommitWindow{Table: "tasks",
		ScopeFilter: map[string][]string{"project_id": {"storm"}}, AfterSeq: 0, ThroughSeq: 3, LimitChanges: 1000})
	if err != nil || len(cs) != 3 || len(cs[2].Changes) != 5 || cs[0].ActorID != seed.ActorID {
		t.Fatalf("window: %d commits, %v", len(cs), err)
	}
	if _, err := seed.Run(ctx, st, seed.Options{Schema: sch, Table: "tasks", Value: "storm", Rows: 5}); !errors.Is(err, seed.ErrAlreadySeeded) {
		t.Fatalf("second seed: %v", err)
	}
}

func TestRunBulkPath(t *testing.T) {
	ctx := context.Background()
	sch, _ := schema.Load([]byte(ir))
	st := memory.New()
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	var got []seed.Batch
	n := 0
	bulk := func(_ context.Context, partition, table string, rows []ports.RowWrite, b seed.Batch) (int64, error) {
		if partition != "p" || table != "tasks" || rows[0].Scopes["project_id"] != "x" || rows[0].Values[1] != "x" {
			t.Errorf("bulk %s %s %+v", partition, table, rows[0])
		}
		got = append(got, b)
		n += len(rows)
		return int64(len(got)), nil
	}
	res, err := seed.Run(ctx, st, seed.Options{Schema: sch, Table: "tasks", Value: "x", Partition: "p", Rows: 7, Batch: 4, Bulk: bulk})
	if err != nil || n != 7 || len(got) != 2 || res.LastSeq != 2 || got[0].ClientID != seed.ClientID || got[0].WriterVersion != 1 {
		t.Fatalf("%+v %v %+v", res, err, got)
	}
}

func TestRunRefusals(t *testing.T) {
	ctx := context.Background()
	sch, _ := schema.Load([]byte(ir))
	st := memory.New()
	for _, o := range []seed.Options{
		{Table: "tasks", Value: "v", Rows: 1},
		{Schema: sch, Table: "nope", Value: "v", Rows: 1},
		{Schema: sch, Table: "tasks", Rows: 1},
		{Schema: sch, Table: "tasks", Value: "v"},
	} {
		if _, err := seed.Run(ctx, st, o); err == nil {
			t.Errorf("%+v: want an error", o)
		}
	}
}

// Integers look like what their column holds: timestamps where the name
// says so, varied counts that differ by column elsewhere.
func TestCellIntegers(t *testing.T) {
	col := func(name string) schema.Column { return schema.Column{Name: name, Type: schema.TypeInteger} }
	for _, name := range []string{"updated_at_ms", "created_at", "seen_ts"} {
		if v := seed.Cell(col(name), 7).Plain().(int64); v < 1_700_000_000_000 {
			t.Errorf("%s = %d, want a millisecond timestamp", name, v)
		}
	}
	seen := map[int64]bool{}
	for n := range int64(100) {
		a, b := seed.Cell(col("priority"), n).Plain().(int64), seed.Cell(col("estimate"), n).Plain().(int64)
		if a < 0 || a >= 10_000 || b < 0 || b >= 10_000 {
			t.Fatalf("row %d: %d, %d out of 0..9,999", n, a, b)
		}
		if a == b {
			t.Fatalf("row %d: two columns got the same value %d", n, a)
		}
		seen[a] = true
	}
	if len(seen) < 90 {
		t.Fatalf("only %d distinct values in 100 rows", len(seen))
	}
}
