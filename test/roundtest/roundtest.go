// Package roundtest runs SSP2 sync rounds for the tests of app/round and
// app/push: a round (app/round) over the push pipeline (app/push) over an
// in-memory store with the ssptest schema, partition p1 touched and alice
// the actor, as the server assembles them.
package roundtest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	pullsvc "github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// ResolverFunc is a scope resolver.
type ResolverFunc func(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error)

// ResolveScopes implements ports.ScopeResolver.
func (f ResolverFunc) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	return f(ctx, req)
}

// AllowAll grants every owner and project.
var AllowAll = ResolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	return scopes.Allowed{"owner": {"*"}, "project_id": {"*"}}, nil
})

// Options configure a round and its pipeline: what the server gives both
// halves alike (set on both, over their own), and each half's own options
// (Assemble sets their Schema, Store and Push).
type Options struct {
	// Store is the storage of both (Build's default: the Env's memory
	// store).
	Store         ports.Storage
	Now           func() time.Time
	Events        ports.EventSink
	Limits        limits.Limits
	MaxOperations int
	Log           *zap.Logger

	// Round's Resolver is AllowAll unless a Build's mut sets another.
	Round round.Options
	Push  push.Options
}

// Env is a round over its pipeline, serving actor alice in partition p1.
type Env struct {
	T      testing.TB
	Schema *schema.Schema
	Store  *memory.Store
	Round  *round.Service
	Push   *push.Pipeline
	ID     ports.Identity
	Epoch  string
}

