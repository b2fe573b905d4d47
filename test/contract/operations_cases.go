package contract

import (
	"errors"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func operationGroups() []group {
	return []group{
		{"AuthoritativeQuery", []testCase{
			{"FiltersOrderAndLimit", testQueryFiltersOrderLimit},
			{"StringsCompareInByteOrder", testQueryByteOrder},
			{"ScopeFilterKeepsToPullableRows", testQueryScopeFilter},
			{"BoundToThePartition", testQueryPartition},
			{"SnapshotCarriesMaxSeqAndGate", testQuerySnapshot},
			{"NeverSeesStagedWrites", testQueryStaged},
			{"InsideThePushTransactionSeesStagedWrites", testQueryInTx},
			{"RowIDCursorAndNullEquality", testQueryCursorAndNull},
			{"Refusals", testQueryRefusals},
		}},
	}
}

func (e *env) querier() ports.AuthoritativeQuerier {
	e.t.Helper()
	q, ok := e.s.(ports.AuthoritativeQuerier)
	if !ok {
		e.t.Fatalf("%T does not run authoritative queries", e.s)
	}
	return q
}

// query runs q on partition and returns the row ids in order.
func (e *env) query(partition string, q ports.AuthoritativeQuery) []string {
	e.t.Helper()
	if q.RunningVersion == 0 {
		q.RunningVersion = v1
	}
	res, err := e.querier().QueryAuthoritative(e.ctx, partition, q)
	if err != nil {
		e.t.Fatalf("QueryAuthoritative(%+v): %v", q, err)
	}
	ids := []string{}
	for _, r := range res.Rows {
		ids = append(ids, r.RowID)
	}
	return ids
}

func cond(col string, op operations.Op, v any) operations.Condition {
	return operations.Condition{Column: col, Op: op, Value: v}
}

// testQueryFiltersOrderLimit: conditions all apply, the declared order
// sorts with the row id breaking ties, and the limit caps the rows.
func testQueryFiltersOrderLimit(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{
		{id: "a", project: "p1", owner: "o1", title: "m", done: false},
		{id: "b", project: "p1", owner: "o1", title: "z", done: true},
		{id: "c", project: "p1", owner: "o2", title: "k", done: false},
		{id: "d", project: "p1", owner: "o2", title: "x", done: false},
	}, nil)
	byTitleDesc := []operations.Order{{Column: "title", Desc: true}}
	tests := []struct {
		name string
		q    ports.AuthoritativeQuery
		want []string
	}{
		{"no condition: every row by id", ports.AuthoritativeQuery{Table: "tasks", Limit: 10}, []string{"a", "b", "c", "d"}},
		{"equality", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{cond("done", operations.OpEq, false)}}, []string{"a", "c", "d"}},
		{"inequality", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{cond("owner_id", operations.OpNe, "o1")}}, []string{"c", "d"}},
		{"conditions combine", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{
			cond("done", operations.OpEq, false), cond("title", operations.OpGt, "l")}}, []string{"a", "d"}},
		{"ordered descending", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, OrderBy: byTitleDesc}, []string{"b", "d", "a", "c"}},
		{"ordered by several columns, the id last", ports.AuthoritativeQuery{Table: "tasks", Limit: 10,
			OrderBy: []operations.Order{{Column: "owner_id", Desc: true}, {Column: "done"}}}, []string{"c", "d", "a", "b"}},
		{"limit after the order", ports.AuthoritativeQuery{Table: "tasks", Limit: 2, OrderBy: byTitleDesc}, []string{"b", "d"}},
		{"range bounds inclusive", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{
			cond("title", operations.OpGte, "k"), cond("title", operations.OpLte, "m")}}, []string{"a", "c"}},
		{"range bounds exclusive", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{
			cond("title", operations.OpGt, "k"), cond("title", operations.OpLt, "m")}}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.query("p1", tt.q); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// testQueryByteOrder: string comparisons and order are byte order on
// every engine (upper case before lower case before non-ASCII).
func testQueryByteOrder(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{
		{id: "1", project: "p1", owner: "o", title: "b"},
		{id: "2", project: "p1", owner: "o", title: "B"},
		{id: "3", project: "p1", owner: "o", title: "ä"},
		{id: "4", project: "p1", owner: "o", title: "a"},
	}, nil)
	if got, want := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, OrderBy: []operations.Order{{Column: "title"}}}), []string{"2", "4", "1", "3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order: got %v, want %v", got, want)
	}
	if got, want := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{cond("title", operations.OpGt, "a")}}), []string{"1", "3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("title > a: got %v, want %v", got, want)
	}
}

