package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// descriptorFiles copies the todos descriptor document and the
// operations file registering its queries (app/operations/testdata) side
// by side, and returns the operations file's path and the descriptors'
// id prefix.
func descriptorFiles(t *testing.T) (path, hash string) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"operations.json", "todos.queries.ir.json"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "app", "operations", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if name == "todos.queries.ir.json" {
			sum := sha256.Sum256(data)
			hash = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	return filepath.Join(dir, "operations.json"), hash
}

// indexedTodosIR is the todos demo schema with an index on todos
// (list_id, done), for trusted lookups.
func indexedTodosIR(t *testing.T) []byte {
	t.Helper()
	var ir map[string]any
	if err := json.Unmarshal(todos.IR(), &ir); err != nil {
		t.Fatal(err)
	}
	for _, tb := range ir["tables"].([]any) {
		if tb := tb.(map[string]any); tb["name"] == "todos" {
			tb["indexes"] = []any{map[string]any{"name": "todos_by_list_done", "columns": []string{"list_id", "done"}}}
		}
	}
	out, err := json.Marshal(ir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// todoOps builds the todos demo's rows as push operations.
type todoOps struct {
	t *testing.T
	s *server
}

func (o todoOps) list(id, owner string) ssp2.PushOperation {
	return ssptest.Upsert("lists", id, ssptest.Sparse(o.t, o.s.sch.Table("lists"), ssptest.Cols{"id": rowcodec.String(id),
		"owner_id": rowcodec.String(owner), "title": rowcodec.String("list " + id), "updated_at_ms": rowcodec.Int(1)}), -1)
}

func (o todoOps) todo(id, list string, done bool, position, updated int64) ssp2.PushOperation {
	return ssptest.Upsert("todos", id, ssptest.Sparse(o.t, o.s.sch.Table("todos"), ssptest.Cols{"id": rowcodec.String(id),
		"list_id": rowcodec.String(list), "title": rowcodec.String("todo " + id), "done": rowcodec.Bool(done),
		"position": rowcodec.Int(position), "updated_at_ms": rowcodec.Int(updated)}), -1)
}

// descriptorRows decodes a query answer into its rows' keys and values
// (strings, numbers and booleans), or the error's code.
func descriptorRows(t *testing.T, rep reply) (rows []map[string]any, keys [][]string, code string) {
	t.Helper()
	if rep.status != 200 || rep.header.Get("Content-Type") != httpapi.ContentTypeOperations {
		t.Fatalf("status %d (%s): %s", rep.status, rep.header.Get("Content-Type"), rep.body)
	}
	v, err := opdomain.Decode(rep.body)
	if err != nil {
		t.Fatal(err)
	}
	if kind, _ := v.Get("kind"); func() string { s, _ := kind.AsString(); return s }() == "error" {
		c, _ := v.Get("code")
		s, _ := c.AsString()
		return nil, nil, s
	}
	items, _ := func() opdomain.Value { r, _ := v.Get("rows"); return r }().Items()
	for _, it := range items {
		fields, _ := it.Fields()
		row, names := map[string]any{}, []string{}
		for _, f := range fields {
			names = append(names, f.Key)
			if s, ok := f.Value.AsString(); ok {
				row[f.Key] = s
			} else if n, ok := f.Value.AsNumber(); ok {
				row[f.Key] = n
			} else if b, ok := f.Value.AsBool(); ok {
				row[f.Key] = b
			}
		}
		rows, keys = append(rows, row), append(keys, names)
	}
	return rows, keys, ""
}

// TestDescriptorQueriesOverHTTP: the named queries of a typegen document
// answer POST /operations under their generated ids, with their result
// names, literals, order and scopes, on both engines.
func TestDescriptorQueriesOverHTTP(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		path, hash := descriptorFiles(t)
		s := start(t, e, serverOpts{ir: todos.IR(), config: func(c *config.Config) { c.Operations = path }})
		writer := call{actor: "alice", scopes: `{"owner_id":["*"],"list_id":["*"]}`}
		ep := s.epoch(writer)
		o := todoOps{t, s}
		resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", o.list("l-1", "alice"), o.list("l-2", "bob"), o.list("l-0", "alice"),
				o.todo("a", "l-1", false, 2, 10), o.todo("b", "l-1", true, 1, 30), o.todo("c", "l-1", false, 3, 20),
				o.todo("d", "l-2", false, 1, 5)),
		}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("seed push %+v", resp.Results[0])
		}
		str := func(s string) opdomain.Value { v, _ := opdomain.String(s); return v }
		query := func(op, key, value string) []byte {
			return opRequest(t, "query", "reader-1", op, opParams(t, opdomain.Field{Key: key, Value: str(value)}))
		}
		grant := `{"owner_id":["alice"],"list_id":["l-1"]}`
		tests := []struct {
			name string
			body []byte
			ids  []string
			keys []string
			code string
		}{
			{"the todos of a list, in position order", query(hash+"/todosInList", "listId", "l-1"),
				[]string{"b", "a", "c"}, []string{"id", "title", "done", "position"}, ""},
			{"a literal, a renamed column, descending", query(hash+"/openTodos", "listId", "l-1"),
				[]string{"c", "a"}, []string{"id", "title", "updatedAtMs"}, ""},
			{"another table, by title", query(hash+"/listsByOwner", "ownerId", "alice"),
				[]string{"l-0", "l-1"}, []string{"id", "title", "updatedAtMs"}, ""},
			{"a list the caller is not granted", query(hash+"/todosInList", "listId", "l-2"), nil, nil, "operation.forbidden"},
			{"another owner's lists: only the caller's scopes' rows", query(hash+"/listsByOwner", "ownerId", "bob"), nil, nil, "operation.forbidden"},
			{"the descriptor's name is not an operation id", query("todosInList", "listId", "l-1"), nil, nil, "operation.unknown"},
			{"a parameter under its SQL name", query(hash+"/todosInList", "list_id", "l-1"), nil, nil, "operation.invalid_request"},
			{"a query of the document the file does not register", query(hash+"/listProgress", "ownerId", "alice"), nil, nil, "operation.unknown"},
		}
		for _, tt := range tests {
			rows, keys, code := descriptorRows(t, s.operation("carol", grant, httpapi.ContentTypeOperations, tt.body))
			if code != tt.code {
				t.Errorf("%s: code %q, want %q", tt.name, code, tt.code)
				continue
			}
			ids := []string{}
			for i, r := range rows {
				ids = append(ids, r["id"].(string))
				if !reflect.DeepEqual(keys[i], tt.keys) {
					t.Errorf("%s: row %d keys %v, want %v", tt.name, i, keys[i], tt.keys)
				}
			}
			if tt.code == "" && !reflect.DeepEqual(ids, tt.ids) {
				t.Errorf("%s: rows %v, want %v", tt.name, ids, tt.ids)
			}
			if tt.name == "the todos of a list, in position order" && (rows[0]["done"] != true || rows[0]["position"] != 1.0) {
				t.Errorf("%s: first row %v", tt.name, rows[0])
			}
		}
	})
}

