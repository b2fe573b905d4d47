package contract

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// engineGroups are the engine case groups, in run order.
func engineGroups() []group {
	return []group{
		{"Engine", []testCase{
			{"FenceTriggerRefusesRawInsert", testFenceTrigger},
			{"PhysicalLayoutMismatch", testPhysicalLayout},
			{"ScopeReadsUseIndexes", testPlans},
		}},
		{"Bulk", []testCase{
			{"SeedRowsForOneScope", testBulkSeed},
		}},
	}
}

func needEngine(t *testing.T, h Harness) *Engine {
	t.Helper()
	if h.Engine == nil || h.Engine.Exec == nil {
		t.Skip("engine-only case")
	}
	return h.Engine
}

const rawCommitInsert = `INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) VALUES (?, ?, ?, ?, ?, ?, ?)`

func testFenceTrigger(t *testing.T, h Harness) {
	eng := needEngine(t, h)
	e := open(t, h)
	raw := func(seq int64, wv any) error {
		return eng.Exec(e.ctx, e.s, rawCommitInsert, "pf", seq, "old", fmt.Sprint("raw-", seq), "actor", int64(1), wv)
	}
	// No fence row: an old writer's NULL is accepted.
	must(t, raw(100, nil))
	must(t, raw(101, int64(1)))
	_, err := e.s.DeclareCheckpoint(e.ctx, decl("pf", "proj", 2), 1)
	must(t, err)
	for _, tt := range []struct {
		name string
		seq  int64
		wv   any
	}{{"NULL writer version", 102, nil}, {"lower writer version", 103, int64(1)}} {
		err := raw(tt.seq, tt.wv)
		if err == nil {
			t.Fatalf("%s: raw insert accepted under the fence", tt.name)
		}
		if !strings.Contains(err.Error(), string(syncerr.StorageWriterFenceRejected)) {
			t.Fatalf("%s: refused with %v, want the trigger's %s", tt.name, err, syncerr.StorageWriterFenceRejected)
		}
	}
	must(t, raw(104, int64(2)))
	must(t, raw(105, int64(3)))
	// Other partitions stay unfenced.
	must(t, eng.Exec(e.ctx, e.s, rawCommitInsert, "other", int64(1), "old", "raw", "actor", int64(1), nil))
}

// notesDDL renders the notes table (not materialized: meta columns only)
// for the dialect, with overrides of column definitions and the key.
func notesDDL(dialect string, override map[string]string, drop string, pk string) string {
	types := map[string]string{"version": "INTEGER", "scopes": "TEXT", "payload": "BLOB"}
	if dialect == "postgres" {
		types = map[string]string{"version": "BIGINT", "scopes": "JSONB", "payload": "BYTEA"}
	}
	cols := []struct{ name, def string }{
		{"_sync_partition", "TEXT NOT NULL"},
		{"_sync_row_id", "TEXT NOT NULL"},
		{"_sync_server_version", types["version"] + " NOT NULL"},
		{"_sync_scopes", types["scopes"] + " NOT NULL"},
		{"_sync_payload", types["payload"] + " NOT NULL"},
		{"_sync_column_versions", types["payload"]},
	}
	var defs []string
	for _, c := range cols {
		if c.name == drop {
			continue
		}
		def := c.def
		if o, ok := override[c.name]; ok {
			def = o
		}
		defs = append(defs, fmt.Sprintf(`"%s" %s`, c.name, def))
	}
	if pk == "" {
		pk = `"_sync_partition", "_sync_row_id"`
	}
	defs = append(defs, "PRIMARY KEY ("+pk+")")
	return `CREATE TABLE "notes" (` + strings.Join(defs, ", ") + `)`
}

