package rules_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/adapters/rules"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/ports"
)

// TestExampleRules loads examples/rules.yaml against the demo schema and
// runs each of its rules both ways.
func TestExampleRules(t *testing.T) {
	s, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	r, err := rules.Load("../../examples/rules.yaml", rules.Options{Schema: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("scopes", func(t *testing.T) {
		for _, tc := range []struct {
			claims map[string]any
			want   scopes.Allowed
		}{
			{map[string]any{"lists": []any{"l-1", "l-2"}}, scopes.Allowed{"owner_id": {"alice"}, "list_id": {"l-1", "l-2"}}},
			{map[string]any{"sub": "alice"}, scopes.Allowed{"owner_id": {"alice"}, "list_id": {}}},
		} {
			id := ports.Identity{ActorID: "alice", Partition: "default", Claims: tc.claims}
			got, err := r.ScopeResolver().ResolveScopes(ports.WithIdentity(ctx, id), ports.ScopeRequest{ActorID: "alice", Partition: "default"})
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("claims %v: %v %v", tc.claims, got, err)
			}
		}
	})

	validators := map[string]ports.RowValidator{}
	for _, v := range r.RowValidators() {
		validators[v.Table()] = v
	}
	list := func(title string) ports.RowValues {
		return ports.RowValues{"id": "l-1", "owner_id": "alice", "title": title, "updated_at_ms": int64(1)}
	}
	todo := func(title string, position int64) ports.RowValues {
		return ports.RowValues{"id": "t-1", "list_id": "l-1", "title": title, "done": false, "position": position, "updated_at_ms": int64(1)}
	}
	reject := func(code, msg, path, reason string) error {
		rej, err := ports.NewValidationRejection(code, msg, &ssp2.RejectionDetails{FieldPaths: []string{path}, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return rej
	}
	for _, tc := range []struct {
		name  string
		table string
		row   ports.RowValues
		want  error
	}{
		{"lists/title-length accepts", "lists", list("Groceries"), nil},
		{"lists/title-length: blank", "lists", list("   "), reject("todos.list_title_length", "a list's title has 1 to 100 characters", "title", "title_length")},
		{"lists/title-length: long", "lists", list(strings.Repeat("x", 101)), reject("todos.list_title_length", "a list's title has 1 to 100 characters", "title", "title_length")},
		{"todos/title-length accepts 200 characters", "todos", todo(strings.Repeat("é", 200), 0), nil},
		{"todos/title-length: empty", "todos", todo("", 0), reject("todos.title_length", "a todo's title has 1 to 200 characters", "title", "title_length")},
		{"todos/title-length: 201 characters", "todos", todo(strings.Repeat("x", 201), 0), reject("todos.title_length", "a todo's title has 1 to 200 characters", "title", "title_length")},
		{"todos/position accepts", "todos", todo("Milk", 3), nil},
		{"todos/position: negative", "todos", todo("Milk", -1), reject("todos.position", "a todo's position is not negative", "position", "negative_position")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := validators[tc.table].ValidateRow(ctx, ports.RowValidation{Op: commit.OpUpsert, Table: tc.table, RowID: "x",
				Row: tc.row, ActorID: "alice", Partition: "default"})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
			// Deletes are not checked by these rules.
			if err := validators[tc.table].ValidateRow(ctx, ports.RowValidation{Op: commit.OpDelete, Table: tc.table, RowID: "x", Stored: tc.row}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		})
	}

	t.Run("commitValidators/bulk-delete-limit", func(t *testing.T) {
		deletes := func(n int) ports.CommitValidation {
			c := ports.CommitValidation{ActorID: "alice", Partition: "default",
				Operations: []ports.OperationEvidence{{OpIndex: 0, Op: commit.OpUpsert, Table: "lists", RowID: "l-1", Row: list("Groceries")}}}
			for i := range n {
				c.Operations = append(c.Operations, ports.OperationEvidence{OpIndex: i + 1, Op: commit.OpDelete, Table: "todos", RowID: fmt.Sprint("t-", i)})
			}
			return c
		}
		if err := r.CommitValidator().ValidateCommit(ctx, deletes(20)); err != nil {
			t.Fatalf("20 deletes: %v", err)
		}
		err := r.CommitValidator().ValidateCommit(ctx, deletes(21))
		var rej *ports.ValidationRejection
		if !errors.As(err, &rej) || rej.OpIndex != 21 || rej.Code != "todos.too_many_deletes" || rej.Message != "a commit deletes at most 20 rows" {
			t.Fatalf("21 deletes: %#v", err)
		}
	})

	t.Run("reactions/todo-completed", func(t *testing.T) {
		open, done := todo("Milk", 0), todo("Milk", 0)
		done["done"] = true
		plan := func(ops ...ports.OperationEvidence) []ports.PlannedReaction {
			t.Helper()
			got, err := r.ReactionPlanner().PlanReactions(ctx, ports.CommitValidation{ClientID: "phone", ClientCommitID: "c-1",
				ActorID: "alice", Partition: "default", Operations: ops})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := plan(ports.OperationEvidence{OpIndex: 0, Op: commit.OpUpsert, Table: "todos", RowID: "t-1", Row: done, Stored: open})
		want := []ports.PlannedReaction{{Key: "todo-completed:todos:t-1:0", Type: "todos.completed", Version: 1,
			Payload: []byte(`{"completedBy":"alice","listId":"l-1","title":"Milk","todoId":"t-1"}`)}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("completing a todo planned %+v", got)
		}
		// Not for a todo created done, one already done, one reopened, a
		// delete, or another table.
		if got := plan(
			ports.OperationEvidence{OpIndex: 0, Op: commit.OpUpsert, Table: "todos", RowID: "t-1", Row: done},
			ports.OperationEvidence{OpIndex: 1, Op: commit.OpUpsert, Table: "todos", RowID: "t-1", Row: done, Stored: done},
			ports.OperationEvidence{OpIndex: 2, Op: commit.OpUpsert, Table: "todos", RowID: "t-1", Row: open, Stored: done},
			ports.OperationEvidence{OpIndex: 3, Op: commit.OpDelete, Table: "todos", RowID: "t-1", Stored: open},
			ports.OperationEvidence{OpIndex: 4, Op: commit.OpUpsert, Table: "lists", RowID: "l-1", Row: list("Groceries"), Stored: list("Groceries")},
		); len(got) != 0 {
			t.Fatalf("planned %+v", got)
		}
	})
}
