package operations_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/app/push"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// commandFixture is a memory store with the push pipeline behind the
// operations service, and a command whose Run the test scripts.
type commandFixture struct {
	*fixture
	svc  *operations.Service
	runs int
	run  func(c operations.CommandContext, params opdomain.Value) ([]operations.Mutation, error)
	auth func(who operations.AuthContext) (bool, error)
}

func newCommandFixture(t *testing.T) *commandFixture {
	f := &commandFixture{fixture: newFixture(t)}
	f.task("t1", "p1", "b", false, int64(3))
	f.task("t3", "p3", "c", false, nil)
	sync, err := push.New(push.Options{Schema: func() *schema.Schema { return f.sc }, Store: f.store,
		Now: func() time.Time { return time.UnixMilli(2000) }})
	if err != nil {
		t.Fatal(err)
	}
	complete := operations.Command{ID: "tasks.complete",
		Authorize: func(_ context.Context, who operations.AuthContext, _ opdomain.Value) (bool, error) {
			if f.auth != nil {
				return f.auth(who)
			}
			return true, nil
		},
		Run: func(_ context.Context, c operations.CommandContext, p opdomain.Value) ([]operations.Mutation, error) {
			f.runs++
			return f.run(c, p)
		}}
	reg, err := operations.NewRegistry(f.sc, []operations.Query{qAll}, []operations.Command{complete})
	if err != nil {
		t.Fatal(err)
	}
	f.svc, err = operations.New(operations.Options{Store: f.store, Querier: f.store, Schema: f.sc, Registry: reg, Pusher: sync,
		Resolver: grants{"alice": {"project_id": {"p1"}}, "bob": {"project_id": {"p1"}}},
		Now:      func() time.Time { return time.UnixMilli(2000) }})
	if err != nil {
		t.Fatal(err)
	}
	// The default plan completes the task the params name, read through
	// the transaction.
	f.run = func(c operations.CommandContext, p opdomain.Value) ([]operations.Mutation, error) {
		idV, _ := p.Get("id")
		id, _ := idV.AsString()
		row, err := c.GetRow(context.Background(), "tasks", id)
		if err != nil || row == nil {
			return nil, err
		}
		row = copyRow(row)
		row["done"] = true
		return []operations.Mutation{{Table: "tasks", Values: row}}, nil
	}
	return f
}

func copyRow(r ports.RowValues) map[string]any {
	out := map[string]any{}
	for k, v := range r {
		out[k] = v
	}
	return out
}

// commandAnswer is a decoded command response.
type commandAnswer struct {
	status    string
	commitSeq float64
	results   []string // each result's status, with its code for an error
	code      string
}

func (f *commandFixture) command(actor, clientID, requestID, id string) commandAnswer {
	f.t.Helper()
	rev, _ := opdomain.SafeNumber(1)
	params := object(field("id", sv(id)))
	body, err := object(field("revision", rev), field("kind", sv("command")), field("clientId", sv(clientID)),
		field("operationId", sv("tasks.complete")), field("requestId", sv(requestID)), field("params", params)).Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	out, code := f.svc.Handle(context.Background(), ports.Identity{ActorID: actor, Partition: "part"}, body)
	v, err := opdomain.Decode(out)
	if err != nil {
		f.t.Fatal(err)
	}
	kind, _ := mustGet(f.t, v, "kind").AsString()
	if kind == "error" {
		c, _ := mustGet(f.t, v, "code").AsString()
		if c != string(code) {
			f.t.Fatalf("reported %q, encoded %q", code, c)
		}
		return commandAnswer{code: c}
	}
	if kind != "command" {
		f.t.Fatalf("kind %q", kind)
	}
	if rid, _ := mustGet(f.t, v, "requestId").AsString(); rid != requestID {
		f.t.Fatalf("requestId %q", rid)
	}
	a := commandAnswer{}
	a.status, _ = mustGet(f.t, v, "status").AsString()
	if seq, ok := v.Get("commitSeq"); ok {
		a.commitSeq, _ = seq.AsNumber()
	}
	results, _ := mustGet(f.t, v, "results").Items()
	for _, r := range results {
		st, _ := mustGet(f.t, r, "status").AsString()
		if c, ok := r.Get("code"); ok {
			cs, _ := c.AsString()
			st += " " + cs
		}
		a.results = append(a.results, st)
	}
	return a
}

func (f *commandFixture) done(id string) bool {
	f.t.Helper()
	row, err := f.store.GetRow(context.Background(), "part", "tasks", id)
	if err != nil || row == nil {
		f.t.Fatalf("row %s: %v", id, err)
	}
	cols := decodeTask(f.t, f.sc, row.Payload)
	return cols["done"] == true
}

