package contract

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// logGroups are the log case groups, in run order.
func logGroups() []group {
	return []group{
		{"Log", []testCase{
			{"WindowFiltersByScope", testWindowFilters},
			{"WindowLimitKeepsCommitsWhole", testWindowLimit},
			{"WindowRequiresScopeAndLimit", testWindowArgs},
			{"WindowOverDenseAndSparseRuns", testWindowDenseSparse},
			{"RangeReadsWholeCommits", testRangeWhole},
			{"RangeLimitLeavesCommitsOutWhole", testRangeLimit},
			{"CommitSeqBefore", testCommitSeqBefore},
			{"LatestScopedChangeIsTheScopePin", testLatestScopedChange},
			{"ProbeCountsChangesAndFindsDeletes", testProbeWindow},
			{"CountWindowChangesBoundsTheProbe", testCountWindow},
		}},
		{"Rows", []testCase{
			{"ScanKeysetInByteOrder", testScanByteOrder},
			{"ScanFiltersByScope", testScanFilters},
			{"ScanRequiresScopeAndLimit", testScanArgs},
			{"GetRowIsPartitionLocal", testGetRowPartitions},
		}},
		{"Prune", []testCase{
			{"RefusesStaleEpoch", testPruneStaleEpoch},
			{"AtomicThroughHorizon", testPruneAtomic},
			{"HorizonIsMonotonic", testPruneMonotonic},
			{"ConcurrentWithPushes", testPruneConcurrent},
		}},
	}
}

// logFixture writes five tasks commits and one notes commit to p1:
//
//	1: a(p1,o1)            2: b(p2,o1)          3: notes 1(p1)
//	4: c(p1,o2) d(p2,o2)   5: delete a(p1,o1)   6: e(p3,o1) f(p1,o1) g(p1,o3)
func logFixture(e *env) {
	a := task{id: "a", project: "p1", owner: "o1"}
	e.commitTasks("p1", 100, []task{a}, nil)
	e.commitTasks("p1", 200, []task{{id: "b", project: "p2", owner: "o1"}}, nil)
	must(e.t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "notes", noteWrite(1, "p1")); err != nil {
			return err
		}
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 300, ActorID: "a", ClientID: "c", ClientCommitID: "n", Changes: []commit.Change{noteUpsert(1, "p1")}})
		return err
	}))
	e.commitTasks("p1", 400, []task{{id: "c", project: "p1", owner: "o2"}, {id: "d", project: "p2", owner: "o2"}}, nil)
	e.commitTasks("p1", 500, nil, []task{a})
	e.commitTasks("p1", 600, []task{{id: "e", project: "p3", owner: "o1"}, {id: "f", project: "p1", owner: "o1"}, {id: "g", project: "p1", owner: "o3"}}, nil)
}

func testWindowFilters(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	tests := []struct {
		name           string
		filter         map[string][]string
		after, through int64
		want           []string
	}{
		{"one variable", map[string][]string{"project": {"p1"}}, 0, 6, []string{"1:a", "4:c", "5:a", "6:f", "6:g"}},
		{"several values", map[string][]string{"project": {"p2", "p3"}}, 0, 6, []string{"2:b", "4:d", "6:e"}},
		{"two variables", map[string][]string{"project": {"p1"}, "owner": {"o1"}}, 0, 6, []string{"1:a", "5:a", "6:f"}},
		{"two variables several values", map[string][]string{"project": {"p1", "p2"}, "owner": {"o2", "o3"}}, 0, 6, []string{"4:c", "4:d", "6:g"}},
		{"other variable alone", map[string][]string{"owner": {"o1"}}, 0, 6, []string{"1:a", "2:b", "5:a", "6:e", "6:f"}},
		{"after is exclusive", map[string][]string{"project": {"p1"}}, 1, 6, []string{"4:c", "5:a", "6:f", "6:g"}},
		{"through is inclusive", map[string][]string{"project": {"p1"}}, 0, 4, []string{"1:a", "4:c"}},
		{"empty window", map[string][]string{"project": {"p1"}}, 6, 6, nil},
		{"unknown value", map[string][]string{"project": {"zz"}}, 0, 6, nil},
		{"empty value list", map[string][]string{"project": {}}, 0, 6, nil},
		{"undeclared variable", map[string][]string{"team": {"p1"}}, 0, 6, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := e.window("p1", tt.filter, tt.after, tt.through, 100)
			if got := changeIDs(cs); !equalStrings(got, tt.want) {
				t.Fatalf("window = %v, want %v", got, tt.want)
			}
			for i := 1; i < len(cs); i++ {
				if cs[i].Seq <= cs[i-1].Seq {
					t.Fatalf("commits not oldest first: %v", seqsOf(cs))
				}
			}
		})
	}
	// The log is partition-local.
	if cs := e.window("p2", map[string][]string{"project": {"p1"}}, 0, 6, 100); len(cs) != 0 {
		t.Fatalf("other partition window = %v", changeIDs(cs))
	}
}

