package operations_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/app/operations"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// recordingTx is a TxReader that answers QueryAuthoritative with n rows
// and records the query.
type recordingTx struct {
	ports.TxReader
	n    int
	last ports.AuthoritativeQuery
}

func (r *recordingTx) QueryAuthoritative(_ context.Context, q ports.AuthoritativeQuery) ([]ports.CandidateRow, error) {
	r.last = q
	out := make([]ports.CandidateRow, r.n)
	for i := range out {
		out[i].RowID = string(rune('a' + i))
	}
	return out, nil
}

func TestQueryInTx(t *testing.T) {
	sc := newFixture(t).sc
	reg, err := operations.NewRegistry(sc, []operations.Query{qByProject, qOpen}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx := &recordingTx{n: 2}
	rows, err := reg.QueryInTx(context.Background(), tx, "tasks.byProject", operations.Params{"project": "p1"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	want := ports.AuthoritativeQuery{Table: "tasks", Limit: 11,
		Where:   []opdomain.Condition{{Column: "project_id", Op: opdomain.OpEq, Value: "p1"}},
		OrderBy: []opdomain.Order{{Column: "title"}}}
	if !reflect.DeepEqual(tx.last, want) {
		t.Fatalf("query %+v, want %+v (no scope filter: validators are server code)", tx.last, want)
	}
	for id, want := range map[string]string{"tasks.byProject": "tasks", "nope": ""} {
		if table, ok := reg.QueryTable(id); table != want || ok != (want != "") {
			t.Errorf("QueryTable(%s) = %q, %t; want %q", id, table, ok, want)
		}
	}
	refusals := []struct {
		name   string
		id     string
		params operations.Params
		rows   int
		want   syncerr.Code
	}{
		{"unknown query", "nope", nil, 0, syncerr.OperationUnknown},
		{"missing parameter", "tasks.byProject", operations.Params{}, 0, syncerr.OperationInvalid},
		{"parameter of the wrong type", "tasks.byProject", operations.Params{"project": 1}, 0, syncerr.OperationInvalid},
		{"unsupported Go type", "tasks.byProject", operations.Params{"project": []string{"p1"}}, 0, syncerr.OperationInvalid},
		{"past maxRows", "tasks.open", operations.Params{"done": false}, 4, syncerr.OperationResultTooLarge},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reg.QueryInTx(context.Background(), &recordingTx{n: tt.rows}, tt.id, tt.params)
			if syncerr.CodeOf(err) != tt.want {
				t.Fatalf("got %v, want %s", err, tt.want)
			}
		})
	}
}