func TestCommandAppliesThroughThePushPipelineOnce(t *testing.T) {
	f := newCommandFixture(t)
	got := f.command("alice", "c1", "r1", "t1")
	want := commandAnswer{status: "applied", commitSeq: 3, results: []string{"applied"}}
	if !reflect.DeepEqual(got, want) || !f.done("t1") || f.runs != 1 {
		t.Fatalf("applied: %+v (runs %d)", got, f.runs)
	}
	// REMOTE.md §3: the ordinary idempotency identity, JSON tuples.
	rec, ok, err := f.store.GetPushResult(context.Background(), "part", `["remote-command","alice","c1"]`, `["tasks.complete","r1"]`)
	if err != nil || !ok || rec.ActorID != "alice" {
		t.Fatalf("stored result %+v %v %v", rec, ok, err)
	}
	// An applied retry is cached, same seq, without running the command.
	if got := f.command("alice", "c1", "r1", "t1"); got.status != "cached" || got.commitSeq != 3 || f.runs != 1 {
		t.Fatalf("retry: %+v (runs %d)", got, f.runs)
	}
	// Another request id is another commit.
	if got := f.command("alice", "c1", "r2", "t1"); got.status != "applied" || got.commitSeq != 4 || f.runs != 2 {
		t.Fatalf("second request: %+v", got)
	}
	// The same client and request ids of another actor do not collide.
	if got := f.command("bob", "c1", "r1", "t1"); got.status != "applied" || got.commitSeq != 5 || f.runs != 3 {
		t.Fatalf("another actor: %+v", got)
	}
}

func TestCommandRejectionIsStoredAndReplayed(t *testing.T) {
	f := newCommandFixture(t)
	// The command writes a row of a project outside the caller's grant:
	// the ordinary write authorization rejects the commit.
	f.run = func(operations.CommandContext, opdomain.Value) ([]operations.Mutation, error) {
		return []operations.Mutation{{Table: "tasks", Values: map[string]any{"id": "t9", "project_id": "p3", "title": "x",
			"done": false, "estimate": nil, "attachment": nil}}}, nil
	}
	want := commandAnswer{status: "rejected", results: []string{"error sync.forbidden"}}
	if got := f.command("alice", "c1", "r1", ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("rejected: %+v", got)
	}
	if got := f.command("alice", "c1", "r1", ""); !reflect.DeepEqual(got, want) || f.runs != 1 {
		t.Fatalf("replay: %+v (runs %d)", got, f.runs)
	}
	if row, _ := f.store.GetRow(context.Background(), "part", "tasks", "t9"); row != nil {
		t.Fatal("rejected row landed")
	}
}

func TestCommandReadsOnlyAuthorizedRows(t *testing.T) {
	f := newCommandFixture(t)
	var seen ports.RowValues
	f.run = func(c operations.CommandContext, _ opdomain.Value) ([]operations.Mutation, error) {
		var err error
		if seen, err = c.GetRow(context.Background(), "tasks", "t3"); err != nil {
			return nil, err
		}
		mine, err := c.GetRow(context.Background(), "tasks", "t1")
		if err != nil || mine == nil {
			return nil, errors.New("own row unreadable")
		}
		if c.OperationID != "tasks.complete" || c.RequestID != "r1" || c.ActorID != "alice" || c.ClientID != "c1" {
			return nil, errors.New("context")
		}
		return []operations.Mutation{{Table: "tasks", Delete: true, RowID: "t1"}}, nil
	}
	if got := f.command("alice", "c1", "r1", ""); got.status != "applied" || seen != nil {
		t.Fatalf("got %+v, row outside the grant %v", got, seen)
	}
	if row, _ := f.store.GetRow(context.Background(), "part", "tasks", "t1"); row != nil {
		t.Fatal("delete did not land")
	}
}

func TestCommandScansADeclaredIndex(t *testing.T) {
	f := newCommandFixture(t)
	var found []string
	f.run = func(c operations.CommandContext, _ opdomain.Value) ([]operations.Mutation, error) {
		// t3 is outside alice's grant: the lookup is the server's own, not
		// the caller's (GetRow would answer nil).
		rows, err := c.ScanRowsByIndex(context.Background(), ports.IndexScan{Table: "tasks", Index: "tasks_project_title",
			Values: []any{"p3", "c"}, Limit: 10})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			found = append(found, r.RowID)
		}
		if _, err := c.ScanRowsByIndex(context.Background(), ports.IndexScan{Table: "tasks", Index: "tasks_project_title",
			Values: []any{"p3"}, Limit: 10}); syncerr.CodeOf(err) != syncerr.StorageIndexValueCount {
			return nil, fmt.Errorf("prefix lookup: %v", err)
		}
		return []operations.Mutation{{Table: "tasks", Delete: true, RowID: "t1"}}, nil
	}
	if got := f.command("alice", "c1", "r1", ""); got.status != "applied" || !reflect.DeepEqual(found, []string{"t3"}) {
		t.Fatalf("got %+v, found %v", got, found)
	}
}