// testQueryScopeFilter: with a filter only rows whose stored scopes match
// it for every key are returned (the pull's rule); an empty value list
// matches nothing; no filter returns every row.
func testQueryScopeFilter(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{
		{id: "a", project: "p1", owner: "o1"},
		{id: "b", project: "p1", owner: "o2"},
		{id: "c", project: "p2", owner: "o1"},
		{id: "d", project: "p3", owner: "o1"},
	}, nil)
	tests := []struct {
		name   string
		filter map[string][]string
		want   []string
	}{
		{"no filter", nil, []string{"a", "b", "c", "d"}},
		{"one variable", map[string][]string{"project": {"p1"}}, []string{"a", "b"}},
		{"several values", map[string][]string{"project": {"p1", "p2"}}, []string{"a", "b", "c"}},
		{"every key must match", map[string][]string{"project": {"p1", "p2"}, "owner": {"o1"}}, []string{"a", "c"}},
		{"an empty list matches nothing", map[string][]string{"project": {"p1"}, "owner": {}}, []string{}},
		{"a value no row has", map[string][]string{"project": {"p9"}}, []string{}},
		{"duplicate values count once", map[string][]string{"project": {"p2", "p2"}}, []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, ScopeFilter: tt.filter})
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	// The filter applies before the limit: the cap counts pullable rows.
	got := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 1, ScopeFilter: map[string][]string{"project": {"p2"}}})
	if !reflect.DeepEqual(got, []string{"c"}) {
		t.Fatalf("limit 1 under a filter: got %v", got)
	}
}

// testQueryPartition: rows of another partition are never returned.
func testQueryPartition(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "x", owner: "o"}}, nil)
	e.commitTasks("p2", 1, []task{{id: "b", project: "x", owner: "o"}}, nil)
	if got := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 10}); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("p1: got %v", got)
	}
	if got := e.query("p2", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, ScopeFilter: map[string][]string{"project": {"x"}}}); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("p2: got %v", got)
	}
	if got := e.query("p3", ports.AuthoritativeQuery{Table: "tasks", Limit: 10}); len(got) != 0 {
		t.Fatalf("unregistered partition: got %v", got)
	}
}

// testQuerySnapshot: the answer carries the partition's max seq and the
// serve gate as separate reads see them, and whole rows.
func testQuerySnapshot(t *testing.T, h Harness) {
	e := open(t, h)
	res, err := e.querier().QueryAuthoritative(e.ctx, "p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 5, RunningVersion: v1})
	must(t, err)
	if res.MaxCommitSeq != 0 || len(res.Rows) != 0 {
		t.Fatalf("empty partition: %+v", res)
	}
	want, err := e.s.ReadServeGate(e.ctx, "p1", v1)
	must(t, err)
	if !reflect.DeepEqual(res.Gate, want) {
		t.Fatalf("gate of an unregistered partition: %+v, want %+v", res.Gate, want)
	}
	e.commitTasks("p1", 1, []task{{id: "a", project: "p", owner: "o", title: "first"}}, nil)
	seq := e.commitTasks("p1", 2, []task{{id: "b", project: "p", owner: "o", title: "second", version: 3}}, nil)
	_, err = e.s.DeclareCheckpoint(e.ctx, decl("p1", "proj", v1), 3)
	must(t, err)
	res, err = e.querier().QueryAuthoritative(e.ctx, "p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 5, RunningVersion: v1})
	must(t, err)
	if res.MaxCommitSeq != seq || e.bounds("p1").MaxSeq != seq {
		t.Fatalf("MaxCommitSeq %d, want %d", res.MaxCommitSeq, seq)
	}
	if want, err = e.s.ReadServeGate(e.ctx, "p1", v1); err != nil || !reflect.DeepEqual(res.Gate, want) || len(want.Pending) != 1 {
		t.Fatalf("gate %+v, want %+v (%v)", res.Gate, want, err)
	}
	b := task{id: "b", project: "p", owner: "o", title: "second", version: 3}
	if len(res.Rows) != 2 || res.Rows[1].RowID != "b" || res.Rows[1].Version != 3 ||
		!reflect.DeepEqual(res.Rows[1].Scopes, b.scopes()) || string(res.Rows[1].Payload) != string(b.write(0).Payload) {
		t.Fatalf("rows %+v", res.Rows)
	}
}

// testQueryStaged: a query outside the push transaction sees committed
// rows only, even while a push holds the partition.
func testQueryStaged(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p", owner: "o"}}, nil)
	errRollback := errors.New("roll back")
	err := e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", task{id: "b", project: "p", owner: "o"}.write(0)); err != nil {
			return err
		}
		if _, err := tx.GetRow(e.ctx, "tasks", "b"); err != nil { // the staged write has reached the database
			return err
		}
		if got := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 10}); !reflect.DeepEqual(got, []string{"a"}) {
			t.Errorf("during the push: got %v, want [a]", got)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("push: %v", err)
	}
}