func testPhysicalLayout(t *testing.T, h Harness) {
	eng := needEngine(t, h)
	versionType, payloadType := "INTEGER", "BLOB"
	if eng.Dialect == "postgres" {
		versionType, payloadType = "BIGINT", "BYTEA"
	}
	_ = payloadType
	tests := []struct {
		name string
		ddl  string // "" leaves the table dropped
		want map[string]string
	}{
		{"missing table", "", map[string]string{"table": "notes", "reason": "missing_table"}},
		{"missing meta column", notesDDL(eng.Dialect, nil, "_sync_column_versions", ""),
			map[string]string{"table": "notes", "column": "_sync_column_versions", "reason": "missing_column"}},
		{"meta column type", notesDDL(eng.Dialect, map[string]string{"_sync_server_version": "TEXT NOT NULL"}, "", ""),
			map[string]string{"table": "notes", "column": "_sync_server_version", "reason": "type", "expected": versionType, "actual": "TEXT"}},
		{"meta column nullability", notesDDL(eng.Dialect, map[string]string{"_sync_payload": payloadType}, "", ""),
			map[string]string{"table": "notes", "column": "_sync_payload", "reason": "nullability", "expected": "not_null", "actual": "nullable"}},
		{"primary key", notesDDL(eng.Dialect, nil, "", `"_sync_row_id"`),
			map[string]string{"table": "notes", "reason": "primary_key"}},
		{"missing app column", `ALTER TABLE "tasks" DROP COLUMN "done"`,
			map[string]string{"table": "tasks", "column": "done", "reason": "missing_column"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := open(t, h)
			if tt.want["table"] == "notes" {
				must(t, eng.Exec(e.ctx, e.s, `DROP TABLE "notes"`))
			}
			if tt.ddl != "" {
				must(t, eng.Exec(e.ctx, e.s, tt.ddl))
			}
			for range 2 { // refusing writes nothing, so a second open refuses the same way
				_, err := e.reopen(mustSchema(t, irV1), nil)
				se := wantCode(t, err, syncerr.StoragePhysicalLayoutMismatch)
				d := details(t, se)
				for k, v := range tt.want {
					if !strings.EqualFold(d[k], v) {
						t.Fatalf("details = %v, want %s=%s", d, k, v)
					}
				}
				if tt.want["reason"] == "primary_key" && d["column"] != "_sync_partition" && d["column"] != "_sync_row_id" {
					t.Fatalf("primary key refusal names column %q", d["column"])
				}
				if strings.Contains(se.Message, "notes") {
					t.Fatalf("message names the table: %q", se.Message)
				}
			}
		})
	}
}

// planTables names what an access to each scope index must be keyed on.
// Joins from the candidates to the log and the row tables are left to the
// planner's costing (a hash join over a small partition is a fair plan);
// full scans are refused everywhere.
var planTables = map[string]string{
	"sync_change_scopes": "value",
	"sync_row_scopes":    "value",
}

var (
	sqliteScan      = regexp.MustCompile(`\bSCAN (\S+)`)
	sqliteCoroutine = regexp.MustCompile(`^\s*(?:CO-ROUTINE|MATERIALIZE) (\S+)`)
	sqliteSearch    = regexp.MustCompile(`\bSEARCH \S+ USING (?:COVERING |PRIMARY KEY )?INDEX (\S+) \((.*)\)`)
	pgSeqScan       = regexp.MustCompile(`Seq Scan on (\S+)`)
	pgNode          = regexp.MustCompile(`(?:Index Scan|Index Only Scan)(?: Backward)? using \S+ on (\S+)|Bitmap Heap Scan on (\S+)`)
)

// planProblems returns the full scans and unkeyed accesses in plans.
func planProblems(dialect string, plans []string) []string {
	var out []string
	if dialect == "postgres" {
		for i, line := range plans {
			if m := pgSeqScan.FindStringSubmatch(line); m != nil {
				out = append(out, "sequential scan of "+m[1])
				continue
			}
			m := pgNode.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			table := m[1] + m[2]
			key, ok := planTables[table]
			if !ok {
				continue
			}
			depth := len(line) - len(strings.TrimLeft(line, " "))
			cond := ""
			for _, d := range plans[i+1:] {
				dd := len(d) - len(strings.TrimLeft(d, " "))
				if dd <= depth || strings.Contains(d, "->") {
					break
				}
				t := strings.TrimSpace(d)
				if strings.HasPrefix(t, "Index Cond:") || strings.HasPrefix(t, "Recheck Cond:") {
					cond += t
				}
			}
			if !strings.Contains(cond, key) {
				out = append(out, fmt.Sprintf("%s read without %s in its index condition: %s", table, key, strings.TrimSpace(line)))
			}
		}
		return out
	}
	named := map[string]bool{"CONSTANT": true}
	for _, line := range plans {
		if m := sqliteCoroutine.FindStringSubmatch(line); m != nil {
			named[m[1]] = true
		}
	}
	for _, line := range plans {
		if m := sqliteScan.FindStringSubmatch(line); m != nil && !named[m[1]] {
			out = append(out, "full scan: "+strings.TrimSpace(line))
		}
		if m := sqliteSearch.FindStringSubmatch(line); m != nil {
			for table, key := range planTables {
				if strings.Contains(m[1], table) && !strings.Contains(m[2], key+"=") {
					out = append(out, fmt.Sprintf("%s read without %s: %s", table, key, strings.TrimSpace(line)))
				}
			}
		}
	}
	return out
}