func TestCommandFailures(t *testing.T) {
	full := func(edit func(map[string]any)) []operations.Mutation {
		v := map[string]any{"id": "t1", "project_id": "p1", "title": "x", "done": false, "estimate": nil, "attachment": nil}
		edit(v)
		return []operations.Mutation{{Table: "tasks", Values: v}}
	}
	tests := []struct {
		name  string
		actor string
		auth  func(operations.AuthContext) (bool, error)
		muts  []operations.Mutation
		err   error
		want  syncerr.Code
	}{
		{name: "authorize refuses", auth: func(operations.AuthContext) (bool, error) { return false, nil }, want: syncerr.OperationForbidden},
		{name: "authorize fails", auth: func(operations.AuthContext) (bool, error) { return false, errors.New("x") }, want: syncerr.OperationExecFailed},
		{name: "a resolver outage", actor: "outage", want: syncerr.OperationForbidden},
		{name: "no mutations", muts: []operations.Mutation{}, want: syncerr.OperationInvalid},
		{name: "a run failure", err: errors.New("boom"), want: syncerr.OperationExecFailed},
		{name: "a catalog error of the run", err: syncerr.New(syncerr.OperationInvalid), want: syncerr.OperationInvalid},
		{name: "an unknown table", muts: []operations.Mutation{{Table: "nope", Values: map[string]any{}}}, want: syncerr.OperationInvalid},
		{name: "a missing column", muts: full(func(v map[string]any) { delete(v, "estimate") }), want: syncerr.OperationInvalid},
		{name: "an unknown column", muts: full(func(v map[string]any) { v["colour"] = "red" }), want: syncerr.OperationInvalid},
		{name: "a value of the wrong type", muts: full(func(v map[string]any) { v["done"] = "yes" }), want: syncerr.OperationInvalid},
		{name: "an empty primary key", muts: full(func(v map[string]any) { v["id"] = "" }), want: syncerr.OperationInvalid},
		{name: "a delete without a row id", muts: []operations.Mutation{{Table: "tasks", Delete: true}}, want: syncerr.OperationInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCommandFixture(t)
			f.auth = tt.auth
			if tt.muts != nil || tt.err != nil {
				f.run = func(operations.CommandContext, opdomain.Value) ([]operations.Mutation, error) { return tt.muts, tt.err }
			}
			actor := tt.actor
			if actor == "" {
				actor = "alice"
			}
			if got := f.command(actor, "c1", "r1", "t1"); got.code != string(tt.want) {
				t.Fatalf("got %+v, want %s", got, tt.want)
			}
			// A failure is not a stored outcome: nothing answers a retry.
			if _, ok, _ := f.store.GetPushResult(context.Background(), "part", `["remote-command","`+actor+`","c1"]`, `["tasks.complete","r1"]`); ok {
				t.Fatal("a failed command stored a result")
			}
		})
	}
	t.Run("the kinds do not mix", func(t *testing.T) {
		f := newCommandFixture(t)
		body := request("query", "c1", "tasks.complete", nil)
		if out, code := f.svc.Handle(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, body); code != syncerr.OperationUnknown {
			t.Fatalf("command id as a query: %s", out)
		}
		body = request("command", "c1", "tasks.all", nil)
		if out, code := f.svc.Handle(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, body); code != syncerr.OperationUnknown {
			t.Fatalf("query id as a command: %s", out)
		}
	})
	t.Run("without a push pipeline", func(t *testing.T) {
		f := newFixture(t)
		reg, err := operations.NewRegistry(f.sc, nil, []operations.Command{{ID: "tasks.complete",
			Authorize: func(context.Context, operations.AuthContext, opdomain.Value) (bool, error) { return true, nil },
			Run: func(context.Context, operations.CommandContext, opdomain.Value) ([]operations.Mutation, error) {
				return nil, nil
			}}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := operations.New(operations.Options{Store: f.store, Schema: f.sc, Registry: reg, Resolver: grants{"alice": {}},
			Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, code := s.Handle(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, request("command", "c1", "tasks.complete", nil)); code != syncerr.OperationStorage {
			t.Fatalf("code %q", code)
		}
	})
}

func TestNewRegistryRefusesCommands(t *testing.T) {
	sc := newFixture(t).sc
	ok := func(context.Context, operations.AuthContext, opdomain.Value) (bool, error) { return true, nil }
	run := func(context.Context, operations.CommandContext, opdomain.Value) ([]operations.Mutation, error) {
		return nil, nil
	}
	tests := []struct {
		name     string
		queries  []operations.Query
		commands []operations.Command
	}{
		{"an empty id", nil, []operations.Command{{Authorize: ok, Run: run}}},
		{"no authorize", nil, []operations.Command{{ID: "c", Run: run}}},
		{"no run", nil, []operations.Command{{ID: "c", Authorize: ok}}},
		{"a duplicate", nil, []operations.Command{{ID: "c", Authorize: ok, Run: run}, {ID: "c", Authorize: ok, Run: run}}},
		{"a query's id", []operations.Query{qAll}, []operations.Command{{ID: "tasks.all", Authorize: ok, Run: run}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := operations.NewRegistry(sc, tt.queries, tt.commands); err == nil {
				t.Fatal("registry built")
			}
		})
	}
}

func decodeTask(t *testing.T, sc *schema.Schema, payload []byte) map[string]any {
	t.Helper()
	tbl := sc.Table("tasks")
	vals, err := rowcodec.New(tbl).DecodeRow(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for i, c := range tbl.Columns {
		out[c.Name] = vals[i].Plain()
	}
	return out
}
