package push_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// indexedEnv is roundtest's Env over the test schema with two more
// indexes on tasks, (project_id) and (estimate), and notes not
// materialized but indexed.
func indexedEnv(t *testing.T, mut func(*roundtest.Options)) *roundtest.Env {
	t.Helper()
	var ir map[string]any
	if err := json.Unmarshal(ssptest.IR(), &ir); err != nil {
		t.Fatal(err)
	}
	for _, tb := range ir["tables"].([]any) {
		tb := tb.(map[string]any)
		switch tb["name"] {
		case "tasks":
			tb["indexes"] = append(tb["indexes"].([]any),
				map[string]any{"name": "tasks_by_project", "columns": []string{"project_id"}},
				map[string]any{"name": "tasks_by_estimate", "columns": []string{"estimate"}})
		case "notes":
			tb["materialize"] = false
			tb["indexes"] = []any{map[string]any{"name": "notes_by_title", "columns": []string{"title"}}}
		}
	}
	data, err := json.Marshal(ir)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	if err := st.EnsureSchema(context.Background(), sch, nil); err != nil {
		t.Fatal(err)
	}
	e := &roundtest.Env{T: t, Schema: sch, Store: st, ID: ports.Identity{ActorID: "alice", Partition: "p1"}}
	e.Round, e.Push = e.Build(mut)
	if e.Epoch, err = st.TouchPartition(context.Background(), "p1", 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// scanProbe is a commit validator that runs every scan of its table
// inside the push transaction and records the row ids or the error.
type scanProbe struct {
	scans []ports.IndexScan
	ids   [][]string
	errs  []error
}

func (p *scanProbe) ValidateCommit(ctx context.Context, c ports.CommitValidation) error {
	for _, q := range p.scans {
		rows, err := c.Tx.ScanRowsByIndex(ctx, q)
		ids := []string{}
		for _, r := range rows {
			ids = append(ids, r.RowID)
		}
		p.ids, p.errs = append(p.ids, ids), append(p.errs, err)
	}
	return nil
}

func TestScanRowsByIndex(t *testing.T) {
	tests := []struct {
		name string
		q    ports.IndexScan
		want []string
		code syncerr.Code // "" for success; "-" for an error outside the catalog
	}{
		{"every row of one value, in row id order, staged writes included",
			ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-1"}, Limit: 10}, []string{"t-1", "t-2", "t-3", "t-5"}, ""},
		{"a page", ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-1"}, Limit: 2}, []string{"t-1", "t-2"}, ""},
		{"the next page, after an exclusive row id",
			ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-1"}, AfterRowID: "t-2", Limit: 2}, []string{"t-3", "t-5"}, ""},
		{"a compound index takes its whole tuple",
			ports.IndexScan{Table: "tasks", Index: "tasks_project_title", Values: []any{"p-1", "b"}, Limit: 10}, []string{"t-2"}, ""},
		{"nil is IS NULL", ports.IndexScan{Table: "tasks", Index: "tasks_by_estimate", Values: []any{nil}, Limit: 10}, []string{"t-1", "t-2", "t-4"}, ""},
		{"an int for an integer column", ports.IndexScan{Table: "tasks", Index: "tasks_by_estimate", Values: []any{3}, Limit: 10}, []string{"t-3", "t-5"}, ""},
		{"a value no row has", ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-9"}, Limit: 10}, []string{}, ""},
		{"a prefix of a compound index", ports.IndexScan{Table: "tasks", Index: "tasks_project_title", Values: []any{"p-1"}, Limit: 10}, nil, syncerr.StorageIndexValueCount},
		{"too many values", ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-1", "x"}, Limit: 10}, nil, syncerr.StorageIndexValueCount},
		{"an undeclared index", ports.IndexScan{Table: "tasks", Index: "nope", Values: []any{"p-1"}, Limit: 10}, nil, syncerr.StorageIndexNotFound},
		{"limit 0", ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-1"}}, nil, syncerr.StorageInvalidLimit},
		{"limit past 1,000", ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{"p-1"}, Limit: 1001}, nil, syncerr.StorageInvalidLimit},
		{"a table that is not materialized", ports.IndexScan{Table: "notes", Index: "notes_by_title", Values: []any{"x"}, Limit: 10}, nil, syncerr.StorageTxQueryUnsupported},
		{"an unknown table", ports.IndexScan{Table: "nope", Index: "x", Values: []any{"x"}, Limit: 10}, nil, syncerr.UnknownTable},
		{"a value of another type", ports.IndexScan{Table: "tasks", Index: "tasks_by_project", Values: []any{7}, Limit: 10}, nil, "-"},
	}
	probe := &scanProbe{}
	for _, tt := range tests {
		probe.scans = append(probe.scans, tt.q)
	}
	e := indexedEnv(t, func(o *roundtest.Options) { o.Push.CommitValidator = probe })
	task := func(id, project, title string, estimate rowcodec.Value) ssp2.PushOperation {
		return ssptest.Upsert("tasks", id, ssptest.Sparse(t, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String(id),
			"project_id": rowcodec.String(project), "title": rowcodec.String(title), "done": rowcodec.Bool(false),
			"estimate": estimate, "attachment": rowcodec.Null()}), -1)
	}
	// The first commit lands t-1..t-4 and t-6; the probe's answers that
	// count are those of the second, which stages t-5 and deletes t-6
	// before it runs.
	resp, _ := e.Must(e.Req(ssptest.Commit("k1", task("t-1", "p-1", "a", rowcodec.Null()), task("t-2", "p-1", "b", rowcodec.Null()),
		task("t-3", "p-1", "c", rowcodec.Int(3)), task("t-4", "p-2", "a", rowcodec.Null()), task("t-6", "p-1", "f", rowcodec.Int(3)))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("%+v", resp.Results[0])
	}
	probe.ids, probe.errs = nil, nil
	resp, _ = e.Must(e.Req(ssptest.Commit("k2", task("t-5", "p-1", "e", rowcodec.Int(3)), ssptest.Delete("tasks", "t-6"))))
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("%+v", resp.Results[0])
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := probe.errs[i]
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.code == "":
				if !reflect.DeepEqual(probe.ids[i], tt.want) {
					t.Fatalf("got %v, want %v", probe.ids[i], tt.want)
				}
			case tt.code == "-":
				if err == nil || syncerr.CodeOf(err) != "" && syncerr.CodeOf(err) != syncerr.InternalError {
					t.Fatalf("error %v (%q), want one outside the catalog", err, syncerr.CodeOf(err))
				}
			case syncerr.CodeOf(err) != tt.code:
				t.Fatalf("error %v, want %s", err, tt.code)
			}
		})
	}
}
