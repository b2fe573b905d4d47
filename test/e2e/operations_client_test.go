package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/client"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// TestClientCallsOperations: the Go client runs registered queries and
// commands over POST /operations on both engines; an operation failure is
// an *OperationError with its catalog code, a transport refusal an
// *HTTPError.
func TestClientCallsOperations(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		path := filepath.Join(t.TempDir(), "operations.json")
		if err := os.WriteFile(path, []byte(operationsFile), 0o600); err != nil {
			t.Fatal(err)
		}
		retitle := app.ProvideRemoteCommand(func() operations.Command {
			return operations.Command{ID: "tasks.retitle",
				Authorize: func(_ context.Context, who operations.AuthContext, _ opdomain.Value) (bool, error) {
					return who.ActorID == "alice", nil
				},
				Run: func(ctx context.Context, c operations.CommandContext, p opdomain.Value) ([]operations.Mutation, error) {
					row, err := c.GetRow(ctx, "tasks", "t1")
					if err != nil || row == nil {
						return nil, errors.New("t1 is missing")
					}
					next := map[string]any{}
					for k, v := range row {
						next[k] = v
					}
					title, _ := p.Get("title")
					next["title"], _ = title.AsString()
					return []operations.Mutation{{Table: "tasks", Values: next}}, nil
				}}
		})
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Operations = path }, extra: []fx.Option{retitle}})
		base := strings.TrimSuffix(s.url, "/sync")
		newClient := func(actor, grant string) *client.Client {
			h := http.Header{}
			if actor != "" {
				h.Set("X-Syncd-Actor", actor)
			}
			h.Set("X-Syncd-Scopes", grant)
			c, err := client.New(client.Options{BaseURL: base, Schema: s.sch, ClientID: "ops-" + actor, Header: h})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		ctx := context.Background()
		writer := newClient("alice", `{"owner":["alice"],"project_id":["*"]}`)
		var seed []ssp2.PushOperation
		for _, r := range []struct {
			id, project, title string
			estimate           int64
		}{{"t1", "p1", "b", 1}, {"t2", "p1", "a", 5}, {"t3", "p2", "c", 8}} {
			op, err := writer.Upsert("tasks", r.id, map[string]rowcodec.Value{"id": rowcodec.String(r.id),
				"project_id": rowcodec.String(r.project), "title": rowcodec.String(r.title), "done": rowcodec.Bool(false),
				"estimate": rowcodec.Int(r.estimate), "attachment": rowcodec.Null()}, -1)
			if err != nil {
				t.Fatal(err)
			}
			seed = append(seed, op)
		}
		writer.Queue(seed...)
		if res, err := writer.Push(ctx); err != nil || res.Pushes[0].Status != ssp2.PushApplied {
			t.Fatalf("seed push: %+v %v", res, err)
		}

		str := func(s string) opdomain.Value { v, _ := opdomain.String(s); return v }
		obj := func(fields ...opdomain.Field) opdomain.Value {
			v, err := opdomain.Object(fields...)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		project := func(p string) opdomain.Value { return obj(opdomain.Field{Key: "project", Value: str(p)}) }
		reader := newClient("bob", `{"project_id":["p1","p2"]}`)

		got, err := reader.Query(ctx, "tasks.byProject", project("p1"))
		if err != nil {
			t.Fatal(err)
		}
		var ids, titles []string
		for _, row := range got.Rows {
			if len(row) != 3 || row[0].Key != "id" || row[1].Key != "title" || row[2].Key != "estimate" {
				t.Fatalf("row columns %+v", row)
			}
			id, _ := row[0].Value.AsString()
			title, _ := row[1].Value.AsString()
			ids, titles = append(ids, id), append(titles, title)
		}
		if got.OperationID != "tasks.byProject" || got.MaxCommitSeq != 1 || !reflect.DeepEqual(ids, []string{"t2", "t1"}) ||
			!reflect.DeepEqual(titles, []string{"a", "b"}) {
			t.Fatalf("query: %+v", got)
		}

		failures := []struct {
			name string
			call func() error
			want syncerr.Code
		}{
			{"unknown operation", func() error { _, err := reader.Query(ctx, "nope", opdomain.Null()); return err }, syncerr.OperationUnknown},
			{"a project outside the grant", func() error { _, err := reader.Query(ctx, "tasks.byProject", project("p3")); return err }, syncerr.OperationForbidden},
			{"a parameter of the wrong type", func() error {
				_, err := reader.Query(ctx, "tasks.byProject", obj(opdomain.Field{Key: "project", Value: opdomain.Integer(1)}))
				return err
			}, syncerr.OperationInvalid},
			{"past maxRows", func() error {
				_, err := writer.Query(ctx, "tasks.estimated", obj(opdomain.Field{Key: "min", Value: opdomain.Integer(0)}))
				return err
			}, syncerr.OperationResultTooLarge},
			{"a command the actor may not run", func() error {
				_, err := reader.Command(ctx, "tasks.retitle", "r1", obj(opdomain.Field{Key: "title", Value: str("x")}))
				return err
			}, syncerr.OperationForbidden},
		}
		for _, tt := range failures {
			err := tt.call()
			var oe *client.OperationError
			if !errors.As(err, &oe) || oe.Code != string(tt.want) || client.CodeOf(err) != string(tt.want) {
				t.Errorf("%s: %v, want an operation error %s", tt.name, err, tt.want)
			}
		}
		// Authentication is refused before the operation: §10.1 JSON.
		_, err = newClient("", `{}`).Query(ctx, "tasks.byProject", project("p1"))
		var he *client.HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || he.Code != string(syncerr.AuthRequired) {
			t.Fatalf("unauthenticated: %v", err)
		}

		// A command applies once; its retry under the same request id is cached.
		params := obj(opdomain.Field{Key: "title", Value: str("renamed")})
		for i, want := range []opdomain.CommandStatus{opdomain.CommandApplied, opdomain.CommandCached} {
			res, err := writer.Command(ctx, "tasks.retitle", "rename-1", params)
			if err != nil || res.Status != want || res.CommitSeq != 2 || res.RequestID != "rename-1" || res.OperationID != "tasks.retitle" {
				t.Fatalf("command call %d: %+v %v, want %s at seq 2", i, res, err, want)
			}
		}
		got, err = reader.Query(ctx, "tasks.byProject", project("p1"))
		if err != nil || got.MaxCommitSeq != 2 || len(got.Rows) != 2 {
			t.Fatalf("after the command: %+v %v", got, err)
		}
		if title, _ := got.Rows[1][1].Value.AsString(); title != "renamed" {
			t.Fatalf("rows after the command: %+v", got.Rows)
		}
	})
}