// testQueryRefusals: arguments storage refuses with its codes.
func testQueryRefusals(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "p", owner: "o"}}, nil)
	tests := []struct {
		name string
		q    ports.AuthoritativeQuery
		want syncerr.Code
	}{
		{"table not materialized", ports.AuthoritativeQuery{Table: "notes", Limit: 1}, syncerr.StorageTxQueryUnsupported},
		{"unknown table", ports.AuthoritativeQuery{Table: "nope", Limit: 1}, syncerr.UnknownTable},
		{"limit 0", ports.AuthoritativeQuery{Table: "tasks"}, syncerr.StorageInvalidLimit},
		{"condition on an unknown column", ports.AuthoritativeQuery{Table: "tasks", Limit: 1, Where: []operations.Condition{cond("nope", operations.OpEq, "x")}}, syncerr.StorageIndexNotFound},
		{"order by an unknown column", ports.AuthoritativeQuery{Table: "tasks", Limit: 1, OrderBy: []operations.Order{{Column: "nope"}}}, syncerr.StorageIndexNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.RunningVersion = v1
			_, err := e.querier().QueryAuthoritative(e.ctx, "p1", tt.q)
			wantCode(t, err, tt.want)
		})
	}
}

// testQueryCursorAndNull: AfterRowID keeps the rows after it in row id
// order, and an equality with nil matches only NULL cells (the shape of
// an index scan), on the read path and inside the push transaction.
func testQueryCursorAndNull(t *testing.T, h Harness) {
	e := open(t, h)
	ref := `{"blobId":"b1","size":1}`
	e.commitTasks("p1", 1, []task{
		{id: "a", project: "p1", owner: "o1"},
		{id: "b", project: "p1", owner: "o1", attachment: ref},
		{id: "c", project: "p1", owner: "o2"},
		{id: "d", project: "p1", owner: "o1"},
	}, nil)
	isNull := []operations.Condition{cond("attachment", operations.OpEq, nil)}
	tests := []struct {
		name string
		q    ports.AuthoritativeQuery
		want []string
	}{
		{"after a row id", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, AfterRowID: "a"}, []string{"b", "c", "d"}},
		{"a page after a row id", ports.AuthoritativeQuery{Table: "tasks", Limit: 1, AfterRowID: "b"}, []string{"c"}},
		{"after the last row", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, AfterRowID: "d"}, []string{}},
		{"equality with nil", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: isNull}, []string{"a", "c", "d"}},
		{"with other conditions and the cursor", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, AfterRowID: "a",
			Where: append([]operations.Condition{cond("owner_id", operations.OpEq, "o1")}, isNull...)}, []string{"d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.query("p1", tt.q); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	errRollback := errors.New("roll back")
	err := e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", task{id: "e", project: "p1", owner: "o1"}.write(0)); err != nil {
			return err
		}
		rows, err := tx.QueryAuthoritative(e.ctx, ports.AuthoritativeQuery{Table: "tasks", Limit: 2, AfterRowID: "c", Where: isNull})
		if err != nil {
			return err
		}
		got := []string{}
		for _, r := range rows {
			got = append(got, r.RowID)
		}
		if want := []string{"d", "e"}; !reflect.DeepEqual(got, want) {
			t.Errorf("in the transaction: got %v, want %v", got, want)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("push: %v", err)
	}
}

// testQueryInTx: PushTx.QueryAuthoritative runs on the transaction and
// sees its staged upserts and deletes, with the same conditions, scope
// filter, order and limit.
func testQueryInTx(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "x", owner: "o", title: "m"}, {id: "b", project: "x", owner: "o", title: "n"}}, nil)
	ids := func(rows []commit.Row) []string {
		out := []string{}
		for _, r := range rows {
			out = append(out, r.RowID)
		}
		return out
	}
	errRollback := errors.New("roll back")
	err := e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "tasks", task{id: "c", project: "x", owner: "o", title: "a"}.write(0)); err != nil {
			return err
		}
		if err := tx.UpsertRow(e.ctx, "tasks", task{id: "d", project: "y", owner: "o", title: "z"}.write(1)); err != nil {
			return err
		}
		if err := tx.DeleteRow(e.ctx, "tasks", "b", 2); err != nil {
			return err
		}
		tests := []struct {
			name string
			q    ports.AuthoritativeQuery
			want []string
		}{
			{"staged upserts and deletes", ports.AuthoritativeQuery{Table: "tasks", Limit: 10}, []string{"a", "c", "d"}},
			{"ordered, limited", ports.AuthoritativeQuery{Table: "tasks", Limit: 2, OrderBy: []operations.Order{{Column: "title"}}}, []string{"c", "a"}},
			{"conditions", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, Where: []operations.Condition{cond("title", operations.OpLt, "n")}}, []string{"a", "c"}},
			{"scope filter", ports.AuthoritativeQuery{Table: "tasks", Limit: 10, ScopeFilter: map[string][]string{"project": {"y"}}}, []string{"d"}},
		}
		for _, tt := range tests {
			rows, err := tx.QueryAuthoritative(e.ctx, tt.q)
			if err != nil {
				return err
			}
			if got := ids(rows); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
		_, err := tx.QueryAuthoritative(e.ctx, ports.AuthoritativeQuery{Table: "notes", Limit: 1})
		wantCode(t, err, syncerr.StorageTxQueryUnsupported)
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("push: %v", err)
	}
	if got := e.query("p1", ports.AuthoritativeQuery{Table: "tasks", Limit: 10}); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("after the rollback: %v", got)
	}
}
