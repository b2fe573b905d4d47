package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/push"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// bumpIRv1 is version 1 of a one-table schema; version 2 adds the nullable
// column priority, which existing rows must get a value for (the backfill).
const bumpIRv1 = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{"version": 1, "migrations": ["0001"]}],
  "tables": [
    {"name": "items", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "owner", "type": "string", "nullable": false},
       {"name": "title", "type": "string", "nullable": false}],
     "scopes": ["user:{owner}"]}
  ],
  "subscriptions": []
}`

const bumpIRv2 = `{
  "irVersion": 1, "schemaVersion": 2,
  "schemaVersions": [{"version": 1, "migrations": ["0001"]}, {"version": 2, "migrations": ["0002"]}],
  "tables": [
    {"name": "items", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "owner", "type": "string", "nullable": false},
       {"name": "title", "type": "string", "nullable": false},
       {"name": "priority", "type": "integer", "nullable": true}],
     "scopes": ["user:{owner}"]}
  ],
  "subscriptions": []
}`

// node is one server process over a shared database.
type node struct {
	*server
	ready  *platform.Readiness
	runner *checkpoint.Runner
	pipe   *push.Pipeline
	stop   func()
}

// startNode starts a server with ir over the database open opens, without
// waiting for it to be ready; decls are the checkpoints it declares.
func startNode(t *testing.T, open func(t *testing.T) ports.Storage, ir string, decls []cpdomain.Declaration) *node {
	t.Helper()
	st := open(t)
	sch, err := schema.Load([]byte(ir))
	if err != nil {
		t.Fatal(err)
	}
	gs := &gatedStore{Storage: st, version: sch.Version}
	dir := t.TempDir()
	irPath := filepath.Join(dir, "schema.ir.json")
	if err := os.WriteFile(irPath, []byte(ir), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownDelay = 0
	cfg.Schema, cfg.Auth = irPath, config.AuthDev
	cfg.Database = filepath.Join(dir, "unused.db")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n := &node{}
	var listeners *platform.Listeners
	opts := []fx.Option{
		fx.Provide(func() ports.Storage { return gs }, func() ports.SchemaStore { return gs }),
		fx.Populate(&n.ready, &listeners, &n.runner, &n.pipe),
	}
	if len(decls) > 0 {
		opts = append(opts, fx.Supply(decls))
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	a := fx.New(app.Options(cfg, platform.BuildInfo{}, log, opts...))
	if err := a.Err(); err != nil {
		t.Fatalf("assemble: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = a.Stop(ctx)
			_ = st.Close()
		})
	}
	t.Cleanup(n.stop)
	n.server = &server{t: t, url: "http://" + listeners.Addr(platform.ServerSync).String() + "/sync",
		admin: "http://" + listeners.Addr(platform.ServerAdmin).String(), store: gs, sch: sch}
	return n
}

// waitReady polls /readyz until it answers 200 (or the deadline).
func (n *node) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if st, _ := n.readyz(t); st == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			_, body := n.readyz(t)
			t.Fatalf("not ready after %s: %+v", within, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) readyz(t *testing.T) (int, platform.Status) {
	t.Helper()
	resp, err := http.Get(n.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st platform.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("/readyz %s: %v", b, err)
	}
	return resp.StatusCode, st
}

func item(t *testing.T, s *schema.Schema, id, title string, priority *int64) []byte {
	c := ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String("alice"), "title": rowcodec.String(title)}
	if s.Table("items").ColumnIndex("priority") >= 0 {
		c["priority"] = rowcodec.Null()
		if priority != nil {
			c["priority"] = rowcodec.Int(*priority)
		}
	}
	return ssptest.Sparse(t, s.Table("items"), c)
}

func priorities(r *replica) map[string]string {
	out := map[string]string{}
	for id, c := range r.cells["items"] {
		if v := c["priority"]; v.IsNull() || v.IsAbsent() {
			out[id] = "-"
		} else {
			out[id] = fmt.Sprint(v.Int())
		}
	}
	return out
}

// TestSchemaBumpWithBackfill is the operator workflow of a version bump
// that needs a backfill, with clients syncing throughout: v1 serves; a v2
// process that declares the checkpoint migrates (fence and declaration
// in the migration) and serves during the backfill; a v2 process that
// does not declare it waits in phase backfill_checkpoint; the backfill
// (the host Go API of the v2 graph, the built-in fill) writes server
// commits the syncing client pulls while it keeps pushing; after the
// activation the waiting process turns ready by itself and serves the
// filled rows.
func TestSchemaBumpWithBackfill(t *testing.T) {
	for _, db := range sharedDatabases() {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			testSchemaBumpWithBackfill(t, db.open(t))
		})
	}
}

// sharedDatabase makes one database of an engine per test, which open
// returns a further storage over each time, as another process would.
type sharedDatabase struct {
	name string
	open func(t *testing.T) func(t *testing.T) ports.Storage
}

func sharedDatabases() []sharedDatabase {
	return []sharedDatabase{
		{"sqlite", func(t *testing.T) func(t *testing.T) ports.Storage {
			path := filepath.Join(t.TempDir(), "syncd.db")
			return func(t *testing.T) ports.Storage {
				st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
		}},
		{"postgres", func(t *testing.T) func(t *testing.T) ports.Storage {
			dsn := pgtest.DSN(t)
			return func(t *testing.T) ports.Storage {
				st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: 8})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
		}},
	}
}

func testSchemaBumpWithBackfill(t *testing.T, open func(t *testing.T) ports.Storage) {
	const part = "bump"
	c := call{actor: "alice", partition: part, scopes: `{"owner":["alice"]}`}
	// 1. Version 1 serves; a client writes rows.
	v1 := startNode(t, open, bumpIRv1, nil)
	v1.waitReady(t, 30*time.Second)
	old := newReplica(t, v1.server, c, "old-client")
	old.subscribe("items", "items", map[string][]string{"owner": {"alice"}})
	var ops []ssp2.PushOperation
	for i := range 12 {
		id := fmt.Sprintf("i%02d", i)
		ops = append(ops, ssptest.Upsert("items", id, item(t, v1.sch, id, "v1 "+id, nil), -1))
	}
	old.pull(ssptest.Commit("seed", ops...))
	if len(old.rows["items"]) != 12 {
		t.Fatalf("v1 client holds %d rows", len(old.rows["items"]))
	}
	v1.stop()

	// 2. The bump: a v2 process that declares the checkpoint migrates and
	// serves while it backfills.
	decl := cpdomain.Declaration{Partition: part, Name: "priority", SchemaVersion: 2}
	v2 := startNode(t, open, bumpIRv2, []cpdomain.Declaration{decl})
	v2.waitReady(t, 30*time.Second)
	if _, st := v2.readyz(t); len(st.Checkpoints) != 1 || st.Checkpoints[0].Name != "priority" || !st.Checkpoints[0].Declared {
		t.Fatalf("declaring node /readyz: %+v", st)
	}
	// 3. A v2 process without the declaration waits.
	waiting := startNode(t, open, bumpIRv2, nil)
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, st := waiting.readyz(t)
		if code == http.StatusOK {
			t.Fatalf("undeclaring node ready with a pending checkpoint: %+v", st)
		}
		if st.Phase == platform.PhaseBackfillCheckpoint && st.Error != nil && st.Error.Code == "sync.storage.checkpoint_incomplete" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("undeclaring node /readyz %d: %+v", code, st)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// 4. A v2 client bootstraps from the declaring node and keeps syncing
	// while the backfill runs: it pushes title edits and new rows (with a
	// priority) and pulls.
	cl := newReplica(t, v2.server, c, "new-client")
	cl.subscribe("items", "items", map[string][]string{"owner": {"alice"}})
	cl.pull()
	if got := priorities(cl); len(got) != 12 || got["i00"] != "-" {
		t.Fatalf("before the backfill: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	syncErr := make(chan error, 1)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("i%02d", i%12)
			p := int64(5)
			commits := []*ssp2.PushCommit{ssptest.Commit(fmt.Sprint("edit-", i),
				ssptest.Upsert("items", id, ssptest.Sparse(t, v2.sch.Table("items"), ssptest.Cols{"id": rowcodec.String(id), "title": rowcodec.String(fmt.Sprint("edit ", i))}), -1))}
			if i%4 == 0 {
				nid := fmt.Sprintf("n%02d", i)
				commits = append(commits, ssptest.Commit(fmt.Sprint("new-", i), ssptest.Upsert("items", nid, item(t, v2.sch, nid, "new", &p), -1)))
			}
			resp := cl.fetch(commits...)
			for _, r := range resp.Results {
				if r.Status != ssp2.PushApplied {
					select {
					case syncErr <- fmt.Errorf("client push %s: %+v", r.ClientCommitID, r):
					default:
					}
					return
				}
			}
			cl.apply(resp)
			time.Sleep(5 * time.Millisecond)
		}
	})
	fill, err := checkpoint.NewFill(v2.sch, "items", map[string]string{"priority": "0"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	res, err := v2.runner.Run(context.Background(), part, "priority", &slowFill{Fill: fill})
	cancel()
	wg.Wait()
	select {
	case err := <-syncErr:
		t.Fatal(err)
	default:
	}
	if err != nil || res.Outcome != checkpoint.OutcomeActivated || res.Batches < 4 || res.RowsWritten < 12 {
		t.Fatalf("backfill = %+v, %v", res, err)
	}
	// 5. The client pulls the backfill's commits like any other.
	cl.pull()
	for id, p := range priorities(cl) {
		want := "0"
		if strings.HasPrefix(id, "n") {
			want = "5"
		}
		if p != want {
			t.Fatalf("client row %s priority %s, want %s (all: %v)", id, p, want, priorities(cl))
		}
	}
	// /readyz rereads the checkpoints at most once a second.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, st := v2.readyz(t)
		if len(st.Checkpoints) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activated checkpoint still listed: %+v", st.Checkpoints)
		}
	}
	if !strings.Contains(v2.metrics(t), `syncd_backfill_runs_total{outcome="activated"} 1`) {
		t.Fatal("backfill run not counted in /metrics")
	}
	// 6. The waiting process turns ready by itself and serves the rows.
	waiting.waitReady(t, 60*time.Second)
	fresh := newReplica(t, waiting.server, c, "fresh-client")
	fresh.subscribe("items", "items", map[string][]string{"owner": {"alice"}})
	fresh.pull()
	if got, want := priorities(fresh), priorities(cl); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fresh client on the waiting node: %v, want %v", got, want)
	}
}

// slowFill paces the fill's batches so the client's writes interleave.
type slowFill struct{ *checkpoint.Fill }

func (s *slowFill) Scan(ctx context.Context, in ports.BackfillScan) (ports.BackfillBatch, error) {
	in.Limit = 3
	time.Sleep(20 * time.Millisecond)
	return s.Fill.Scan(ctx, in)
}

func (s *server) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestWriterFenceRefusalIsNotReady: a writer fence above the running
// version (raised by a later schema's checkpoint declaration, which the
// serve gate at this version does not read) refuses the push's append;
// the client is answered sync.schema_not_ready, retryable, and nothing is
// stored, whether the engine refuses the append at once (SQLite) or holds
// it back to its group's commit and the push reports it (PostgreSQL).
func TestWriterFenceRefusalIsNotReady(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		ctx := context.Background()
		next := cpdomain.Declaration{Partition: "default", Name: "next", SchemaVersion: s.sch.Version + 1}
		if _, err := s.store.DeclareCheckpoint(ctx, next, 1); err != nil {
			t.Fatal(err)
		}
		commit := ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1))
		for _, pull := range []bool{false, true} {
			r := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{commit}, Pull: pull}
			body := s.jsonError(s.post(c, r.Encode(t)), http.StatusServiceUnavailable, syncerr.SchemaNotReady)
			if body["retryable"] != true {
				t.Fatalf("pull %v: refusal %v, want retryable", pull, body)
			}
		}
		if row, _ := s.store.GetRow(ctx, "default", "projects", "p-1"); row != nil {
			t.Fatal("write landed past the writer fence")
		}
		if _, ok, _ := s.store.GetPushResult(ctx, "default", "c1", "k1"); ok {
			t.Fatal("result persisted past the writer fence")
		}
		if b, _ := s.store.LogBounds(ctx, "default"); b.MaxSeq != 0 {
			t.Fatalf("log advanced to %d", b.MaxSeq)
		}
	})
}

// TestWriterFenceRefusesServerCommits: a server commit whose append a
// writer fence above the running version refuses fails with the storage
// code on every engine, refused at once (SQLite) or held back and
// reported by the push (PostgreSQL), and stores nothing.
func TestWriterFenceRefusesServerCommits(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		var pipe *push.Pipeline
		s := start(t, e, serverOpts{extra: []fx.Option{fx.Populate(&pipe)}})
		ctx := context.Background()
		next := cpdomain.Declaration{Partition: "default", Name: "next", SchemaVersion: s.sch.Version + 1}
		if _, err := s.store.DeclareCheckpoint(ctx, next, 1); err != nil {
			t.Fatal(err)
		}
		_, err := pipe.ApplyServerCommit(ctx, push.ServerCommit{Partition: "default", ActorID: "server", ClientID: "job", ClientCommitID: "b1",
			Operations: []ssp2.PushOperation{ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)}})
		if syncerr.CodeOf(err) != syncerr.StorageWriterFenceRejected {
			t.Fatalf("server commit under the fence = %v, want %s", err, syncerr.StorageWriterFenceRejected)
		}
		if row, _ := s.store.GetRow(ctx, "default", "projects", "p-1"); row != nil {
			t.Fatal("server commit landed past the writer fence")
		}
		if b, _ := s.store.LogBounds(ctx, "default"); b.MaxSeq != 0 {
			t.Fatalf("log advanced to %d", b.MaxSeq)
		}
	})
}

// TestOldNodeAfterUpgrade: SPEC §2.4, schema upgrade writer fence, with
// two servers of different schema versions on one database. A v2 node
// migrates the database a v1 node serves; the v1 node then writes
// nothing: its clients' pushes and its server commits are refused by the
// serve gate (sync.schema_not_ready), and an append through its storage
// that reads no gate (as the seed command writes) by the writer fence the
// migration raised (sync.storage.writer_fence_rejected). The v2 node
// writes on.
func TestOldNodeAfterUpgrade(t *testing.T) {
	for _, db := range sharedDatabases() {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			testOldNodeAfterUpgrade(t, db.open(t))
		})
	}
}

func testOldNodeAfterUpgrade(t *testing.T, open func(t *testing.T) ports.Storage) {
	const part = "upgrade"
	ctx := context.Background()
	c := call{actor: "alice", partition: part, scopes: `{"owner":["alice"]}`}
	pushItem := func(n *node, ep, id string) reply {
		commit := ssptest.Commit("k-"+id, ssptest.Upsert("items", id, item(t, n.sch, id, id, nil), -1))
		return n.post(c, ssptest.Req{ClientID: "c-" + id, SchemaVersion: n.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{commit}}.Encode(t))
	}
	serverItem := func(n *node, id string) error {
		_, err := n.pipe.ApplyServerCommit(ctx, push.ServerCommit{Partition: part, ActorID: "server", ClientID: "job", ClientCommitID: id,
			Operations: []ssp2.PushOperation{ssptest.Upsert("items", id, item(t, n.sch, id, id, nil), -1)}})
		return err
	}
	rawAppend := func(n *node, id string) error {
		return n.store.Push(ctx, part, ports.PushOptions{WriterVersion: n.sch.Version}, func(tx ports.PushTx) error {
			_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "seed", ClientID: "seed", ClientCommitID: id})
			return err
		})
	}

	v1 := startNode(t, open, bumpIRv1, nil)
	v1.waitReady(t, 30*time.Second)
	ep := v1.epoch(c)
	if rep := pushItem(v1, ep, "a"); rep.status != http.StatusOK {
		t.Fatalf("v1 push before the upgrade: %d %s", rep.status, rep.body)
	}
	if err := serverItem(v1, "b"); err != nil {
		t.Fatalf("v1 server commit before the upgrade: %v", err)
	}

	v2 := startNode(t, open, bumpIRv2, nil)
	v2.waitReady(t, 30*time.Second)

	v1.jsonError(pushItem(v1, ep, "c"), http.StatusServiceUnavailable, syncerr.SchemaNotReady)
	if err := serverItem(v1, "d"); syncerr.CodeOf(err) != syncerr.SchemaNotReady {
		t.Fatalf("v1 server commit after the upgrade = %v, want %s", err, syncerr.SchemaNotReady)
	}
	if err := rawAppend(v1, "e"); syncerr.CodeOf(err) != syncerr.StorageWriterFenceRejected {
		t.Fatalf("v1 gate-less append after the upgrade = %v, want %s", err, syncerr.StorageWriterFenceRejected)
	}
	b, err := v2.store.LogBounds(ctx, part)
	if err != nil || b.MaxSeq != 2 {
		t.Fatalf("log after the refused writes = %+v, %v; want the two v1 commits", b, err)
	}
	for _, id := range []string{"c", "d"} {
		if row, _ := v2.store.GetRow(ctx, part, "items", id); row != nil {
			t.Fatalf("row %s of the v1 node landed after the upgrade", id)
		}
	}

	if rep := pushItem(v2, ep, "f"); rep.status != http.StatusOK {
		t.Fatalf("v2 push: %d %s", rep.status, rep.body)
	}
	if err := serverItem(v2, "g"); err != nil {
		t.Fatalf("v2 server commit: %v", err)
	}
	if err := rawAppend(v2, "h"); err != nil {
		t.Fatalf("v2 append: %v", err)
	}
}