// New builds an Env; mut, when set, adjusts its options.
func New(t testing.TB, mut func(*Options)) *Env {
	t.Helper()
	sch := ssptest.Schema(t)
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	if err := st.EnsureSchema(context.Background(), sch, nil); err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Schema: sch, Store: st, ID: ports.Identity{ActorID: "alice", Partition: "p1"}}
	e.Round, e.Push = e.Build(mut)
	var err error
	if e.Epoch, err = st.TouchPartition(context.Background(), "p1", 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// Build builds another round and pipeline over e's schema and store,
// from the defaults and mut (nil: the defaults).
func (e *Env) Build(mut func(*Options)) (*round.Service, *push.Pipeline) {
	e.T.Helper()
	o := Options{Store: e.Store, Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		Round: round.Options{Resolver: AllowAll}}
	if mut != nil {
		mut(&o)
	}
	return Assemble(e.T, e.Schema, o)
}

// Assemble builds a round over its pipeline for sch from o.
func Assemble(tb testing.TB, sch *schema.Schema, o Options) (*round.Service, *push.Pipeline) {
	tb.Helper()
	schemaFn := func() *schema.Schema { return sch }
	p, r := o.Push, o.Round
	p.Schema, p.Store, p.Now, p.Events, p.Limits, p.MaxOperations, p.Log = schemaFn, o.Store, o.Now, o.Events, o.Limits, o.MaxOperations, o.Log
	pipeline, err := push.New(p)
	if err != nil {
		tb.Fatal(err)
	}
	r.Schema, r.Store, r.Now, r.Events, r.Limits, r.MaxOperations, r.Log = schemaFn, o.Store, o.Now, o.Events, o.Limits, o.MaxOperations, o.Log
	r.Push = pipeline
	svc, err := round.New(r)
	if err != nil {
		tb.Fatal(err)
	}
	return svc, pipeline
}

// Req is a request of client c1 at the schema's version and the
// partition's epoch, pushing commits.
func (e *Env) Req(commits ...*ssp2.PushCommit) ssptest.Req {
	return ssptest.Req{ClientID: "c1", SchemaVersion: e.Schema.Version, Epoch: e.Epoch, Commits: commits}
}

// Do serves r as e.ID and returns the decoded response and its bytes.
func (e *Env) Do(r ssptest.Req) (ssptest.Resp, []byte, error) {
	e.T.Helper()
	resp, err := e.Round.Handle(context.Background(), e.ID, r.Encode(e.T))
	if err != nil {
		return ssptest.Resp{}, nil, err
	}
	m := &ssp2.Message{WireVersion: resp.WireVersion, Kind: ssp2.KindResponse, Frames: resp.Frames}
	b, err := ssp2.Encode(m)
	if err != nil {
		e.T.Fatalf("encode response: %v", err)
	}
	return ssptest.DecodeResponse(e.T, b), b, nil
}

// Must is Do of a request that must not fail.
func (e *Env) Must(r ssptest.Req) (ssptest.Resp, []byte) {
	e.T.Helper()
	resp, b, err := e.Do(r)
	if err != nil {
		e.T.Fatalf("request failed: %v", err)
	}
	return resp, b
}

// As serves r as actor under client.
func (e *Env) As(actor, client string, r ssptest.Req) (ssptest.Resp, error) {
	e.T.Helper()
	id := e.ID
	e.ID.ActorID = actor
	defer func() { e.ID = id }()
	r.ClientID = client
	resp, _, err := e.Do(r)
	return resp, err
}

// Table is the schema's table name.
func (e *Env) Table(name string) *schema.Table { return e.Schema.Table(name) }

// Project is a whole projects row, as a sparse payload.
func (e *Env) Project(id, owner, name string) []byte {
	return ssptest.Sparse(e.T, e.Table("projects"), ssptest.Cols{"id": rowcodec.String(id),
		"owner": rowcodec.String(owner), "name": rowcodec.String(name), "locked": rowcodec.Bool(false)})
}

// Task is a whole tasks row, as a sparse payload.
func (e *Env) Task(id, project, title string) []byte {
	return ssptest.Sparse(e.T, e.Table("tasks"), ssptest.Cols{"id": rowcodec.String(id),
		"project_id": rowcodec.String(project), "title": rowcodec.String(title), "done": rowcodec.Bool(false),
		"estimate": rowcodec.Null(), "attachment": rowcodec.Null()})
}

// Own is commit ccid inserting project rowID owned by owner.
func (e *Env) Own(ccid, rowID, owner string) *ssp2.PushCommit {
	return ssptest.Commit(ccid, ssptest.Upsert("projects", rowID, e.Project(rowID, owner, owner+"'s"), -1))
}

// NoRow fails t if project id is stored.
func (e *Env) NoRow(t *testing.T, id string) {
	t.Helper()
	if row, err := e.Store.GetRow(context.Background(), "p1", "projects", id); err != nil || row != nil {
		t.Fatalf("row %s of a refused request: %+v, %v", id, row, err)
	}
}

// WithPull gives the round a pull service over the memory store.
func WithPull(o *Options) {
	p, err := pullsvc.New(pullsvc.Options{Store: o.Store.(*memory.Store), Now: o.Now})
	if err != nil {
		panic(err)
	}
	o.Round.Pull = p
}

// WantCode fails t unless err has code.
func WantCode(t *testing.T, err error, code syncerr.Code) {
	t.Helper()
	if syncerr.CodeOf(err) != code {
		t.Fatalf("error %v: code %s, want %s", err, syncerr.CodeOf(err), code)
	}
}

// WantRejected fails t unless r is rejected at opIndex with code.
func WantRejected(t *testing.T, r *ssp2.PushResult, opIndex int32, code string) {
	t.Helper()
	if r.Status != ssp2.PushRejected || len(r.Results) != 1 || r.Results[0].OpIndex != opIndex || r.Results[0].Code != code {
		t.Fatalf("result %+v: want rejected at op %d with %s", r, opIndex, code)
	}
}

// WantApplied fails t unless r is applied.
func WantApplied(t *testing.T, r *ssp2.PushResult) {
	t.Helper()
	if r.Status != ssp2.PushApplied {
		t.Fatalf("result %+v: want applied", r)
	}
}