func testWindowLimit(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	tests := []struct {
		name  string
		after int64
		limit int
		want  []string
	}{
		{"stops at the commit reaching the limit", 0, 2, []string{"1:a", "4:c"}},
		{"one", 0, 1, []string{"1:a"}},
		{"oversize commit alone", 5, 1, []string{"6:f", "6:g"}},
		{"oversize commit completes a page", 4, 2, []string{"5:a", "6:f", "6:g"}},
		{"large limit", 0, 1000, []string{"1:a", "4:c", "5:a", "6:f", "6:g"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := e.window("p1", map[string][]string{"project": {"p1"}}, tt.after, 6, tt.limit)
			if got := changeIDs(cs); !equalStrings(got, tt.want) {
				t.Fatalf("window = %v, want %v", got, tt.want)
			}
		})
	}
}

// denseSparseFixture writes 800 commits to p1 and returns each commit's
// tasks changes in idx order (nil for a notes commit):
//
//	1–320   nearly every commit is project p1's (a store may read such a
//	        run by seq range): every 15th is p2's, every 40th holds p2, p1,
//	        p1 changes;
//	321–480 p1 sparse: p2's but every 9th;
//	481–800 p1 dense again, every 11th deleting a row of the first run
//	        before its upsert;
//	60, 660 notes commits of p1, which no tasks window holds.
func denseSparseFixture(e *env) [][]task {
	var log [][]task
	for i := 1; i <= 800; i++ {
		own := fmt.Sprintf("o%d", i%3)
		p1 := task{id: fmt.Sprintf("t%d", i), project: "p1", owner: own}
		p2 := task{id: fmt.Sprintf("u%d", i), project: "p2", owner: own}
		var ups, dels []task
		switch {
		case i == 60 || i == 660:
			must(e.t, e.push("p1", func(tx ports.PushTx) error {
				if err := tx.UpsertRow(e.ctx, "notes", noteWrite(int64(i), "p1")); err != nil {
					return err
				}
				_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: int64(i), ActorID: "a", ClientID: "c", ClientCommitID: fmt.Sprint("n", i), Changes: []commit.Change{noteUpsert(int64(i), "p1")}})
				return err
			}))
			log = append(log, nil)
			continue
		case i <= 320 && i%40 == 0:
			ups = []task{p2, p1, {id: fmt.Sprintf("v%d", i), project: "p1", owner: "o1"}}
		case i <= 320 && i%15 == 0, i > 320 && i <= 480 && i%9 != 0:
			ups = []task{p2}
		case i > 480 && i%11 == 0:
			dels = []task{{id: fmt.Sprintf("t%d", i-480), project: "p1", owner: fmt.Sprintf("o%d", (i-480)%3)}}
			ups = []task{p1}
		default:
			ups = []task{p1}
		}
		if seq := e.commitTasks("p1", int64(i), ups, dels); seq != int64(i) {
			e.t.Fatalf("commit %d got seq %d", i, seq)
		}
		log = append(log, append(dels, ups...))
	}
	return log
}

// modelWindow is the window rule over the fixture's log: oldest first,
// each commit with a matching change whole, stopping at the commit that
// reaches the limit.
func modelWindow(log [][]task, filter map[string][]string, after, through int64, limit int) []string {
	var out []string
	for seq := after + 1; seq <= through && len(out) < limit; seq++ {
		for _, k := range log[seq-1] {
			if matches := func() bool {
				for v, vals := range filter {
					got := map[string]string{"project": k.project, "owner": k.owner}[v]
					if !slices.Contains(vals, got) {
						return false
					}
				}
				return true
			}(); matches {
				out = append(out, fmt.Sprintf("%d:%s", seq, k.id))
			}
		}
	}
	return out
}

