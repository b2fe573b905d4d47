package rules_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/adapters/rules"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// fakeQueries serves one registered query, "tasks.inProject", from the
// transaction's index scans, and records what it was asked.
type fakeQueries struct {
	asked []map[string]any
}

func (q *fakeQueries) QueryTable(id string) (string, bool) { return "tasks", id == "tasks.inProject" }

func (q *fakeQueries) QueryInTx(ctx context.Context, tx ports.TxReader, id string, params map[string]any) ([]ports.CandidateRow, error) {
	if _, ok := q.QueryTable(id); !ok {
		return nil, syncerr.Newf(syncerr.OperationUnknown, "no query operation %q", id)
	}
	q.asked = append(q.asked, params)
	return tx.ScanRowsByIndex(ctx, ports.IndexScan{Table: "tasks", Index: "by_project", Values: []any{params["project"]}})
}

// fakeTx holds tasks rows; ScanRowsByIndex answers any index by the
// first value against project_id, or fails with err.
type fakeTx struct {
	ports.TxReader
	rows  []ports.CandidateRow
	scans []ports.IndexScan
	err   error
}

func (f *fakeTx) ScanRowsByIndex(_ context.Context, q ports.IndexScan) ([]ports.CandidateRow, error) {
	f.scans = append(f.scans, q)
	if f.err != nil {
		return nil, f.err
	}
	var out []ports.CandidateRow
	for _, r := range f.rows {
		if r.Values["project_id"] == q.Values[0] && (len(q.Values) < 2 || r.Values["title"] == q.Values[1]) {
			out = append(out, r)
		}
	}
	return out, nil
}

func candidate(id, project, title string) ports.CandidateRow {
	return ports.CandidateRow{RowID: id, Version: 1, Values: ports.RowValues{"id": id, "project_id": project, "title": title,
		"done": false, "estimate": int64(1), "attachment": nil}}
}

const dbRules = `
validators:
  tasks:
    - name: at-most-two-per-project
      rule: |
        db.query("tasks.inProject", {"project": row.project_id}).filter(r, r.id != rowId).size() < 2
      code: app.project_full
      message: a project holds at most two tasks
    - name: title-unique
      rule: db.lookup("tasks", "tasks_project_title", [row.project_id, row.title]).all(r, r.id == rowId)
      code: app.title_taken
      message: a title is used once per project
commitValidators:
  - name: first-project-not-empty
    rule: |
      ops.size() == 0 || db.lookup("tasks", "tasks_project_title", [ops[0].row.project_id, "keep"], 1).size() == 1
    code: app.keep_missing
    message: the project's keep task is missing
`

