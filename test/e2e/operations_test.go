package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// QueryAuthoritative passes the engine's registered queries through.
func (g *gatedStore) QueryAuthoritative(ctx context.Context, partition string, q ports.AuthoritativeQuery) (ports.AuthoritativeResult, error) {
	aq, ok := g.Storage.(ports.AuthoritativeQuerier)
	if !ok {
		return ports.AuthoritativeResult{}, errors.New("storage runs no authoritative queries")
	}
	return aq.QueryAuthoritative(ctx, partition, q)
}

const operationsFile = `{"queries": [
  {"id": "tasks.byProject", "table": "tasks", "columns": ["id", "title", "estimate"],
   "filters": [{"column": "project_id", "op": "eq", "param": "project"}],
   "orderBy": [{"column": "title"}], "maxRows": 10},
  {"id": "tasks.estimated", "table": "tasks", "columns": ["id"],
   "filters": [{"column": "estimate", "op": "gte", "param": "min"}],
   "orderBy": [{"column": "estimate", "desc": true}], "maxRows": 2}
]}`

// operation posts one operations request as actor with a dev grant.
func (s *server) operation(actor, grant, contentType string, body []byte) reply {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url[:len(s.url)-len("/sync")]+"/operations", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if actor != "" {
		req.Header.Set("X-Syncd-Actor", actor)
	}
	if grant != "" {
		req.Header.Set("X-Syncd-Scopes", grant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func opRequest(t *testing.T, kind, clientID, op string, params opdomain.Value) []byte {
	t.Helper()
	str := func(s string) opdomain.Value { v, _ := opdomain.String(s); return v }
	rev, _ := opdomain.SafeNumber(1)
	fields := []opdomain.Field{{Key: "revision", Value: rev}, {Key: "kind", Value: str(kind)},
		{Key: "clientId", Value: str(clientID)}, {Key: "operationId", Value: str(op)}}
	if kind == "command" {
		fields = append(fields, opdomain.Field{Key: "requestId", Value: str("r1")})
	}
	v, err := opdomain.Object(append(fields, opdomain.Field{Key: "params", Value: params})...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func opParams(t *testing.T, fields ...opdomain.Field) opdomain.Value {
	t.Helper()
	v, err := opdomain.Object(fields...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// opAnswer decodes an encoded response: the rows' ids and the max seq of
// a query, or the error's code.
func opAnswer(t *testing.T, rep reply) (ids []string, maxSeq float64, code string) {
	t.Helper()
	if rep.status != http.StatusOK || rep.header.Get("Content-Type") != httpapi.ContentTypeOperations {
		t.Fatalf("status %d (%s): %s", rep.status, rep.header.Get("Content-Type"), rep.body)
	}
	v, err := opdomain.Decode(rep.body)
	if err != nil {
		t.Fatalf("response: %v", err)
	}
	get := func(v opdomain.Value, k string) opdomain.Value {
		f, ok := v.Get(k)
		if !ok {
			t.Fatalf("no %q in %s", k, rep.body)
		}
		return f
	}
	if kind, _ := get(v, "kind").AsString(); kind == "error" {
		code, _ = get(v, "code").AsString()
		return nil, 0, code
	}
	maxSeq, _ = get(v, "maxCommitSeq").AsNumber()
	rows, _ := get(v, "rows").Items()
	ids = []string{}
	for _, r := range rows {
		id, _ := get(r, "id").AsString()
		ids = append(ids, id)
	}
	return ids, maxSeq, ""
}

func TestRemoteQueriesOverHTTP(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		path := filepath.Join(t.TempDir(), "operations.json")
		if err := os.WriteFile(path, []byte(operationsFile), 0o600); err != nil {
			t.Fatal(err)
		}
		audit := app.ProvideRemoteQuery(func() operations.Query {
			return operations.Query{Spec: opdomain.QuerySpec{ID: "tasks.audit", Table: "tasks", Columns: []string{"id"}, MaxRows: 100},
				Access: operations.AccessPrivileged,
				Authorize: func(_ context.Context, who operations.AuthContext, _ operations.Params) (bool, error) {
					if who.ActorID == "flaky" {
						return false, errors.New("policy service down")
					}
					return who.ActorID == "auditor", nil
				}}
		})
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Operations = path }, extra: []fx.Option{audit}})
		writer := call{actor: "alice", scopes: `{"owner":["alice"],"project_id":["*"]}`}
		ep := s.epoch(writer)
		est := func(id, project, title string, estimate int64) ssp2.PushOperation {
			return ssptest.Upsert("tasks", id, ssptest.Sparse(t, s.sch.Table("tasks"), ssptest.Cols{"id": rowcodec.String(id),
				"project_id": rowcodec.String(project), "title": rowcodec.String(title), "done": rowcodec.Bool(false),
				"estimate": rowcodec.Int(estimate), "attachment": rowcodec.Null()}), -1)
		}
		resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", est("t1", "p1", "b", 1), est("t2", "p1", "a", 5), est("t3", "p2", "c", 8), est("t4", "p3", "d", 9)),
		}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("seed push %+v", resp.Results[0])
		}
		ct := httpapi.ContentTypeOperations
		grant := `{"project_id":["p1","p2"]}`
		str := func(s string) opdomain.Value { v, _ := opdomain.String(s); return v }
		byProject := func(p string) []byte {
			return opRequest(t, "query", "reader-1", "tasks.byProject", opParams(t, opdomain.Field{Key: "project", Value: str(p)}))
		}
		estimated := func(min int64) []byte {
			return opRequest(t, "query", "reader-1", "tasks.estimated", opParams(t, opdomain.Field{Key: "min", Value: opdomain.Integer(min)}))
		}
		successes := []struct {
			name         string
			actor, grant string
			body         []byte
			want         []string
		}{
			{"a configured query in its declared order", "bob", grant, byProject("p1"), []string{"t2", "t1"}},
			{"a scoped query keeps to the caller's rows, before the cap", "bob", grant, estimated(2), []string{"t3", "t2"}},
			{"a privileged host query", "auditor", `{}`, opRequest(t, "query", "audit-1", "tasks.audit", opdomain.Null()), []string{"t1", "t2", "t3", "t4"}},
		}
		for _, tt := range successes {
			ids, seq, code := opAnswer(t, s.operation(tt.actor, tt.grant, ct, tt.body))
			if code != "" || !reflect.DeepEqual(ids, tt.want) || seq != 1 {
				t.Errorf("%s: rows %v, maxCommitSeq %v, code %q; want %v at 1", tt.name, ids, seq, code, tt.want)
			}
		}
		// A client id bound to bob, for the binding case below.
		if _, err := s.store.BindClient(context.Background(), "default", "bound-to-bob", "bob"); err != nil {
			t.Fatal(err)
		}
		failures := []struct {
			name         string
			actor, grant string
			body         []byte
			want         syncerr.Code
		}{
			{"unknown operation", "bob", grant, opRequest(t, "query", "reader-1", "nope", opdomain.Null()), syncerr.OperationUnknown},
			{"a query asked for as a command", "bob", grant, opRequest(t, "command", "reader-1", "tasks.byProject", opdomain.Null()), syncerr.OperationUnknown},
			{"a project outside the grant", "bob", grant, byProject("p3"), syncerr.OperationForbidden},
			{"privileged authorize refuses", "bob", grant, opRequest(t, "query", "reader-1", "tasks.audit", opdomain.Null()), syncerr.OperationForbidden},
			{"privileged authorize fails", "flaky", grant, opRequest(t, "query", "reader-1", "tasks.audit", opdomain.Null()), syncerr.OperationExecFailed},
			{"malformed envelope", "bob", grant, []byte(`{"t":"object","v":[]}`), syncerr.OperationInvalid},
			{"not JSON", "bob", grant, []byte(`{`), syncerr.OperationInvalid},
			{"parameter of the wrong type", "bob", grant, opRequest(t, "query", "reader-1", "tasks.byProject",
				opParams(t, opdomain.Field{Key: "project", Value: opdomain.Integer(1)})), syncerr.OperationInvalid},
			{"past maxRows", "admin", `{"project_id":["*"]}`, estimated(0), syncerr.OperationResultTooLarge},
			{"the reserved command namespace", "bob", grant, opRequest(t, "query", `["remote-command","bob","x"]`, "tasks.byProject",
				opParams(t, opdomain.Field{Key: "project", Value: str("p1")})), syncerr.InvalidClientID},
			{"a client id bound to another actor", "carol", grant, opRequest(t, "query", "bound-to-bob", "tasks.byProject",
				opParams(t, opdomain.Field{Key: "project", Value: str("p1")})), syncerr.InvalidClientID},
		}
		for _, tt := range failures {
			if _, _, code := opAnswer(t, s.operation(tt.actor, tt.grant, ct, tt.body)); code != string(tt.want) {
				t.Errorf("%s: code %q, want %s", tt.name, code, tt.want)
			}
		}
		// Transport refusals are §10.1 JSON with their status.
		s.jsonError(s.operation("bob", grant, "application/json", byProject("p1")), http.StatusUnsupportedMediaType, syncerr.OperationInvalid)
		s.jsonError(s.operation("", grant, ct, byProject("p1")), http.StatusUnauthorized, syncerr.AuthRequired)
		// The serve gate: an undeclared pending checkpoint refuses queries.
		if _, err := s.store.DeclareCheckpoint(context.Background(), checkpoint.Declaration{Partition: "default", Name: "projection", SchemaVersion: s.sch.Version}, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if _, _, code := opAnswer(t, s.operation("bob", grant, ct, byProject("p1"))); code != string(syncerr.SchemaNotReady) {
			t.Fatalf("closed gate: code %q", code)
		}
	})
}

// TestRemoteCommandsOverHTTP: a host command commits through the push
// pipeline on both engines; a retry is cached without running it again,
// and the commit is in the log a pull reads.
func TestRemoteCommandsOverHTTP(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		var runs atomic.Int32
		rename := app.ProvideRemoteCommand(func() operations.Command {
			return operations.Command{ID: "tasks.rename",
				Authorize: func(context.Context, operations.AuthContext, opdomain.Value) (bool, error) { return true, nil },
				Run: func(ctx context.Context, c operations.CommandContext, p opdomain.Value) ([]operations.Mutation, error) {
					runs.Add(1)
					row, err := c.GetRow(ctx, "tasks", "t1")
					if err != nil || row == nil {
						return nil, fmt.Errorf("read t1: %v", err)
					}
					title, _ := p.Get("title")
					next := map[string]any{}
					for k, v := range row {
						next[k] = v
					}
					next["title"], _ = title.AsString()
					return []operations.Mutation{{Table: "tasks", Values: next}}, nil
				}}
		})
		s := start(t, e, serverOpts{extra: []fx.Option{rename}})
		writer := call{actor: "alice", scopes: `{"owner":["alice"],"project_id":["p1"]}`}
		ep := s.epoch(writer)
		resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep,
			Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Upsert("tasks", "t1", task(t, s.sch, "t1", "p1", "old"), -1))}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("seed push %+v", resp.Results[0])
		}
		title, _ := opdomain.String("new")
		body := opRequest(t, "command", "worker-1", "tasks.rename", opParams(t, opdomain.Field{Key: "title", Value: title}))
		answer := func() (string, float64) {
			rep := s.operation("alice", `{"project_id":["p1"]}`, httpapi.ContentTypeOperations, body)
			v, err := opdomain.Decode(rep.body)
			if err != nil || rep.status != http.StatusOK {
				t.Fatalf("%d %s", rep.status, rep.body)
			}
			st, _ := v.Get("status")
			status, _ := st.AsString()
			seqV, _ := v.Get("commitSeq")
			seq, _ := seqV.AsNumber()
			return status, seq
		}
		if status, seq := answer(); status != "applied" || seq != 2 {
			t.Fatalf("applied: %s %v (%s)", status, seq, body)
		}
		if status, seq := answer(); status != "cached" || seq != 2 || runs.Load() != 1 {
			t.Fatalf("retry: %s %v, runs %d", status, seq, runs.Load())
		}
		row, err := s.store.GetRow(context.Background(), "default", "tasks", "t1")
		if err != nil || row == nil || row.Version != 2 {
			t.Fatalf("row %+v %v", row, err)
		}
		if got := ssptest.DecodeRow(t, s.sch.Table("tasks"), row.Payload)["title"].Text(); got != "new" {
			t.Fatalf("title %q", got)
		}
		commits, err := s.store.ReadCommitRange(context.Background(), "default", ports.CommitRange{AfterSeq: 1, ThroughSeq: 2, LimitChanges: 10})
		if err != nil || len(commits.Commits) != 1 || commits.Commits[0].ClientID != `["remote-command","alice","worker-1"]` ||
			commits.Commits[0].ClientCommitID != `["tasks.rename","r1"]` {
			t.Fatalf("log %+v %v", commits, err)
		}
	})
}

