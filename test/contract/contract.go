// Package contract is the storage port's contract suite: one set of cases
// every ports.Storage implementation must pass (the in-memory fake, SQLite
// and PostgreSQL). An engine's test file builds a Harness and calls Run.
//
// Cases that need the database itself (raw SQL for the writer-fence
// trigger and for tampering with the physical layout, query plans) run
// only when the harness provides Engine hooks; they skip otherwise.
//
// Groups (test names follow them: TestX/Group/Case):
//
//   - EnsureSchema: idempotence, newer database, stored layout refusals,
//     version bump (create, add column, retire), declarations and fence at
//     the bump, every partition's fence raised by the bump (never
//     lowered) against a store at the previous version,
//     checkpoint_incomplete, concurrent bumps, the bump barrier against
//     an open push.
//   - Push: dense seqs (also concurrent), partition independence (skipped
//     with SharedWriter), rollback and DiscardWrites leave nothing,
//     read-your-writes with isolation, commit fields, first-writer-wins
//     results (also racing), typed constraint errors, tombstones, blob
//     refs, the blob GC's claims (the orphan sweep; also racing pushes),
//     reactions, lookups, column versions, cancellation.
//   - Log, Rows: scope-filtered windows (multi-variable, limits that keep
//     commits whole), keyset scans in byte order, argument refusals.
//   - Prune: epoch binding, atomic horizon, monotonicity, pushes racing.
//   - RecentLog: run when the storage implements ports.RecentWindowReader:
//     windows answered from memory equal the log's, only committed
//     commits are held, another writer's commit or a rotated epoch ends
//     what is answered.
//   - Partitions, Clients: registry, rotation, cursor rules, floors.
//   - Bindings: client ids bound to the first actor (also racing, and
//     beside an open push), with the push transaction, kept by rotation,
//     never a cursor; the owner of push results.
//   - Checkpoints, ServeGate: the state machine, fence, gate reads.
//   - ReactionQueue: run when the storage implements ports.ReactionQueue.
//   - AuthoritativeQuery: registered queries (ports.AuthoritativeQuerier):
//     conditions, order with the row id as tie-break, byte order, limit,
//     the scope filter before the limit, partition binding, max seq and
//     gate from the same snapshot, staged writes unseen, refusals.
//   - Admin: the admin API's reads (ports.AdminReader): partitions, clients,
//     commit metadata, reaction counts, keyset pages in byte order.
//   - Engine (hooks only): fence trigger, physical layout, query plans.
//   - Bulk: seeding BulkRows rows for one scope, then bounded reads (the time is logged).
package contract

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Harness adapts one storage implementation to the suite.
type Harness struct {
	// New opens a fresh, empty database and returns a storage over it whose
	// schema is not yet ensured. The harness releases it (t.Cleanup).
	New func(t *testing.T) ports.Storage
	// Reopen opens a second storage over the same database as s, the way
	// another process (or a restart) would: shared data, its own ensured
	// schema. The harness releases it.
	Reopen func(t *testing.T, s ports.Storage) ports.Storage
	// SharedWriter is true when the engine has one writer for all
	// partitions (SQLite): the case that pushes to different partitions do
	// not serialize on each other is skipped.
	SharedWriter bool
	// BulkRows is how many rows the bulk seed case writes for one scope
	// (0 means 100,000; negative skips the case).
	BulkRows int
	// Engine holds the engine-only hooks; nil for the in-memory fake.
	Engine *Engine
}

// Engine gives the suite raw access to a SQL engine.
type Engine struct {
	// Dialect is "sqlite" or "postgres".
	Dialect string
	// Exec runs one raw statement on s's database, outside any storage
	// transaction, and returns the driver's error unchanged. Placeholders
	// are written '?'; the hook rebinds them for its engine.
	Exec func(ctx context.Context, s ports.Storage, query string, args ...any) error
	// Plans returns the query plans (SQLite EXPLAIN QUERY PLAN rows,
	// PostgreSQL EXPLAIN lines) of every statement the storage runs to
	// serve ReadCommitWindow(partition, w) and ScanRows(partition, q).
	// PostgreSQL hooks plan with enable_seqscan off, so a sequential scan
	// in the plan means no index can serve the statement.
	Plans func(ctx context.Context, s ports.Storage, partition string, w ports.CommitWindow, q ports.RowScan) ([]string, error)
}