// TestDBReadsInsideThePush: rules read other rows through db.query (a
// registered query) and db.lookup (an index), over what the transaction
// reader returns — the candidate state, staged rows included.
func TestDBReadsInsideThePush(t *testing.T) {
	q := &fakeQueries{}
	r, err := rules.Parse("rules.yaml", []byte(dbRules), rules.Options{Schema: ssptest.Schema(t), Queries: q})
	if err != nil {
		t.Fatal(err)
	}
	v := r.RowValidators()[0]
	in := func(tx ports.TxReader, id, project, title string) ports.RowValidation {
		return ports.RowValidation{Op: commit.OpUpsert, Table: "tasks", RowID: id, Row: candidate(id, project, title).Values,
			ActorID: "alice", Partition: "p", Tx: tx}
	}
	rej := func(code, msg string) error {
		r, err := ports.NewValidationRejection(code, msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name string
		rows []ports.CandidateRow
		in   func(tx ports.TxReader) ports.RowValidation
		want error
	}{
		{"empty project", nil, func(tx ports.TxReader) ports.RowValidation { return in(tx, "t1", "p1", "a") }, nil},
		{"one other task", []ports.CandidateRow{candidate("t0", "p1", "z")},
			func(tx ports.TxReader) ports.RowValidation { return in(tx, "t1", "p1", "a") }, nil},
		{"two other tasks", []ports.CandidateRow{candidate("t0", "p1", "z"), candidate("t2", "p1", "y")},
			func(tx ports.TxReader) ports.RowValidation { return in(tx, "t1", "p1", "a") }, rej("app.project_full", "a project holds at most two tasks")},
		{"the row itself does not count", []ports.CandidateRow{candidate("t0", "p1", "z"), candidate("t1", "p1", "a")},
			func(tx ports.TxReader) ports.RowValidation { return in(tx, "t1", "p1", "a") }, nil},
		{"other projects do not count", []ports.CandidateRow{candidate("t0", "p2", "z"), candidate("t2", "p2", "y")},
			func(tx ports.TxReader) ports.RowValidation { return in(tx, "t1", "p1", "a") }, nil},
		{"title taken by another row", []ports.CandidateRow{candidate("t0", "p1", "a")},
			func(tx ports.TxReader) ports.RowValidation { return in(tx, "t1", "p1", "a") }, rej("app.title_taken", "a title is used once per project")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx := &fakeTx{rows: tc.rows}
			if got := v.ValidateRow(context.Background(), tc.in(tx)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	if want := map[string]any{"project": "p1"}; len(q.asked) == 0 || !reflect.DeepEqual(q.asked[0], want) {
		t.Fatalf("query params %v, want %v", q.asked, want)
	}

	// The commit rule's explicit limit reaches the scan.
	tx := &fakeTx{rows: []ports.CandidateRow{candidate("k", "p1", "keep")}}
	cv := ports.CommitValidation{ActorID: "alice", Partition: "p", Tx: tx,
		Operations: []ports.OperationEvidence{{OpIndex: 0, Op: commit.OpUpsert, Table: "tasks", RowID: "t1", Row: candidate("t1", "p1", "a").Values}}}
	if err := r.CommitValidator().ValidateCommit(context.Background(), cv); err != nil {
		t.Fatal(err)
	}
	if want := (ports.IndexScan{Table: "tasks", Index: "tasks_project_title", Values: []any{"p1", "keep"}, Limit: 1}); !reflect.DeepEqual(tx.scans[0], want) {
		t.Fatalf("scan %+v, want %+v", tx.scans[0], want)
	}
}

// TestDBReadFailures: a storage failure ends the push as itself (the
// pipeline retries or fails it as a storage error, whatever the rule's
// logic made of it); a catalog refusal of the read — an unknown query, a
// bad index value — is the rule failing (sync.constraint_violation); a
// rule that reads too often is stopped.
func TestDBReadFailures(t *testing.T) {
	storageDown := errors.New("connection reset")
	tests := []struct {
		name    string
		rule    string
		queries ports.TxQueries
		txErr   error
		// want: "storage" for storageDown itself, "rule" for a *RuleError.
		want     string
		fragment string
	}{
		{"storage error, even where || would hide it", `db.lookup("tasks", "tasks_project_title", ["p", "t"]).size() > 0 || true`,
			nil, storageDown, "storage", ""},
		{"catalog refusal", `db.lookup("tasks", "tasks_project_title", ["p", "t"]).size() == 0`,
			nil, syncerr.Newf(syncerr.StorageIndexNotFound, "values"), "rule", ""},
		{"a query name computed at run time, none registered", `db.query("tasks." + row.title, {}).size() == 0`,
			nil, nil, "rule", ""},
		{"a param that is not a scalar", `db.query("tasks.inProject", {"project": [1]}).size() == 0`,
			&fakeQueries{}, nil, "rule", ""},
		{"too many reads", `[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17].all(i, db.lookup("tasks", "tasks_project_title", ["p", string(i)]).size() == 0)`,
			nil, nil, "rule", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "validators:\n  tasks:\n    - name: r\n      rule: '" + strings.ReplaceAll(tc.rule, "'", "''") + "'\n      code: app.r\n      message: m\n"
			r, err := rules.Parse("rules.yaml", []byte(src), rules.Options{Schema: ssptest.Schema(t), Queries: tc.queries})
			if err != nil {
				t.Fatal(err)
			}
			tx := &fakeTx{err: tc.txErr}
			err = r.RowValidators()[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "tasks",
				RowID: "t1", Row: candidate("t1", "p", "t").Values, Tx: tx})
			var re *rules.RuleError
			switch tc.want {
			case "storage":
				if !errors.Is(err, storageDown) || errors.As(err, &re) {
					t.Fatalf("got %v, want the storage error itself", err)
				}
			case "rule":
				if !errors.As(err, &re) {
					t.Fatalf("got %#v, want a *RuleError", err)
				}
			}
			if tc.name == "too many reads" && len(tx.scans) != 16 {
				t.Fatalf("%d reads, want 16", len(tx.scans))
			}
		})
	}
}

func TestDBCallsCheckedAtLoad(t *testing.T) {
	tests := []struct {
		name, rule, want string
	}{
		{"unknown query", `db.query("tasks.nope", {}).size() == 0`, `no registered query or descriptor "tasks.nope"`},
		{"unknown table", `db.lookup("nope", "i", [1]).size() == 0`, `table "nope" is not in the served schema`},
		{"unknown index", `db.lookup("tasks", "nope", [1]).size() == 0`, `table "tasks" has no index "nope"`},
		{"wrong value count", `db.lookup("tasks", "tasks_project_title", [row.project_id]).size() == 0`, `has 2 columns, the values list 1`},
		{"wrong argument types", `db.lookup("tasks", 1, [1]).size() == 0`, `found no matching overload for 'lookup'`},
		{"db outside a push", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "validators:\n  tasks:\n    - name: r\n      rule: '" + tc.rule + "'\n      code: app.r\n      message: m\n"
			if tc.rule == "" {
				// The scopes rule runs outside any transaction: no db.
				src, tc.want = "scopes: 'db.query(\"tasks.inProject\", {}).size() == 0 ? {} : {}'\n", "undeclared reference to 'db'"
			}
			_, err := rules.Parse("rules.yaml", []byte(src), rules.Options{Schema: ssptest.Schema(t), Queries: &fakeQueries{}})
			var e *rules.Error
			if err == nil || !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an *Error with %q", err, tc.want)
			}
		})
	}
}

// TestReactionsReadWithDB: a reaction rule's payload reads other rows
// with db too, in the transaction that plans it.
func TestReactionsReadWithDB(t *testing.T) {
	r, err := rules.Parse("rules.yaml", []byte(`
reactions:
  - name: created
    table: tasks
    on: [insert]
    type: tasks.created
    payload: |
      {"siblings": db.lookup("tasks", "tasks_project_title", [row.project_id, "keep"]).map(t, t.id)}
`), rules.Options{Schema: ssptest.Schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	tx := &fakeTx{rows: []ports.CandidateRow{candidate("k1", "p1", "keep")}}
	got, err := r.ReactionPlanner().PlanReactions(context.Background(), ports.CommitValidation{Partition: "p", Tx: tx,
		Operations: []ports.OperationEvidence{{Op: commit.OpUpsert, Table: "tasks", RowID: "t1", Row: candidate("t1", "p1", "a").Values}}})
	if err != nil || len(got) != 1 || string(got[0].Payload) != `{"siblings":["k1"]}` {
		t.Fatalf("planned %+v, %v", got, err)
	}
}