func testWindowDenseSparse(t *testing.T, h Harness) {
	e := open(t, h)
	log := denseSparseFixture(e)
	p1 := map[string][]string{"project": {"p1"}}
	tests := []struct {
		name           string
		filter         map[string][]string
		after, through int64
		limit          int
	}{
		{"whole log", p1, 0, 800, 1000},
		{"one large page of a dense run", p1, 0, 800, 300},
		{"a small page of a dense run", p1, 0, 800, 50},
		{"dense run into the sparse one", p1, 250, 800, 300},
		{"sparse run into the dense one", p1, 330, 800, 300},
		{"stops inside a many-change commit's page", p1, 30, 800, 279},
		{"limit one", p1, 0, 800, 1},
		{"second variable filtered", map[string][]string{"project": {"p1"}, "owner": {"o1"}}, 0, 800, 1000},
		{"second variable limited", map[string][]string{"project": {"p1"}, "owner": {"o2"}}, 10, 790, 260},
		{"two values", map[string][]string{"project": {"p1", "p2"}}, 0, 800, 1000},
		{"two values limited", map[string][]string{"project": {"p2", "p1"}}, 300, 700, 270},
		{"the other value alone", map[string][]string{"project": {"p2"}}, 0, 800, 1000},
		{"through inside a dense run", p1, 0, 277, 1000},
	}
	t.Run("every bound and limit", func(t *testing.T) {
		for _, after := range []int64{0, 59, 60, 250, 319, 330, 470, 500, 655} {
			for _, through := range []int64{650, 800} {
				for _, limit := range []int{1, 63, 64, 100, 255, 256, 257, 300, 513, 1000} {
					for _, filter := range []map[string][]string{p1, {"project": {"p1", "p2"}}} {
						want := modelWindow(log, filter, after, through, limit)
						if got := changeIDs(e.window("p1", filter, after, through, limit)); !equalStrings(got, want) {
							t.Fatalf("window %v (%d, %d] limit %d = %v\nwant %v", filter, after, through, limit, got, want)
						}
					}
				}
			}
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := modelWindow(log, tt.filter, tt.after, tt.through, tt.limit)
			cs := e.window("p1", tt.filter, tt.after, tt.through, tt.limit)
			if got := changeIDs(cs); !equalStrings(got, want) {
				t.Fatalf("window = %v\nwant     %v", got, want)
			}
			for i, c := range cs {
				if i > 0 && c.Seq <= cs[i-1].Seq {
					t.Fatalf("commits not oldest first: %v", seqsOf(cs))
				}
				if c.CreatedAtMs != c.Seq || c.ActorID != "actor" || c.ClientID != "" || c.ClientCommitID != "" {
					t.Fatalf("commit %d header = %d %q %q %q", c.Seq, c.CreatedAtMs, c.ActorID, c.ClientID, c.ClientCommitID)
				}
			}
		})
	}
}

func testWindowArgs(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	_, err := e.s.ReadCommitWindow(e.ctx, "p1", ports.CommitWindow{Table: "tasks", ThroughSeq: 6, LimitChanges: 10})
	wantCode(t, err, syncerr.StorageScanRequiresScope)
	_, err = e.s.ReadCommitWindow(e.ctx, "p1", ports.CommitWindow{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, ThroughSeq: 6})
	wantCode(t, err, syncerr.StorageInvalidLimit)
}