func testPlans(t *testing.T, h Harness) {
	eng := needEngine(t, h)
	if eng.Plans == nil {
		t.Skip("no plan hook")
	}
	e := open(t, h)
	// Enough rows in enough scopes that the planner's statistics favour
	// selective paths, as in production.
	for c := range 20 {
		var rows []task
		for i := range 100 {
			rows = append(rows, task{id: fmt.Sprintf("row-%02d-%03d", c, i), project: fmt.Sprint("p", c), owner: fmt.Sprint("o", i%10)})
		}
		e.commitTasks("p1", int64(c), rows, nil)
	}
	must(t, eng.Exec(e.ctx, e.s, "ANALYZE"))
	for _, tt := range []struct {
		name   string
		filter map[string][]string
	}{
		{"one variable", map[string][]string{"project": {"p3"}}},
		{"several values", map[string][]string{"project": {"p3", "p7"}}},
		{"two variables", map[string][]string{"project": {"p3", "p4"}, "owner": {"o1"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plans, err := eng.Plans(e.ctx, e.s, "p1",
				ports.CommitWindow{Table: "tasks", ScopeFilter: tt.filter, AfterSeq: 2, ThroughSeq: 15, LimitChanges: 100},
				ports.RowScan{Table: "tasks", ScopeFilter: tt.filter, AfterRowID: "row-03-010", Limit: 100})
			must(t, err)
			if len(plans) == 0 {
				t.Fatal("no plans returned")
			}
			if p := planProblems(eng.Dialect, plans); len(p) > 0 {
				t.Fatalf("%s\nin plans:\n%s", strings.Join(p, "\n"), strings.Join(plans, "\n"))
			}
		})
	}
}

func testBulkSeed(t *testing.T, h Harness) {
	n := h.BulkRows
	if n < 0 {
		t.Skip("bulk seed disabled by the harness")
	}
	if n == 0 {
		n = 100_000
	}
	if raceEnabled || testing.Short() {
		n = min(n, 5_000)
	}
	e := open(t, h)
	const batch = 2_000
	start := time.Now()
	var seq int64
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		err := e.push("p1", func(tx ports.PushTx) error {
			changes := make([]commit.Change, 0, hi-lo)
			for i := lo; i < hi; i++ {
				k := task{id: fmt.Sprintf("row-%07d", i), project: "big", owner: fmt.Sprint("o", i%7)}
				if err := tx.UpsertRow(e.ctx, "tasks", k.write(i-lo)); err != nil {
					return err
				}
				changes = append(changes, k.upsert())
			}
			var err error
			seq, err = tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: int64(lo), ActorID: "seed", ClientID: "seed", ClientCommitID: fmt.Sprint(lo), Changes: changes})
			return err
		})
		must(t, err)
	}
	elapsed := time.Since(start)
	// Timings are reported, never asserted: speed lives in benchmarks
	// and bench/RESULTS.md.
	t.Logf("seeded %d rows in %d commits in %v", n, seq, elapsed)
	// Reads stay bounded by their limits.
	start = time.Now()
	rows, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"big"}}, AfterRowID: fmt.Sprintf("row-%07d", n/2), Limit: 1000})
	must(t, err)
	if len(rows) != min(1000, n-n/2-1) || rows[0].RowID != fmt.Sprintf("row-%07d", n/2+1) {
		t.Fatalf("middle page = %d rows from %q", len(rows), rows[0].RowID)
	}
	cs := e.window("p1", map[string][]string{"project": {"big"}, "owner": {"o3"}}, seq-1, seq, 10)
	if len(cs) != 1 || cs[0].Seq != seq {
		t.Fatalf("last window = %v", seqsOf(cs))
	}
	t.Logf("page and window read in %v", time.Since(start))
}