// TestClientWatchesOperations: the Go client's live watch socket gets a
// snapshot at once and a new one after a push touching the query's
// table, a watch_error with its code for a forbidden watch; on both
// engines.
func TestClientWatchesOperations(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		path := filepath.Join(t.TempDir(), "operations.json")
		if err := os.WriteFile(path, []byte(operationsFile), 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Operations = path }})
		base := strings.TrimSuffix(s.url, "/sync")
		newClient := func(actor, grant string) *client.Client {
			h := http.Header{}
			if actor != "" {
				h.Set("X-Syncd-Actor", actor)
			}
			h.Set("X-Syncd-Scopes", grant)
			c, err := client.New(client.Options{BaseURL: base, Schema: s.sch, ClientID: "watch-" + actor, Header: h})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := newClient("", `{}`).OpenWatches(ctx, client.WatchOptions{}); !errors.As(err, new(*client.HTTPError)) ||
			client.CodeOf(err) != string(syncerr.AuthRequired) {
			t.Fatalf("unauthenticated upgrade: %v", err)
		}
		w, err := newClient("bob", `{"project_id":["p1"]}`).OpenWatches(ctx, client.WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Close() }()
		project := func(p string) opdomain.Value {
			v, _ := opdomain.String(p)
			o, err := opdomain.Object(opdomain.Field{Key: "project", Value: v})
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		next := func() client.WatchEvent {
			ev, err := w.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
		ids := func(r *client.QueryResult) []string {
			out := []string{}
			for _, row := range r.Rows {
				id, _ := row[0].Value.AsString()
				out = append(out, id)
			}
			return out
		}
		if err := w.Watch(ctx, "w1", "tasks.byProject", project("p1")); err != nil {
			t.Fatal(err)
		}
		if ev := next(); ev.WatchID != "w1" || ev.Result == nil || len(ev.Result.Rows) != 0 || ev.Result.MaxCommitSeq != 0 {
			t.Fatalf("first snapshot %+v", ev)
		}
		if err := w.Watch(ctx, "w2", "tasks.byProject", project("p3")); err != nil {
			t.Fatal(err)
		}
		if ev := next(); ev.WatchID != "w2" || ev.Err == nil || ev.Err.Code != string(syncerr.OperationForbidden) {
			t.Fatalf("forbidden watch %+v", ev)
		}
		// A failed watch stays registered (its query reruns on each commit)
		// until the client ends it.
		if err := w.Unwatch(ctx, "w2"); err != nil {
			t.Fatal(err)
		}
		writer := newClient("alice", `{"owner":["alice"],"project_id":["*"]}`)
		push := func(id string) {
			op, err := writer.Upsert("tasks", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "project_id": rowcodec.String("p1"),
				"title": rowcodec.String("task " + id), "done": rowcodec.Bool(false), "estimate": rowcodec.Int(1), "attachment": rowcodec.Null()}, -1)
			if err != nil {
				t.Fatal(err)
			}
			writer.Queue(op)
			if res, err := writer.Push(ctx); err != nil || res.Pushes[0].Status != ssp2.PushApplied {
				t.Fatalf("push %s: %+v %v", id, res, err)
			}
		}
		push("t1")
		if ev := next(); ev.WatchID != "w1" || ev.Result == nil || !reflect.DeepEqual(ids(ev.Result), []string{"t1"}) || ev.Result.MaxCommitSeq != 1 {
			t.Fatalf("after the push %+v", ev)
		}
		// w1 ends; the new watch w3 hears the next commit.
		if err := w.Unwatch(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := w.Watch(ctx, "w3", "tasks.byProject", project("p1")); err != nil {
			t.Fatal(err)
		}
		if ev := next(); ev.WatchID != "w3" || ev.Result == nil || ev.Result.MaxCommitSeq != 1 {
			t.Fatalf("w3 snapshot %+v", ev)
		}
		push("t2")
		if ev := next(); ev.WatchID != "w3" || ev.Result == nil || !reflect.DeepEqual(ids(ev.Result), []string{"t1", "t2"}) || ev.Result.MaxCommitSeq != 2 {
			t.Fatalf("w3 after the second push %+v", ev)
		}
	})
}