// The scope pin of §4.7: the newest commit whose change to the table
// carries one of the variable's values, deletes included, other tables
// and partitions and pruned commits not.
func testLatestScopedChange(t *testing.T, h Harness) {
	e := open(t, h)
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	logFixture(e)
	tests := []struct {
		name     string
		variable string
		values   []string
		through  int64
		want     int64
	}{
		{"newest commit of the value", "project", []string{"p1"}, 6, 6},
		{"a delete counts", "project", []string{"p1"}, 5, 5},
		{"other tables do not", "project", []string{"p1"}, 3, 1},
		{"through is inclusive", "project", []string{"p2"}, 4, 4},
		{"largest over the values", "project", []string{"p2", "p3"}, 6, 6},
		{"values repeated", "project", []string{"p2", "p2"}, 6, 4},
		{"other variable", "owner", []string{"o2"}, 6, 4},
		{"unknown value", "project", []string{"zz"}, 6, 0},
		{"nothing at or below", "project", []string{"p1"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.s.LatestScopedChange(e.ctx, "p1", ports.ScopedChangeQuery{Table: "tasks", Variable: tt.variable, Values: tt.values, ThroughSeq: tt.through})
			must(t, err)
			if got != tt.want {
				t.Fatalf("LatestScopedChange = %d, want %d", got, tt.want)
			}
		})
	}
	if got, err := e.s.LatestScopedChange(e.ctx, "p2", ports.ScopedChangeQuery{Table: "tasks", Variable: "project", Values: []string{"p1"}, ThroughSeq: 6}); err != nil || got != 0 {
		t.Fatalf("other partition = %d %v", got, err)
	}
	_, err = e.s.LatestScopedChange(e.ctx, "p1", ports.ScopedChangeQuery{Table: "tasks", Variable: "project", ThroughSeq: 6})
	wantCode(t, err, syncerr.StorageScanRequiresScope)
	// Pruned entries are gone: the caller raises the pin to the horizon.
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 5})
	must(t, err)
	if got, err := e.s.LatestScopedChange(e.ctx, "p1", ports.ScopedChangeQuery{Table: "tasks", Variable: "project", Values: []string{"p2"}, ThroughSeq: 6}); err != nil || got != 0 {
		t.Fatalf("after prune = %d %v, want 0", got, err)
	}
}

// The far-behind probe: matching changes counted up to the limit, and
// whether any matching change of the whole window is a delete.
func testProbeWindow(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	tests := []struct {
		name           string
		filter         map[string][]string
		after, through int64
		limit          int
		want           ports.WindowSummary
	}{
		{"counts matching changes", map[string][]string{"project": {"p1"}}, 0, 6, 100, ports.WindowSummary{Changes: 5, Deletes: true}},
		{"stops counting past the limit", map[string][]string{"project": {"p1"}}, 0, 6, 2, ports.WindowSummary{Changes: 3, Deletes: true}},
		{"limit zero", map[string][]string{"project": {"p1"}}, 5, 6, 0, ports.WindowSummary{Changes: 1}},
		{"no delete after it", map[string][]string{"project": {"p1"}}, 5, 6, 100, ports.WindowSummary{Changes: 2}},
		{"a delete past the limit is found", map[string][]string{"project": {"p1"}}, 3, 6, 0, ports.WindowSummary{Changes: 1, Deletes: true}},
		{"other values", map[string][]string{"project": {"p2"}}, 0, 6, 100, ports.WindowSummary{Changes: 2}},
		{"two variables", map[string][]string{"project": {"p1"}, "owner": {"o1"}}, 0, 6, 100, ports.WindowSummary{Changes: 3, Deletes: true}},
		{"through is inclusive", map[string][]string{"project": {"p1"}}, 0, 4, 100, ports.WindowSummary{Changes: 2}},
		{"empty window", map[string][]string{"project": {"p1"}}, 6, 6, 100, ports.WindowSummary{}},
		{"unknown value", map[string][]string{"project": {"zz"}}, 0, 6, 100, ports.WindowSummary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.s.ProbeCommitWindow(e.ctx, "p1", ports.WindowProbe{Table: "tasks", ScopeFilter: tt.filter, AfterSeq: tt.after, ThroughSeq: tt.through, Limit: tt.limit})
			must(t, err)
			if got != tt.want {
				t.Fatalf("ProbeCommitWindow = %+v, want %+v", got, tt.want)
			}
		})
	}
	if got, err := e.s.ProbeCommitWindow(e.ctx, "p2", ports.WindowProbe{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, ThroughSeq: 6, Limit: 10}); err != nil || got != (ports.WindowSummary{}) {
		t.Fatalf("other partition = %+v %v", got, err)
	}
	_, err := e.s.ProbeCommitWindow(e.ctx, "p1", ports.WindowProbe{Table: "tasks", ThroughSeq: 6, Limit: 10})
	wantCode(t, err, syncerr.StorageScanRequiresScope)
	_, err = e.s.ProbeCommitWindow(e.ctx, "p1", ports.WindowProbe{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, ThroughSeq: 6, Limit: -1})
	wantCode(t, err, syncerr.StorageInvalidLimit)
}

