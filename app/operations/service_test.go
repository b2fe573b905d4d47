package operations_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// grants is a resolver: actor → grant; an actor named "outage" reports a
// resolver outage, "broken" a failure.
type grants map[string]scopes.Allowed

func (g grants) ResolveScopes(_ context.Context, r ports.ScopeRequest) (scopes.Allowed, error) {
	switch r.ActorID {
	case "outage":
		return nil, ports.ErrResolverOutage
	case "broken":
		return nil, errors.New("grant database down")
	}
	return g[r.ActorID], nil
}

// gateStore lets a case replace the gate reads and the query's answer.
type gateStore struct {
	*memory.Store
	before   func(checkpoint.ServeGate) checkpoint.ServeGate
	snapshot func(ports.AuthoritativeResult) (ports.AuthoritativeResult, error)
}

func (g *gateStore) ReadServeGate(ctx context.Context, p string, v int32) (checkpoint.ServeGate, error) {
	gate, err := g.Store.ReadServeGate(ctx, p, v)
	if g.before != nil {
		gate = g.before(gate)
	}
	return gate, err
}

func (g *gateStore) QueryAuthoritative(ctx context.Context, p string, q ports.AuthoritativeQuery) (ports.AuthoritativeResult, error) {
	res, err := g.Store.QueryAuthoritative(ctx, p, q)
	if err == nil && g.snapshot != nil {
		return g.snapshot(res)
	}
	return res, err
}

type fixture struct {
	t     *testing.T
	sc    *schema.Schema
	store *gateStore
	seq   int64
}

func newFixture(t *testing.T) *fixture {
	sc := ssptest.Schema(t)
	s := memory.New()
	if err := s.EnsureSchema(context.Background(), sc, nil); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, sc: sc, store: &gateStore{Store: s}}
}