// Run runs every case against the harness.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Reopen == nil {
		t.Fatal("contract: Harness.New and Harness.Reopen are required")
	}
	for _, g := range allGroups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, h) })
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

type group struct {
	name  string
	cases []testCase
}

// allGroups lists every case group, in run order.
func allGroups() []group {
	var gs []group
	for _, part := range [][]group{adminGroups(), checkpointGroups(), clientGroups(), engineGroups(), healthGroups(), logGroups(), operationGroups(), pushGroups(), reactionGroups(), recentGroups(), schemaGroups()} {
		gs = append(gs, part...)
	}
	return gs
}

// ---- test schemas ----

// irV1 is the base schema: a materialized table with two scope variables
// and a unique index, a non-materialized table with an integer key, and a
// projection table for the checkpoint cases.
const irV1 = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{"version": 1, "migrations": []}],
  "tables": [
    {"name": "tasks", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "owner_id", "type": "string", "nullable": false},
       {"name": "title", "type": "string", "nullable": false},
       {"name": "done", "type": "boolean", "nullable": false},
       {"name": "attachment", "type": "blob_ref", "nullable": true}],
     "scopes": ["project:{project_id}", "owner:{owner_id}"],
     "indexes": [{"name": "tasks_title", "columns": ["title"], "unique": true}]},
    {"name": "notes", "primaryKey": "id", "materialize": false,
     "columns": [
       {"name": "id", "type": "integer", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "body", "type": "json", "nullable": true}],
     "scopes": ["project:{project_id}"]},
    {"name": "digest", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "total", "type": "integer", "nullable": false}],
     "scopes": ["project:{project_id}"]}
  ],
  "subscriptions": []
}`

// irEdit returns ir with old replaced by new; old must occur exactly once,
// so a variant never silently equals its base.
func irEdit(t *testing.T, ir, old, new string) string {
	t.Helper()
	if n := strings.Count(ir, old); n != 1 {
		t.Fatalf("schema edit: %q occurs %d times", old, n)
	}
	return strings.Replace(ir, old, new, 1)
}

// irV1TitleNullable is irV1 with tasks.title nullable, at the same version.
func irV1TitleNullable(t *testing.T) string {
	return irEdit(t, irV1, `{"name": "title", "type": "string", "nullable": false}`,
		`{"name": "title", "type": "string", "nullable": true}`)
}

// irV1NoDigest is irV1 without the digest table, at the same version.
func irV1NoDigest(t *testing.T) string {
	return irEdit(t, irV1, `,
    {"name": "digest", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "total", "type": "integer", "nullable": false}],
     "scopes": ["project:{project_id}"]}`, "")
}

// irV2 bumps to version 2: tasks gains a nullable priority column, digest
// is retired and labels is new.
const irV2 = `{
  "irVersion": 1, "schemaVersion": 2,
  "schemaVersions": [{"version": 1, "migrations": []}, {"version": 2, "migrations": []}],
  "tables": [
    {"name": "tasks", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "owner_id", "type": "string", "nullable": false},
       {"name": "title", "type": "string", "nullable": false},
       {"name": "done", "type": "boolean", "nullable": false},
       {"name": "attachment", "type": "blob_ref", "nullable": true},
       {"name": "priority", "type": "integer", "nullable": true}],
     "scopes": ["project:{project_id}", "owner:{owner_id}"],
     "indexes": [{"name": "tasks_title", "columns": ["title"], "unique": true},
                 {"name": "tasks_priority", "columns": ["priority"]}]},
    {"name": "notes", "primaryKey": "id", "materialize": false,
     "columns": [
       {"name": "id", "type": "integer", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "body", "type": "json", "nullable": true}],
     "scopes": ["project:{project_id}"]},
    {"name": "labels", "primaryKey": "id",
     "columns": [
       {"name": "id", "type": "string", "nullable": false},
       {"name": "project_id", "type": "string", "nullable": false},
       {"name": "name", "type": "string", "nullable": false}],
     "scopes": ["project:{project_id}"]}
  ],
  "subscriptions": []
}`

func mustSchema(t testing.TB, ir string) *schema.Schema {
	t.Helper()
	s, err := schema.Load([]byte(ir))
	if err != nil {
		t.Fatalf("test schema: %v", err)
	}
	return s
}

// ---- fixtures ----

type env struct {
	t   *testing.T
	h   Harness
	ctx context.Context
	s   ports.Storage
	sc  *schema.Schema
}

// open returns a fresh storage ensured at irV1.
func open(t *testing.T, h Harness) *env {
	t.Helper()
	e := &env{t: t, h: h, ctx: context.Background(), s: h.New(t), sc: mustSchema(t, irV1)}
	if err := e.s.EnsureSchema(e.ctx, e.sc, nil); err != nil {
		t.Fatalf("EnsureSchema(v1): %v", err)
	}
	return e
}

// reopen returns a second storage over the same database ensured at sc.
func (e *env) reopen(sc *schema.Schema, decls []checkpoint.Declaration) (ports.Storage, error) {
	s := e.h.Reopen(e.t, e.s)
	return s, s.EnsureSchema(e.ctx, sc, decls)
}

const v1 = int32(1)

// task is a tasks row. An empty title renders as "title of <id>" (titles
// are unique per partition); the title "\x00null" writes NULL, which the
// NOT NULL column refuses. version 0 means 1.
type task struct {
	id, project, owner, title string
	done                      bool
	attachment                any // nil or string
	version                   int64
}

func (k task) values() []any {
	title := any(k.title)
	if k.title == "\x00null" {
		title = nil
	}
	return []any{k.id, k.project, k.owner, title, k.done, k.attachment}
}

func (k task) scopes() map[string]string {
	return map[string]string{"project": k.project, "owner": k.owner}
}

func (k task) write(op int) ports.RowWrite {
	v := k.version
	if v == 0 {
		v = 1
	}
	title := k.title
	if title == "" {
		title = "title of " + k.id
		k.title = title
	}
	return ports.RowWrite{
		RowID:   k.id,
		Version: v,
		Scopes:  k.scopes(),
		Payload: encodeRow(tasksColumns, k.values()),
		Values:  k.values(),
		OpIndex: op,
	}
}

func (k task) upsert() commit.Change {
	w := k.write(0)
	return commit.Change{Table: "tasks", RowID: k.id, Op: commit.OpUpsert, RowVersion: w.Version, Scopes: w.Scopes, Row: w.Payload}
}

func (k task) deletion() commit.Change {
	return commit.Change{Table: "tasks", RowID: k.id, Op: commit.OpDelete, Scopes: k.scopes()}
}

var tasksColumns = []schema.ColumnType{schema.TypeString, schema.TypeString, schema.TypeString, schema.TypeString, schema.TypeBoolean, schema.TypeBlobRef}

// encodeRow is a minimal full-row codec (SPEC §2.4) so payloads are
// well-formed for engines that re-encode rows on migration.
func encodeRow(types []schema.ColumnType, values []any) []byte {
	n := len(types)
	out := make([]byte, (n+7)/8)
	for i, v := range values {
		if v == nil {
			out[i/8] |= 1 << (i % 8)
		}
	}
	for i, v := range values {
		if v == nil {
			continue
		}
		switch types[i] {
		case schema.TypeString, schema.TypeJSON, schema.TypeBlobRef:
			s := v.(string)
			out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
			out = append(out, s...)
		case schema.TypeInteger:
			out = binary.LittleEndian.AppendUint64(out, uint64(v.(int64)))
		case schema.TypeFloat:
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v.(float64)))
		case schema.TypeBoolean:
			if v.(bool) {
				out = append(out, 1)
			} else {
				out = append(out, 0)
			}
		default:
			b := v.([]byte)
			out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
			out = append(out, b...)
		}
	}
	return out
}

// note is a notes row (not materialized, integer key).
func noteWrite(id int64, project string) ports.RowWrite {
	vals := []any{id, project, `{"n":` + fmt.Sprint(id) + `}`}
	return ports.RowWrite{
		RowID:   fmt.Sprint(id),
		Version: 1,
		Scopes:  map[string]string{"project": project},
		Payload: encodeRow([]schema.ColumnType{schema.TypeInteger, schema.TypeString, schema.TypeJSON}, vals),
		Values:  vals,
	}
}

func noteUpsert(id int64, project string) commit.Change {
	w := noteWrite(id, project)
	return commit.Change{Table: "notes", RowID: w.RowID, Op: commit.OpUpsert, RowVersion: 1, Scopes: w.Scopes, Row: w.Payload}
}

func digestWrite(id, project string, total int64) ports.RowWrite {
	vals := []any{id, project, total}
	return ports.RowWrite{
		RowID:   id,
		Version: 1,
		Scopes:  map[string]string{"project": project},
		Payload: encodeRow([]schema.ColumnType{schema.TypeString, schema.TypeString, schema.TypeInteger}, vals),
		Values:  vals,
	}
}

// push runs fn in a push transaction at writer version v1.
func (e *env) push(partition string, fn func(tx ports.PushTx) error) error {
	return e.s.Push(e.ctx, partition, ports.PushOptions{WriterVersion: v1}, fn)
}

// commitTasks upserts the rows and appends one commit with their changes
// (deletes for rows listed in dels); it returns the seq.
func (e *env) commitTasks(partition string, createdAt int64, ups []task, dels []task) int64 {
	e.t.Helper()
	return e.commitOn(e.s, partition, false, createdAt, ups, dels)
}

// commitOn is commitTasks on s, reading the serve gate first when gated
// (as the sync service pushes).
func (e *env) commitOn(s ports.Storage, partition string, gated bool, createdAt int64, ups, dels []task) int64 {
	e.t.Helper()
	var seq int64
	err := s.Push(e.ctx, partition, ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
		if gated {
			if _, err := tx.ReadServeGate(e.ctx); err != nil {
				return err
			}
		}
		var err error
		seq, err = e.stageTasks(tx, createdAt, ups, dels)
		return err
	})
	if err != nil {
		e.t.Fatalf("push: %v", err)
	}
	return seq
}

// stageTasks writes the rows in tx and appends one commit with their
// changes (deletes for rows listed in dels); it returns the seq.
func (e *env) stageTasks(tx ports.PushTx, createdAt int64, ups, dels []task) (int64, error) {
	var changes []commit.Change
	for _, k := range dels {
		if err := tx.DeleteRow(e.ctx, "tasks", k.id, 0); err != nil {
			return 0, err
		}
		changes = append(changes, k.deletion())
	}
	for i, k := range ups {
		if err := tx.UpsertRow(e.ctx, "tasks", k.write(i)); err != nil {
			return 0, err
		}
		changes = append(changes, k.upsert())
	}
	return tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: createdAt, ActorID: "actor", ClientID: "client", ClientCommitID: fmt.Sprintf("cc-%d-%d", createdAt, len(ups)), Changes: changes})
}

// ---- assertions ----

func wantCode(t *testing.T, err error, code syncerr.Code) *syncerr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", code)
	}
	var se *syncerr.Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("got error %v, want code %s", err, code)
	}
	return se
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func seqsOf(cs []commit.Commit) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

func rowIDs(rs []commit.Row) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.RowID
	}
	return out
}

func changeIDs(cs []commit.Commit) []string {
	var out []string
	for _, c := range cs {
		for _, ch := range c.Changes {
			out = append(out, fmt.Sprintf("%d:%s", c.Seq, ch.RowID))
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// window reads tasks changes for filter in (after, through].
func (e *env) window(partition string, filter map[string][]string, after, through int64, limit int) []commit.Commit {
	e.t.Helper()
	cs, err := e.s.ReadCommitWindow(e.ctx, partition, ports.CommitWindow{Table: "tasks", ScopeFilter: filter, AfterSeq: after, ThroughSeq: through, LimitChanges: limit})
	if err != nil {
		e.t.Fatalf("ReadCommitWindow: %v", err)
	}
	return cs
}

func (e *env) bounds(partition string) ports.LogBounds {
	e.t.Helper()
	b, err := e.s.LogBounds(e.ctx, partition)
	if err != nil {
		e.t.Fatalf("LogBounds: %v", err)
	}
	return b
}

type schemaType = schema.ColumnType

const (
	schemaString  = schema.TypeString
	schemaInteger = schema.TypeInteger
)

// jsonEqual compares JSON documents semantically (PostgreSQL's JSONB
// normalizes whitespace and key order).
func jsonEqual(got []byte, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