// budgetValidator rejects a task whose estimate would take its project's
// total past 10, summing the other tasks with a registered query run
// inside the push transaction (so it sees the commit's earlier writes).
type budgetValidator struct{ reg *operations.Registry }

func (budgetValidator) Table() string { return "tasks" }

func (v budgetValidator) ValidateRow(ctx context.Context, rv ports.RowValidation) error {
	if rv.Row == nil {
		return nil
	}
	rows, err := v.reg.QueryInTx(ctx, rv.Tx, "tasks.inProject", operations.Params{"project": rv.Row["project_id"]})
	if err != nil {
		return err
	}
	total, _ := rv.Row["estimate"].(int64)
	for _, r := range rows {
		if r.RowID != rv.RowID {
			n, _ := r.Values["estimate"].(int64)
			total += n
		}
	}
	if total > 10 {
		return &ports.ValidationRejection{Code: "budget.exceeded", Message: "project estimate budget exceeded"}
	}
	return nil
}

// TestValidatorRunsARegisteredQueryInThePushTransaction: SPEC §6.7 with
// queryAuthoritative bound to the transaction, on both engines.
func TestValidatorRunsARegisteredQueryInThePushTransaction(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		path := filepath.Join(t.TempDir(), "operations.json")
		if err := os.WriteFile(path, []byte(`{"queries": [{"id": "tasks.inProject", "table": "tasks",
		  "filters": [{"column": "project_id", "op": "eq", "param": "project"}], "maxRows": 100}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		validator := app.ProvideRowValidator(func(reg *operations.Registry) budgetValidator { return budgetValidator{reg: reg} })
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Operations = path }, extra: []fx.Option{validator}})
		writer := call{actor: "alice", scopes: `{"owner":["alice"],"project_id":["*"]}`}
		ep := s.epoch(writer)
		est := func(id, project string, estimate int64) ssp2.PushOperation {
			return ssptest.Upsert("tasks", id, ssptest.Sparse(t, s.sch.Table("tasks"), ssptest.Cols{"id": rowcodec.String(id),
				"project_id": rowcodec.String(project), "title": rowcodec.String("task " + id), "done": rowcodec.Bool(false),
				"estimate": rowcodec.Int(estimate), "attachment": rowcodec.Null()}), -1)
		}
		push := func(id string, ops ...ssp2.PushOperation) *ssp2.PushResult {
			resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep,
				Commits: []*ssp2.PushCommit{ssptest.Commit(id, ops...)}})
			return resp.Results[0]
		}
		if r := push("k1", est("t1", "p1", 4), est("t2", "p1", 4)); r.Status != ssp2.PushApplied {
			t.Fatalf("within budget: %+v", r)
		}
		// The second operation's validator sees the first one's staged row:
		// 4 + 4 + 2 + 1 = 11 > 10 only when t3 is counted.
		r := push("k2", est("t3", "p1", 2), est("t4", "p1", 1))
		if r.Status != ssp2.PushRejected || r.Results[0].OpIndex != 1 || r.Results[0].Code != "budget.exceeded" {
			t.Fatalf("over budget in one commit: %+v", r)
		}
		// Other projects' rows do not count; updating a row replaces its own estimate.
		if r := push("k3", est("t5", "p2", 9)); r.Status != ssp2.PushApplied {
			t.Fatalf("another project: %+v", r)
		}
		if r := push("k4", est("t1", "p1", 6)); r.Status != ssp2.PushApplied {
			t.Fatalf("update to 6 + 4: %+v", r)
		}
		if r := push("k5", est("t6", "p1", 1)); r.Status != ssp2.PushRejected || r.Results[0].Code != "budget.exceeded" {
			t.Fatalf("over budget: %+v", r)
		}
	})
}

// TestRemoteQueryWatchesOverWebSocket: a live watch gets its snapshot and
// a new one after a push touching its table, on both engines.
func TestRemoteQueryWatchesOverWebSocket(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Operations = writeOperationsFile(t) }})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		snapshot := watchTasks(ctx, t, s)
		if ids, seq := snapshot(); len(ids) != 0 || seq != 0 {
			t.Fatalf("first snapshot %v at %v", ids, seq)
		}
		pushTask(t, s, "t1")
		if ids, seq := snapshot(); !reflect.DeepEqual(ids, []string{"t1"}) || seq != 1 {
			t.Fatalf("after the push %v at %v", ids, seq)
		}
	})
}

// TestRemoteQueryWatchesAcrossNodes: a watch on one node hears a commit
// applied by another node of the same PostgreSQL through the fanout.
func TestRemoteQueryWatchesAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	shared := engine{name: "postgres", open: func(t *testing.T) ports.Storage {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		return st
	}}
	path := writeOperationsFile(t)
	node := func() *server {
		var f ports.Fanout
		s := start(t, shared, serverOpts{
			config: func(c *config.Config) { c.Database, c.Operations = dsn, path },
			extra:  []fx.Option{fx.Populate(&f)},
		})
		pf, ok := f.(*pgnotify.Fanout)
		if !ok {
			t.Fatalf("fanout %T, want LISTEN/NOTIFY", f)
		}
		waitFor(t, "the node listening", pf.Listening)
		return s
	}
	a, b := node(), node()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snapshot := watchTasks(ctx, t, b)
	if ids, _ := snapshot(); len(ids) != 0 {
		t.Fatalf("first snapshot %v", ids)
	}
	pushTask(t, a, "t1")
	if ids, seq := snapshot(); !reflect.DeepEqual(ids, []string{"t1"}) || seq != 1 {
		t.Fatalf("node b after node a's push: %v at %v", ids, seq)
	}
}

func writeOperationsFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "operations.json")
	if err := os.WriteFile(path, []byte(operationsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// watchTasks watches tasks.byProject for project p1 as bob on s's
// operations socket; each call of the result reads the next snapshot's
// row ids and maxCommitSeq.
func watchTasks(ctx context.Context, t *testing.T, s *server) func() ([]string, float64) {
	t.Helper()
	wsURL := "ws" + strings.TrimPrefix(s.url[:len(s.url)-len("/sync")], "http") + "/operations/realtime"
	h := http.Header{}
	h.Set("X-Syncd-Actor", "bob")
	h.Set("X-Syncd-Scopes", `{"project_id":["p1"]}`)
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	str := func(s string) opdomain.Value { v, _ := opdomain.String(s); return v }
	rev, _ := opdomain.SafeNumber(1)
	watch, _ := opdomain.Object(opdomain.Field{Key: "revision", Value: rev}, opdomain.Field{Key: "kind", Value: str("watch")},
		opdomain.Field{Key: "watchId", Value: str("w1")}, opdomain.Field{Key: "clientId", Value: str("watcher")},
		opdomain.Field{Key: "operationId", Value: str("tasks.byProject")},
		opdomain.Field{Key: "params", Value: opParams(t, opdomain.Field{Key: "project", Value: str("p1")})})
	msg, _ := watch.Encode()
	if err := conn.Write(ctx, websocket.MessageBinary, msg); err != nil {
		t.Fatal(err)
	}
	return func() ([]string, float64) {
		t.Helper()
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := opdomain.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := v.Get("kind"); k.Kind() != opdomain.KindString {
			t.Fatalf("message %s", b)
		} else if kind, _ := k.AsString(); kind != "snapshot" {
			t.Fatalf("message %s", b)
		}
		// A snapshot carries a query result's rows and maxCommitSeq.
		ids, seq, _ := opAnswer(t, reply{status: http.StatusOK, header: http.Header{"Content-Type": {httpapi.ContentTypeOperations}}, body: b})
		return ids, seq
	}
}

// pushTask pushes task id of project p1 as alice through s.
func pushTask(t *testing.T, s *server, id string) {
	t.Helper()
	writer := call{actor: "alice", scopes: `{"owner":["alice"],"project_id":["*"]}`}
	s.sync(writer, ssptest.Req{ClientID: "w-" + id, SchemaVersion: s.sch.Version, Epoch: s.epoch(writer),
		Commits: []*ssp2.PushCommit{ssptest.Commit("k-"+id, ssptest.Upsert("tasks", id, task(t, s.sch, id, "p1", "one"), -1))}})
}