// task writes one tasks row in partition "part".
func (f *fixture) task(id, project, title string, done bool, estimate any) {
	f.t.Helper()
	tbl := f.sc.Table("tasks")
	est := rowcodec.Null()
	if e, ok := estimate.(int64); ok {
		est = rowcodec.Int(e)
	}
	cols := ssptest.Cols{"id": rowcodec.String(id), "project_id": rowcodec.String(project), "title": rowcodec.String(title),
		"done": rowcodec.Bool(done), "estimate": est, "attachment": rowcodec.Null()}
	payload := ssptest.Full(f.t, tbl, cols)
	stored := map[string]string{"project_id": project}
	err := f.store.Push(context.Background(), "part", ports.PushOptions{WriterVersion: f.sc.Version}, func(tx ports.PushTx) error {
		if err := tx.UpsertRow(context.Background(), "tasks", ports.RowWrite{RowID: id, Version: 1, Scopes: stored, Payload: payload,
			Values: []any{id, project, title, done, estimate, nil}}); err != nil {
			return err
		}
		var err error
		f.seq, err = tx.AppendCommit(context.Background(), ports.NewCommit{CreatedAtMs: 1, ActorID: "w", ClientID: "w", ClientCommitID: id,
			Changes: []commit.Change{{Table: "tasks", RowID: id, Op: commit.OpUpsert, RowVersion: 1, Scopes: stored, Row: payload}}})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) service(queries []operations.Query, mod func(*operations.Options)) *operations.Service {
	f.t.Helper()
	reg, err := operations.NewRegistry(f.sc, queries, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	o := operations.Options{Store: f.store, Querier: f.store, Schema: f.sc, Registry: reg,
		Resolver: grants{
			"alice":  {"project_id": {"p1", "p2"}},
			"admin":  {"project_id": {scopes.Wildcard}},
			"nobody": {"owner": {"x"}},
		},
		Now: func() time.Time { return time.UnixMilli(1000) }}
	if mod != nil {
		mod(&o)
	}
	s, err := operations.New(o)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func field(k string, v opdomain.Value) opdomain.Field { return opdomain.Field{Key: k, Value: v} }

func sv(s string) opdomain.Value {
	v, err := opdomain.String(s)
	if err != nil {
		panic(err)
	}
	return v
}

func object(fields ...opdomain.Field) opdomain.Value {
	v, err := opdomain.Object(fields...)
	if err != nil {
		panic(err)
	}
	return v
}

// request encodes a request body; params nil means null.
func request(kind, clientID, op string, params *opdomain.Value) []byte {
	rev, _ := opdomain.SafeNumber(1)
	p := opdomain.Null()
	if params != nil {
		p = *params
	}
	fields := []opdomain.Field{field("revision", rev), field("kind", sv(kind)), field("clientId", sv(clientID)), field("operationId", sv(op))}
	if kind == "command" {
		fields = append(fields, field("requestId", sv("r1")))
	}
	b, err := object(append(fields, field("params", p))...).Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func byProject(project string) []byte {
	p := object(field("project", sv(project)))
	return request("query", "c1", "tasks.byProject", &p)
}

// answer is a decoded response: the row ids (for a query), the max seq,
// or the error code.
type answer struct {
	ids    []string
	maxSeq float64
	code   string
	retry  bool
}

func decode(t *testing.T, body []byte) answer {
	t.Helper()
	v, err := opdomain.Decode(body)
	if err != nil {
		t.Fatalf("response does not decode: %v (%s)", err, body)
	}
	kind, _ := mustGet(t, v, "kind").AsString()
	if rev, _ := mustGet(t, v, "revision").AsNumber(); rev != 1 {
		t.Fatalf("revision %v", rev)
	}
	switch kind {
	case "error":
		code, _ := mustGet(t, v, "code").AsString()
		retry, _ := mustGet(t, v, "retryable").AsBool()
		return answer{code: code, retry: retry}
	case "query":
		a := answer{ids: []string{}}
		a.maxSeq, _ = mustGet(t, v, "maxCommitSeq").AsNumber()
		rows, _ := mustGet(t, v, "rows").Items()
		for _, r := range rows {
			id, _ := mustGet(t, r, "id").AsString()
			a.ids = append(a.ids, id)
		}
		return a
	}
	t.Fatalf("unexpected kind %q", kind)
	return answer{}
}

func mustGet(t *testing.T, v opdomain.Value, k string) opdomain.Value {
	t.Helper()
	f, ok := v.Get(k)
	if !ok {
		t.Fatalf("response has no %q", k)
	}
	return f
}

var (
	qByProject = operations.Query{Spec: opdomain.QuerySpec{ID: "tasks.byProject", Table: "tasks", MaxRows: 10,
		Columns: []string{"id", "title", "estimate"},
		Filters: []opdomain.Filter{{Column: "project_id", Op: opdomain.OpEq, Param: "project"}},
		OrderBy: []opdomain.Order{{Column: "title"}}}}
	qOpen = operations.Query{Spec: opdomain.QuerySpec{ID: "tasks.open", Table: "tasks", MaxRows: 3,
		Filters: []opdomain.Filter{{Column: "done", Op: opdomain.OpEq, Param: "done"}}}}
	qAll = operations.Query{Spec: opdomain.QuerySpec{ID: "tasks.all", Table: "tasks", MaxRows: 100}}
)

func privileged(allow bool, err error) operations.Query {
	return operations.Query{Spec: opdomain.QuerySpec{ID: "tasks.audit", Table: "tasks", MaxRows: 100},
		Access: operations.AccessPrivileged,
		Authorize: func(_ context.Context, who operations.AuthContext, _ operations.Params) (bool, error) {
			return allow && who.ActorID == "auditor", err
		}}
}

func openParams(done bool) *opdomain.Value {
	p := object(field("done", opdomain.Bool(done)))
	return &p
}

func TestQueries(t *testing.T) {
	tests := []struct {
		name    string
		actor   string
		queries []operations.Query
		body    []byte
		mod     func(*operations.Options)
		prepare func(f *fixture)
		want    answer
	}{
		{name: "scoped query by a granted project, in the declared order", actor: "alice", body: byProject("p1"),
			want: answer{ids: []string{"t2", "t1"}, maxSeq: 5}},
		{name: "a project outside the grant is forbidden", actor: "alice", body: byProject("p3"),
			want: answer{code: "operation.forbidden"}},
		{name: "a scoped query answers only rows the caller could pull", actor: "alice", queries: []operations.Query{qAll},
			body: request("query", "c1", "tasks.all", nil), want: answer{ids: []string{"t1", "t2", "t3"}, maxSeq: 5}},
		{name: "the wildcard grants every value", actor: "admin", queries: []operations.Query{qAll},
			body: request("query", "c1", "tasks.all", nil), want: answer{ids: []string{"t1", "t2", "t3", "t4", "t5"}, maxSeq: 5}},
		{name: "no grant for the table's variable answers no rows", actor: "nobody", queries: []operations.Query{qAll},
			body: request("query", "c1", "tasks.all", nil), want: answer{ids: []string{}, maxSeq: 5}},
		{name: "a resolver outage is forbidden", actor: "outage", body: byProject("p1"), want: answer{code: "operation.forbidden"}},
		{name: "a resolver failure is forbidden", actor: "broken", body: byProject("p1"), want: answer{code: "operation.forbidden"}},
		{name: "privileged: authorize admits", actor: "auditor", queries: []operations.Query{privileged(true, nil)},
			body: request("query", "c1", "tasks.audit", nil), want: answer{ids: []string{"t1", "t2", "t3", "t4", "t5"}, maxSeq: 5}},
		{name: "privileged: authorize refuses", actor: "alice", queries: []operations.Query{privileged(true, nil)},
			body: request("query", "c1", "tasks.audit", nil), want: answer{code: "operation.forbidden"}},
		{name: "privileged: authorize fails", actor: "auditor", queries: []operations.Query{privileged(true, errors.New("boom"))},
			body: request("query", "c1", "tasks.audit", nil), want: answer{code: "operation.execution_failed"}},
		{name: "at the cap", actor: "admin", queries: []operations.Query{qOpen}, body: request("query", "c1", "tasks.open", openParams(true)),
			want: answer{ids: []string{"t2", "t4"}, maxSeq: 5}},
		{name: "past the cap", actor: "admin", queries: []operations.Query{qOpen}, body: request("query", "c1", "tasks.open", openParams(false)),
			prepare: func(f *fixture) { f.task("t6", "p2", "f", false, nil) }, want: answer{code: "operation.result_too_large"}},
		{name: "unknown operation", actor: "alice", body: request("query", "c1", "nope", nil), want: answer{code: "operation.unknown"}},
		{name: "a query id asked for as a command", actor: "alice", body: request("command", "c1", "tasks.byProject", nil),
			want: answer{code: "operation.unknown"}},
		{name: "malformed body", actor: "alice", body: []byte(`{"t":"object","v":[]}`), want: answer{code: "operation.invalid_request"}},
		{name: "parameters of the wrong type", actor: "alice", body: func() []byte {
			p := object(field("project", opdomain.Integer(1)))
			return request("query", "c1", "tasks.byProject", &p)
		}(), want: answer{code: "operation.invalid_request"}},
		{name: "a client id past the id limit", actor: "alice", body: request("query", strings.Repeat("c", 257), "tasks.byProject", nil),
			want: answer{code: "sync.invalid_client_id"}},
		{name: "an operation id past the id limit", actor: "alice", body: request("query", "c1", strings.Repeat("q", 257), nil),
			want: answer{code: "operation.invalid_request"}},
		{name: "the reserved command namespace", actor: "alice", body: request("query", `["remote-command","alice","c1"]`, "tasks.byProject", nil),
			want: answer{code: "sync.invalid_client_id"}},
		{name: "a client id bound to another actor", actor: "alice", body: byProject("p1"),
			prepare: func(f *fixture) {
				if _, err := f.store.BindClient(context.Background(), "part", "c1", "mallory"); err != nil {
					f.t.Fatal(err)
				}
			}, want: answer{code: "sync.invalid_client_id"}},
		{name: "storage without authoritative queries", actor: "alice", body: byProject("p1"),
			mod: func(o *operations.Options) { o.Querier = nil }, want: answer{code: "operation.storage_unsupported"}},
		{name: "a stored row that does not decode fails the query", actor: "alice", body: byProject("p1"),
			prepare: func(f *fixture) {
				err := f.store.Push(context.Background(), "part", ports.PushOptions{WriterVersion: f.sc.Version}, func(tx ports.PushTx) error {
					return tx.UpsertRow(context.Background(), "tasks", ports.RowWrite{RowID: "t7", Version: 1, Scopes: map[string]string{"project_id": "p1"},
						Payload: []byte{0xff}, Values: []any{"t7", "p1", "z", false, nil, nil}})
				})
				if err != nil {
					f.t.Fatal(err)
				}
			}, want: answer{code: "operation.query_failed"}},
		{name: "a storage failure is query_failed", actor: "alice", body: byProject("p1"),
			prepare: func(f *fixture) {
				f.store.snapshot = func(ports.AuthoritativeResult) (ports.AuthoritativeResult, error) {
					return ports.AuthoritativeResult{}, errors.New("disk on fire")
				}
			}, want: answer{code: "operation.query_failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.task("t1", "p1", "b", false, int64(3))
			f.task("t2", "p1", "a", true, nil)
			f.task("t3", "p2", "c", false, nil)
			f.task("t4", "p3", "d", true, nil)
			f.task("t5", "p3", "e", false, nil)
			if tt.prepare != nil {
				tt.prepare(f)
			}
			qs := tt.queries
			if qs == nil {
				qs = []operations.Query{qByProject}
			}
			s := f.service(qs, tt.mod)
			// Through the HTTP endpoint: every answer of the use case is the
			// encoded response with status 200, its code in the request stats.
			body, code := postOperation(t, s, tt.actor, tt.body)
			got := decode(t, body)
			if string(code) != got.code {
				t.Errorf("observed code %q, body carries %q", code, got.code)
			}
			if tt.want.code != "" {
				if got.code != tt.want.code {
					t.Fatalf("got %+v, want code %s", got, tt.want.code)
				}
				if got.retry != syncerr.Lookup(syncerr.Code(tt.want.code)).Retryable {
					t.Fatalf("retryable %v for %s", got.retry, got.code)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestQueryResultShape: the rows carry exactly the registered columns in
// order, normalized to their declared types.
func TestQueryResultShape(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, int64(3))
	f.task("t2", "p1", "a", true, nil)
	body, _ := f.service([]operations.Query{qByProject}, nil).Handle(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, byProject("p1"))
	want := `{"t":"object","v":[["revision",{"t":"number","v":1}],["kind",{"t":"string","v":"query"}],` +
		`["operationId",{"t":"string","v":"tasks.byProject"}],["rows",{"t":"array","v":[` +
		`{"t":"object","v":[["id",{"t":"string","v":"t2"}],["title",{"t":"string","v":"a"}],["estimate",{"t":"null"}]]},` +
		`{"t":"object","v":[["id",{"t":"string","v":"t1"}],["title",{"t":"string","v":"b"}],["estimate",{"t":"number","v":3}]]}]}],` +
		`["maxCommitSeq",{"t":"number","v":2}]]}`
	if string(body) != want {
		t.Fatalf("got  %s\nwant %s", body, want)
	}
}

// TestQueriesHonourTheServeGate: a closed gate refuses before the query;
// the gate of the query's own snapshot is the read-verify, with the
// pull's rules (a closed gate, a changed token).
func TestQueriesHonourTheServeGate(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(f *fixture)
	}{
		{name: "a database migrated past the build", prepare: func(f *fixture) {
			f.store.before = func(g checkpoint.ServeGate) checkpoint.ServeGate { g.StoredSchemaVersion = f.sc.Version + 1; return g }
		}},
		{name: "an undeclared pending checkpoint", prepare: func(f *fixture) {
			if _, err := f.store.DeclareCheckpoint(context.Background(), checkpoint.Declaration{Partition: "part", Name: "proj", SchemaVersion: f.sc.Version}, 1); err != nil {
				f.t.Fatal(err)
			}
		}},
		{name: "the snapshot's gate closed after the entry read", prepare: func(f *fixture) {
			f.store.snapshot = func(r ports.AuthoritativeResult) (ports.AuthoritativeResult, error) {
				r.Gate.StoredSchemaVersion = f.sc.Version + 1
				return r, nil
			}
		}},
		{name: "the log epoch changed between the reads", prepare: func(f *fixture) {
			f.store.snapshot = func(r ports.AuthoritativeResult) (ports.AuthoritativeResult, error) {
				r.Gate.LogEpoch = "restored"
				return r, nil
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.task("t1", "p1", "b", false, nil)
			tt.prepare(f)
			s := f.service([]operations.Query{qByProject}, nil)
			body, code := s.Handle(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, byProject("p1"))
			if code != syncerr.SchemaNotReady {
				t.Fatalf("code %q, want sync.schema_not_ready (%s)", code, body)
			}
			if got := decode(t, body); got.code != "sync.schema_not_ready" || !got.retry {
				t.Fatalf("body %+v", got)
			}
		})
	}
	t.Run("a declared pending checkpoint lets queries through", func(t *testing.T) {
		f := newFixture(t)
		f.task("t1", "p1", "b", false, nil)
		d := checkpoint.Declaration{Partition: "part", Name: "proj", SchemaVersion: f.sc.Version}
		if _, err := f.store.DeclareCheckpoint(context.Background(), d, 1); err != nil {
			t.Fatal(err)
		}
		s := f.service([]operations.Query{qByProject}, func(o *operations.Options) { o.Declarations = []checkpoint.Declaration{d} })
		body, code := s.Handle(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, byProject("p1"))
		if code != "" {
			t.Fatalf("code %q (%s)", code, body)
		}
	})
}

func TestNewRegistryRefuses(t *testing.T) {
	sc := ssptest.Schema(t)
	tests := []struct {
		name    string
		queries []operations.Query
	}{
		{"an invalid spec", []operations.Query{{Spec: opdomain.QuerySpec{ID: "q", Table: "nope", MaxRows: 1}}}},
		{"a duplicate id", []operations.Query{qAll, qAll}},
		{"privileged without authorize", []operations.Query{{Spec: qAll.Spec, Access: operations.AccessPrivileged}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := operations.NewRegistry(sc, tt.queries, nil); err == nil {
				t.Fatal("registry built")
			}
		})
	}
}

func TestParseQueryFile(t *testing.T) {
	f, err := operations.ParseQueryFile([]byte(`{"queries": [{"id": "tasks.open", "table": "tasks", "columns": ["id"],
	  "filters": [{"column": "project_id", "op": "eq", "param": "project"}], "orderBy": [{"column": "title", "desc": true}], "maxRows": 5}]}`))
	if err != nil {
		t.Fatal(err)
	}
	qs := f.ScopedQueries()
	want := []operations.Query{{Spec: opdomain.QuerySpec{ID: "tasks.open", Table: "tasks", Columns: []string{"id"},
		Filters: []opdomain.Filter{{Column: "project_id", Op: opdomain.OpEq, Param: "project"}},
		OrderBy: []opdomain.Order{{Column: "title", Desc: true}}, MaxRows: 5}}}
	if !reflect.DeepEqual(qs, want) {
		t.Fatalf("got %+v", qs)
	}
	for _, bad := range []string{`{}`, `{"queries": [{"id": "q", "tabel": "tasks"}]}`, `{"queries": []} x`, `[`,
		`{"descriptors": {"file": "q.json", "register": [{"name": "q", "maxRows": 1, "access": "privileged"}]}}`} {
		if _, err := operations.ParseQueryFile([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

// actorAuth authenticates every request as the actor of its X-Actor
// header in partition "part".
type actorAuth struct{}

func (actorAuth) Authenticate(r *http.Request) (ports.Identity, error) {
	return ports.Identity{ActorID: r.Header.Get("X-Actor"), Partition: "part"}, nil
}

// postOperation posts body to POST /operations served by s and returns
// the 200 answer and the code the router observed.
func postOperation(t *testing.T, s *operations.Service, actor string, body []byte) ([]byte, syncerr.Code) {
	t.Helper()
	tr, err := httpapi.NewTransport(httpapi.TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seen httpapi.RequestStats
	router, err := httpapi.New(httpapi.Options{Observe: func(st httpapi.RequestStats) { seen = st },
		Handlers: map[httpapi.Route]http.Handler{httpapi.RouteOperations: tr.OperationsEndpoint(actorAuth{}, s, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/operations", bytes.NewReader(body))
	req.Header.Set("Content-Type", httpapi.ContentTypeOperations)
	req.Header.Set("X-Actor", actor)
	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != httpapi.ContentTypeOperations {
		t.Fatalf("status %d (%s): %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
	}
	return rec.Body.Bytes(), seen.Code
}