// The far-behind pre-test: every change to the table in the window,
// whatever its scopes, counted up to the limit; never fewer than the
// probe counts.
func testCountWindow(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	c, ok := e.s.(ports.WindowChangeCounter)
	if !ok {
		t.Fatalf("%T does not count window changes", e.s)
	}
	tests := []struct {
		name           string
		table          string
		after, through int64
		limit          int
		want           int
	}{
		{"every change to the table, any scope", "tasks", 0, 6, 100, 8},
		{"other tables are not counted", "notes", 0, 6, 100, 1},
		{"stops counting past the limit", "tasks", 0, 6, 3, 4},
		{"limit zero", "tasks", 5, 6, 0, 1},
		{"after is exclusive, through inclusive", "tasks", 4, 5, 100, 1},
		{"a commit of several changes counts each", "tasks", 5, 6, 100, 3},
		{"empty window", "tasks", 6, 6, 100, 0},
		{"unknown table", "nope", 0, 6, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.CountWindowChanges(e.ctx, "p1", ports.WindowProbe{Table: tt.table, AfterSeq: tt.after, ThroughSeq: tt.through, Limit: tt.limit})
			must(t, err)
			if got != tt.want {
				t.Fatalf("CountWindowChanges = %d, want %d", got, tt.want)
			}
		})
	}
	for _, f := range []map[string][]string{{"project": {"p1"}}, {"project": {"p2"}}, {"project": {"p1"}, "owner": {"o1"}}} {
		sum, err := e.s.ProbeCommitWindow(e.ctx, "p1", ports.WindowProbe{Table: "tasks", ScopeFilter: f, ThroughSeq: 6, Limit: 100})
		must(t, err)
		if n, err := c.CountWindowChanges(e.ctx, "p1", ports.WindowProbe{Table: "tasks", ThroughSeq: 6, Limit: 100}); err != nil || n < sum.Changes {
			t.Fatalf("count %d %v below the probe's %d for %v", n, err, sum.Changes, f)
		}
	}
	if got, err := c.CountWindowChanges(e.ctx, "p2", ports.WindowProbe{Table: "tasks", ThroughSeq: 6, Limit: 10}); err != nil || got != 0 {
		t.Fatalf("other partition = %d %v", got, err)
	}
	_, err := c.CountWindowChanges(e.ctx, "p1", ports.WindowProbe{Table: "tasks", ThroughSeq: 6, Limit: -1})
	wantCode(t, err, syncerr.StorageInvalidLimit)
}

func testRangeWhole(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	sp, err := e.s.ReadCommitRange(e.ctx, "p1", ports.CommitRange{AfterSeq: 0, ThroughSeq: 6, LimitChanges: 100})
	must(t, err)
	want := []string{"1:tasks/a", "2:tasks/b", "3:notes/1", "4:tasks/c", "4:tasks/d", "5:tasks/a", "6:tasks/e", "6:tasks/f", "6:tasks/g"}
	if got := tableChangeIDs(sp.Commits); !equalStrings(got, want) || sp.ThroughSeq != 6 {
		t.Fatalf("range = %v through %d, want %v through 6", got, sp.ThroughSeq, want)
	}
	// Every change comes whole: its op, version, scopes and payload as the
	// scoped window reads them.
	win := e.window("p1", map[string][]string{"project": {"p1"}}, 0, 6, 100)
	byKey := map[string]commit.Change{}
	for _, c := range sp.Commits {
		if c.ActorID == "" || c.CreatedAtMs == 0 {
			t.Fatalf("commit %d without its metadata: %+v", c.Seq, c)
		}
		for _, ch := range c.Changes {
			byKey[fmt.Sprintf("%d:%s", c.Seq, ch.RowID)] = ch
		}
	}
	for _, c := range win {
		for _, ch := range c.Changes {
			got := byKey[fmt.Sprintf("%d:%s", c.Seq, ch.RowID)]
			if got.Op != ch.Op || got.RowVersion != ch.RowVersion || string(got.Row) != string(ch.Row) || fmt.Sprint(got.Scopes) != fmt.Sprint(ch.Scopes) {
				t.Fatalf("range change %d:%s = %+v, window has %+v", c.Seq, ch.RowID, got, ch)
			}
		}
	}
	if sp, err := e.s.ReadCommitRange(e.ctx, "p2", ports.CommitRange{ThroughSeq: 6, LimitChanges: 100}); err != nil || len(sp.Commits) != 0 {
		t.Fatalf("other partition range = %v, %v", tableChangeIDs(sp.Commits), err)
	}
	_, err = e.s.ReadCommitRange(e.ctx, "p1", ports.CommitRange{ThroughSeq: 6})
	wantCode(t, err, syncerr.StorageInvalidLimit)
}