// openTodoLimit rejects a todo that would leave its list with more than
// three open todos. It counts them twice inside the push transaction,
// through the trusted index lookup (in pages of two) and through the
// openTodos descriptor by name, and fails if the two disagree.
type openTodoLimit struct{ queries ports.TxQueries }

func (openTodoLimit) Table() string { return "todos" }

func (v openTodoLimit) ValidateRow(ctx context.Context, rv ports.RowValidation) error {
	if rv.Row == nil || rv.Row["done"] == true {
		return nil
	}
	list := rv.Row["list_id"]
	var scanned []string
	for after := ""; ; {
		page, err := rv.Tx.ScanRowsByIndex(ctx, ports.IndexScan{Table: "todos", Index: "todos_by_list_done",
			Values: []any{list, false}, AfterRowID: after, Limit: 2})
		if err != nil {
			return err
		}
		for _, r := range page {
			scanned = append(scanned, r.RowID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].RowID
	}
	rows, err := v.queries.QueryInTx(ctx, rv.Tx, "openTodos", map[string]any{"listId": list})
	if err != nil {
		return err
	}
	if len(rows) != len(scanned) {
		return errDisagree
	}
	open := 1
	for _, id := range scanned {
		if id != rv.RowID {
			open++
		}
	}
	if open > 3 {
		return &ports.ValidationRejection{Code: "todos.too_many_open", Message: "a list holds at most three open todos"}
	}
	return nil
}

var errDisagree = &ports.ValidationRejection{Code: "test.disagree", Message: "the index scan and the descriptor disagree"}

// TestValidatorUsesDescriptorsAndIndexLookups: a row validator runs a
// descriptor by name and a trusted index lookup inside the push
// transaction, seeing the commit's staged writes, on both engines.
func TestValidatorUsesDescriptorsAndIndexLookups(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		path, _ := descriptorFiles(t)
		validator := app.ProvideRowValidator(func(q ports.TxQueries) openTodoLimit { return openTodoLimit{queries: q} })
		s := start(t, e, serverOpts{ir: indexedTodosIR(t), config: func(c *config.Config) { c.Operations = path },
			extra: []fx.Option{validator}})
		writer := call{actor: "alice", scopes: `{"owner_id":["*"],"list_id":["*"]}`}
		ep := s.epoch(writer)
		o := todoOps{t, s}
		push := func(id string, ops ...ssp2.PushOperation) *ssp2.PushResult {
			resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep,
				Commits: []*ssp2.PushCommit{ssptest.Commit(id, ops...)}})
			return resp.Results[0]
		}
		if r := push("k1", o.list("l-1", "alice"), o.todo("a", "l-1", false, 1, 1), o.todo("b", "l-1", false, 2, 1),
			o.todo("c", "l-1", false, 3, 1), o.todo("x", "l-1", true, 4, 1)); r.Status != ssp2.PushApplied {
			t.Fatalf("three open todos: %+v", r)
		}
		// The fourth open todo is counted against the three staged or stored.
		if r := push("k2", o.todo("d", "l-1", false, 5, 2)); r.Status != ssp2.PushRejected || r.Results[0].Code != "todos.too_many_open" {
			t.Fatalf("a fourth open todo: %+v", r)
		}
		// Closing one earlier in the same commit makes room: the lookup sees
		// the staged write.
		if r := push("k3", o.todo("a", "l-1", true, 1, 3), o.todo("d", "l-1", false, 5, 3)); r.Status != ssp2.PushApplied {
			t.Fatalf("close one, open one: %+v", r)
		}
		// Reopening a todo that is already open counts it once.
		if r := push("k4", o.todo("b", "l-1", false, 2, 4)); r.Status != ssp2.PushApplied {
			t.Fatalf("an open todo updated: %+v", r)
		}
		if r := push("k5", o.todo("a", "l-1", false, 1, 5)); r.Status != ssp2.PushRejected || r.Results[0].Code != "todos.too_many_open" {
			t.Fatalf("reopening past the limit: %+v", r)
		}
	})
}