func testRangeLimit(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	tests := []struct {
		name           string
		after, through int64
		limit          int
		want           []int64
		complete       int64
	}{
		{"within the limit", 0, 6, 9, []int64{1, 2, 3, 4, 5, 6}, 6},
		{"stops before the commit past the limit", 0, 6, 4, []int64{1, 2, 3}, 3},
		{"a commit exactly at the limit", 0, 6, 5, []int64{1, 2, 3, 4}, 4},
		{"an oversize first commit is left out", 5, 6, 2, nil, 5},
		{"after is exclusive, through inclusive", 1, 4, 10, []int64{2, 3, 4}, 4},
		{"empty range", 6, 6, 10, nil, 6},
		{"past the log", 6, 9, 10, nil, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, err := e.s.ReadCommitRange(e.ctx, "p1", ports.CommitRange{AfterSeq: tt.after, ThroughSeq: tt.through, LimitChanges: tt.limit})
			must(t, err)
			if got := seqsOf(sp.Commits); fmt.Sprint(got) != fmt.Sprint(tt.want) && !(len(got) == 0 && len(tt.want) == 0) || sp.ThroughSeq != tt.complete {
				t.Fatalf("range = %v through %d, want %v through %d", got, sp.ThroughSeq, tt.want, tt.complete)
			}
		})
	}
}

func tableChangeIDs(cs []commit.Commit) []string {
	var out []string
	for _, c := range cs {
		for _, ch := range c.Changes {
			out = append(out, fmt.Sprintf("%d:%s/%s", c.Seq, ch.Table, ch.RowID))
		}
	}
	return out
}

func testCommitSeqBefore(t *testing.T, h Harness) {
	e := open(t, h)
	logFixture(e)
	for _, tt := range []struct{ ms, want int64 }{{100, 0}, {101, 1}, {250, 2}, {600, 5}, {10_000, 6}} {
		got, err := e.s.CommitSeqBefore(e.ctx, "p1", tt.ms)
		must(t, err)
		if got != tt.want {
			t.Errorf("CommitSeqBefore(%d) = %d, want %d", tt.ms, got, tt.want)
		}
	}
	if got, err := e.s.CommitSeqBefore(e.ctx, "nobody", 10_000); err != nil || got != 0 {
		t.Fatalf("unknown partition = %d, %v", got, err)
	}
}

func testScanByteOrder(t *testing.T, h Harness) {
	e := open(t, h)
	ids := []string{"b", "B", "a", "aa", "a-", "é", "z", "10", "9", "Z", "a b"}
	var rows []task
	for _, id := range ids {
		rows = append(rows, task{id: id, project: "p1", owner: "o1"})
	}
	e.commitTasks("p1", 1, rows, nil)
	want := sortedCopy(ids) // Go string order is byte order
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, AfterRowID: after, Limit: 3})
		must(t, err)
		if len(page) > 3 {
			t.Fatalf("page of %d rows for limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		got = append(got, rowIDs(page)...)
		after = page[len(page)-1].RowID
		if pages > len(ids) {
			t.Fatal("scan does not terminate")
		}
	}
	if !equalStrings(got, want) {
		t.Fatalf("keyset scan = %q, want byte order %q", got, want)
	}
}

func testScanFilters(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{
		{id: "a", project: "p1", owner: "o1"},
		{id: "b", project: "p2", owner: "o1"},
		{id: "c", project: "p1", owner: "o2"},
		{id: "d", project: "p2", owner: "o2"},
		{id: "e", project: "p3", owner: "o3"},
	}, nil)
	e.commitTasks("p1", 2, []task{{id: "c", project: "p1", owner: "o2", version: 2}}, nil)
	tests := []struct {
		name   string
		filter map[string][]string
		want   []string
	}{
		{"one variable", map[string][]string{"project": {"p1"}}, []string{"a", "c"}},
		{"several values", map[string][]string{"project": {"p1", "p3"}}, []string{"a", "c", "e"}},
		{"two variables", map[string][]string{"project": {"p1", "p2"}, "owner": {"o2"}}, []string{"c", "d"}},
		{"no match", map[string][]string{"project": {"p9"}}, nil},
		{"empty value list", map[string][]string{"owner": {}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: tt.filter, Limit: 100})
			must(t, err)
			if got := rowIDs(rows); !equalStrings(got, tt.want) {
				t.Fatalf("scan = %v, want %v", got, tt.want)
			}
		})
	}
	rows, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"owner": {"o2"}}, Limit: 1, AfterRowID: "a"})
	must(t, err)
	if len(rows) != 1 || rows[0].RowID != "c" || rows[0].Version != 2 || rows[0].Scopes["project"] != "p1" || rows[0].Scopes["owner"] != "o2" {
		t.Fatalf("scanned row = %+v", rows)
	}
	want := task{id: "c", project: "p1", owner: "o2", version: 2}.write(0).Payload
	if string(rows[0].Payload) != string(want) {
		t.Fatal("scanned payload is not the stored bytes")
	}
	// Rows of the non-materialized table scan the same way.
	must(t, e.push("p1", func(tx ports.PushTx) error {
		for _, id := range []int64{3, 1, 2} {
			if err := tx.UpsertRow(e.ctx, "notes", noteWrite(id, "p1")); err != nil {
				return err
			}
		}
		return nil
	}))
	notes, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "notes", ScopeFilter: map[string][]string{"project": {"p1"}}, Limit: 10})
	must(t, err)
	if got := rowIDs(notes); !equalStrings(got, []string{"1", "2", "3"}) {
		t.Fatalf("notes scan = %v", got)
	}
}

func testScanArgs(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", Limit: 10})
	wantCode(t, err, syncerr.StorageScanRequiresScope)
	_, err = e.s.ScanRows(e.ctx, "p1", ports.RowScan{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}})
	wantCode(t, err, syncerr.StorageInvalidLimit)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		_, err := tx.ScanRows(e.ctx, ports.RowScan{Table: "tasks", Limit: 10})
		if syncerr.CodeOf(err) != syncerr.StorageScanRequiresScope {
			return fmt.Errorf("transaction scan without scope: %v", err)
		}
		return nil
	}))
}

func testGetRowPartitions(t *testing.T, h Harness) {
	e := open(t, h)
	e.commitTasks("p1", 1, []task{{id: "a", project: "x", owner: "o1", title: "one"}}, nil)
	e.commitTasks("p2", 1, []task{{id: "a", project: "y", owner: "o1", title: "two", version: 4}}, nil)
	r1, err := e.s.GetRow(e.ctx, "p1", "tasks", "a")
	must(t, err)
	r2, err := e.s.GetRow(e.ctx, "p2", "tasks", "a")
	must(t, err)
	if r1 == nil || r2 == nil || r1.Scopes["project"] != "x" || r2.Scopes["project"] != "y" || r2.Version != 4 {
		t.Fatalf("rows = %+v / %+v", r1, r2)
	}
	if r, err := e.s.GetRow(e.ctx, "p3", "tasks", "a"); err != nil || r != nil {
		t.Fatalf("row of an unused partition = %+v, %v", r, err)
	}
}

func testPruneStaleEpoch(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: "whatever", ThroughSeq: 1})
	wantCode(t, err, syncerr.StoragePruneEpochMismatch)
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	logFixture(e)
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch + "x", ThroughSeq: 4})
	wantCode(t, err, syncerr.StoragePruneEpochMismatch)
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: -1})
	wantCode(t, err, syncerr.StorageInvalidPruneCursor)
	// A rotation makes the captured epoch stale.
	_, err = e.s.RotateLogEpoch(e.ctx, "p1")
	must(t, err)
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 4})
	wantCode(t, err, syncerr.StoragePruneEpochMismatch)
	// Nothing was removed.
	if b := e.bounds("p1"); b.HorizonSeq != 0 || b.MaxSeq != 6 {
		t.Fatalf("bounds after refused prunes = %+v", b)
	}
	if cs := e.window("p1", map[string][]string{"project": {"p1"}}, 0, 6, 100); len(changeIDs(cs)) != 5 {
		t.Fatalf("log after refused prunes = %v", changeIDs(cs))
	}
}

func testPruneAtomic(t *testing.T, h Harness) {
	e := open(t, h)
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	logFixture(e)
	// A second tombstone above the horizon.
	e.commitTasks("p1", 700, nil, []task{{id: "c", project: "p1", owner: "o2"}})
	res, err := e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 5})
	must(t, err)
	if res != (ports.PruneResult{PreviousHorizonSeq: 0, HorizonSeq: 5, RemovedCommits: 5}) {
		t.Fatalf("prune result = %+v", res)
	}
	if b := e.bounds("p1"); b.HorizonSeq != 5 || b.MaxSeq != 7 {
		t.Fatalf("bounds = %+v", b)
	}
	if got := changeIDs(e.window("p1", map[string][]string{"project": {"p1"}}, 0, 7, 100)); !equalStrings(got, []string{"6:f", "6:g", "7:c"}) {
		t.Fatalf("window after prune = %v", got)
	}
	ns, err := e.s.ReadCommitWindow(e.ctx, "p1", ports.CommitWindow{Table: "notes", ScopeFilter: map[string][]string{"project": {"p1"}}, ThroughSeq: 7, LimitChanges: 10})
	must(t, err)
	if len(ns) != 0 {
		t.Fatalf("notes changes survived the prune: %v", changeIDs(ns))
	}
	if got, _ := e.s.CommitSeqBefore(e.ctx, "p1", 650); got != 6 {
		t.Fatalf("CommitSeqBefore after prune = %d", got)
	}
	if got, _ := e.s.CommitSeqBefore(e.ctx, "p1", 450); got != 0 {
		t.Fatalf("CommitSeqBefore over the pruned range = %d, want 0", got)
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if _, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "a"); err != nil || ok {
			return fmt.Errorf("tombstone at seq 5 survived the prune: %v %v", ok, err)
		}
		if seq, ok, err := tx.TombstoneSeq(e.ctx, "tasks", "c"); err != nil || !ok || seq != 7 {
			return fmt.Errorf("tombstone at seq 7 = %d %v %v", seq, ok, err)
		}
		return nil
	}))
	// Current rows are untouched by pruning.
	if r, _ := e.s.GetRow(e.ctx, "p1", "tasks", "b"); r == nil {
		t.Fatal("pruning removed a current row")
	}
	// The next commit continues the dense sequence.
	if seq := e.commitTasks("p1", 800, []task{{id: "h", project: "p1", owner: "o1"}}, nil); seq != 8 {
		t.Fatalf("seq after prune = %d", seq)
	}
}

func testPruneMonotonic(t *testing.T, h Harness) {
	e := open(t, h)
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	logFixture(e)
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 3})
	must(t, err)
	res, err := e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 2})
	must(t, err)
	if res != (ports.PruneResult{PreviousHorizonSeq: 3, HorizonSeq: 3, RemovedCommits: 0}) {
		t.Fatalf("lower prune = %+v", res)
	}
	res, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 4})
	must(t, err)
	if res != (ports.PruneResult{PreviousHorizonSeq: 3, HorizonSeq: 4, RemovedCommits: 1}) {
		t.Fatalf("next prune = %+v", res)
	}
}

func testPruneConcurrent(t *testing.T, h Harness) {
	e := open(t, h)
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	const writers, each = 3, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := e.push("p1", func(tx ports.PushTx) error {
					k := task{id: fmt.Sprintf("w%d-%d", w, i), project: "p1", owner: "o"}
					if err := tx.UpsertRow(e.ctx, "tasks", k.write(0)); err != nil {
						return err
					}
					_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: k.id, Changes: []commit.Change{k.upsert(), k.deletion()}})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			b, err := e.s.LogBounds(e.ctx, "p1")
			if err == nil {
				_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: b.MaxSeq / 2})
			}
			if err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b := e.bounds("p1")
	if b.MaxSeq != writers*each {
		t.Fatalf("max seq = %d", b.MaxSeq)
	}
	cs := e.window("p1", map[string][]string{"project": {"p1"}}, 0, b.MaxSeq, 1000)
	for i, c := range cs {
		if c.Seq <= b.HorizonSeq || (i > 0 && c.Seq != cs[i-1].Seq+1) {
			t.Fatalf("retained log is not the dense range above the horizon %d: %v", b.HorizonSeq, seqsOf(cs))
		}
	}
	if len(cs) > 0 && cs[len(cs)-1].Seq != b.MaxSeq {
		t.Fatalf("retained log ends at %d, max %d", cs[len(cs)-1].Seq, b.MaxSeq)
	}
}
