package contract

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// recentGroups are the cases of ports.RecentWindowReader, run when the
// storage implements it: whatever it answers from memory is what the log
// answers, and it answers only windows it holds whole.
func recentGroups() []group {
	return []group{{"RecentLog", []testCase{
		{"AnswersAsTheLog", testRecentAnswersAsTheLog},
		{"HoldsOnlyWhatCommitted", testRecentHoldsOnlyCommitted},
		{"AnotherWriterBreaksTheRange", testRecentOtherWriter},
		{"BoundToTheLogEpoch", testRecentEpoch},
	}}}
}

func recentOf(t *testing.T, s ports.Storage) ports.RecentWindowReader {
	t.Helper()
	rr, ok := s.(ports.RecentWindowReader)
	if !ok {
		t.Skip("the storage keeps no recent log")
	}
	return rr
}

// commitGated is commitTasks on s as the sync service pushes: the serve
// gate read first, under the lock (the recent log learns the epoch there).
func (e *env) commitGated(s ports.Storage, partition string, createdAt int64, ups, dels []task) int64 {
	e.t.Helper()
	return e.commitOn(s, partition, true, createdAt, ups, dels)
}

func (e *env) epochOf(s ports.Storage, partition string) string {
	e.t.Helper()
	epoch, err := s.TouchPartition(e.ctx, partition, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	return epoch
}

// held asserts that rr answers w from memory, exactly as the log does.
func (e *env) held(rr ports.RecentWindowReader, s ports.Storage, partition, epoch string, w ports.CommitWindow) []commit.Commit {
	e.t.Helper()
	got, ok := rr.ReadRecentWindow(partition, epoch, w)
	if !ok {
		e.t.Fatalf("window (%d, %d] of %v: not held", w.AfterSeq, w.ThroughSeq, w.ScopeFilter)
	}
	want, err := s.ReadCommitWindow(e.ctx, partition, w)
	if err != nil {
		e.t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("window (%d, %d] of %v limit %d:\nmemory %+v\nlog    %+v", w.AfterSeq, w.ThroughSeq, w.ScopeFilter, w.LimitChanges, got, want)
	}
	return got
}

func (e *env) notHeld(rr ports.RecentWindowReader, partition, epoch string, after, through int64) {
	e.t.Helper()
	w := ports.CommitWindow{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, AfterSeq: after, ThroughSeq: through, LimitChanges: 100}
	if got, ok := rr.ReadRecentWindow(partition, epoch, w); ok {
		e.t.Fatalf("window (%d, %d] at epoch %q answered from memory: %+v", after, through, epoch, got)
	}
}

// The log fixture's commits, pushed with their gate: every window the log
// answers (filters, bounds, limits, other tables) the memory answers alike.
func testRecentAnswersAsTheLog(t *testing.T, h Harness) {
	e := open(t, h)
	rr := recentOf(t, e.s)
	epoch := e.epochOf(e.s, "p1")
	a := task{id: "a", project: "p1", owner: "o1"}
	e.commitGated(e.s, "p1", 100, []task{a}, nil)
	e.commitGated(e.s, "p1", 200, []task{{id: "b", project: "p2", owner: "o1"}}, nil)
	must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
		if _, err := tx.ReadServeGate(e.ctx); err != nil {
			return err
		}
		if err := tx.UpsertRow(e.ctx, "notes", noteWrite(1, "p1")); err != nil {
			return err
		}
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 300, ActorID: "a", ClientID: "c", ClientCommitID: "n", Changes: []commit.Change{noteUpsert(1, "p1")}})
		return err
	}))
	e.commitGated(e.s, "p1", 400, []task{{id: "c", project: "p1", owner: "o2"}, {id: "d", project: "p2", owner: "o2"}}, nil)
	e.commitGated(e.s, "p1", 500, nil, []task{a})
	e.commitGated(e.s, "p1", 600, []task{{id: "e", project: "p3", owner: "o1"}, {id: "f", project: "p1", owner: "o1"}, {id: "g", project: "p1", owner: "o3"}}, nil)
	tests := []struct {
		name           string
		table          string
		filter         map[string][]string
		after, through int64
		limit          int
		want           int // commits
	}{
		{"one variable", "tasks", map[string][]string{"project": {"p1"}}, 0, 6, 100, 4},
		{"several values", "tasks", map[string][]string{"project": {"p2", "p3"}}, 0, 6, 100, 3},
		{"two variables", "tasks", map[string][]string{"project": {"p1"}, "owner": {"o1"}}, 0, 6, 100, 3},
		{"after is exclusive, through inclusive", "tasks", map[string][]string{"project": {"p1"}}, 1, 4, 100, 1},
		{"a delete", "tasks", map[string][]string{"owner": {"o1"}}, 4, 5, 100, 1},
		{"limit keeps commits whole", "tasks", map[string][]string{"project": {"p1"}}, 3, 6, 2, 2},
		{"limit of one", "tasks", map[string][]string{"project": {"p1", "p3"}}, 0, 6, 1, 1},
		{"another table", "notes", map[string][]string{"project": {"p1"}}, 0, 6, 100, 1},
		{"nothing matches", "tasks", map[string][]string{"project": {"zz"}}, 0, 6, 100, 0},
		{"empty value list", "tasks", map[string][]string{"project": {}}, 0, 6, 100, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.held(rr, e.s, "p1", epoch, ports.CommitWindow{Table: tc.table, ScopeFilter: tc.filter, AfterSeq: tc.after, ThroughSeq: tc.through, LimitChanges: tc.limit})
			if len(got) != tc.want {
				t.Fatalf("%d commits, want %d: %+v", len(got), tc.want, got)
			}
		})
	}
	e.notHeld(rr, "p1", epoch, 0, 7)   // past the head
	e.notHeld(rr, "p2", epoch, 0, 1)   // nothing of p2
	e.notHeld(rr, "p1", "other", 0, 6) // another epoch
}

var errAfterAppend = errors.New("fails after its append")

// A push rolled back, or whose writes were discarded, leaves in memory
// nothing the log does not hold; concurrent pushes (grouped, some failing
// after their append) too.
func testRecentHoldsOnlyCommitted(t *testing.T, h Harness) {
	e := open(t, h)
	rr := recentOf(t, e.s)
	epoch := e.epochOf(e.s, "p1")
	e.commitGated(e.s, "p1", 100, []task{{id: "a", project: "p1", owner: "o1"}}, nil)
	err := e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
		if _, err := tx.ReadServeGate(e.ctx); err != nil {
			return err
		}
		if _, err := e.stageTasks(tx, 150, []task{{id: "gone", project: "p1", owner: "o1"}}, nil); err != nil {
			return err
		}
		return errAfterAppend
	})
	if !errors.Is(err, errAfterAppend) {
		t.Fatalf("push: %v", err)
	}
	must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
		if _, err := tx.ReadServeGate(e.ctx); err != nil {
			return err
		}
		if _, err := e.stageTasks(tx, 200, []task{{id: "discarded", project: "p1", owner: "o1"}}, nil); err != nil {
			return err
		}
		if err := tx.DiscardWrites(e.ctx); err != nil {
			return err
		}
		_, err := e.stageTasks(tx, 201, []task{{id: "kept", project: "p1", owner: "o1"}}, nil)
		return err
	}))
	all := ports.CommitWindow{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, AfterSeq: 0, ThroughSeq: 2, LimitChanges: 100}
	if got := e.held(rr, e.s, "p1", epoch, all); len(got) != 2 || got[1].Changes[0].RowID != "kept" {
		t.Fatalf("held %+v", got)
	}

	const pushers = 12
	var wg sync.WaitGroup
	for i := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1}, func(tx ports.PushTx) error {
				if _, err := tx.ReadServeGate(e.ctx); err != nil {
					return err
				}
				k := task{id: fmt.Sprintf("r%02d", i), project: "p1", owner: "o1"}
				if _, err := e.stageTasks(tx, int64(1000+i), []task{k}, nil); err != nil {
					return err
				}
				if i%3 == 0 {
					return errAfterAppend
				}
				return nil
			})
		}()
	}
	wg.Wait()
	b, err := e.s.LogBounds(e.ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxSeq != 2+pushers-pushers/3 {
		t.Fatalf("max seq %d", b.MaxSeq)
	}
	all.ThroughSeq = b.MaxSeq
	for after := range b.MaxSeq {
		// What is held is held exactly.
		w := all
		w.AfterSeq = after
		if _, ok := rr.ReadRecentWindow("p1", epoch, w); ok {
			e.held(rr, e.s, "p1", epoch, w)
		}
	}
	// The newest commit is always held: its group added it last.
	last := all
	last.AfterSeq = b.MaxSeq - 1
	e.held(rr, e.s, "p1", epoch, last)
}

// Another node (a second storage over the database) commits between two
// of this one's commits: this one no longer answers a window across it.
func testRecentOtherWriter(t *testing.T, h Harness) {
	e := open(t, h)
	rr := recentOf(t, e.s)
	other, err := e.reopen(e.sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rr2 := recentOf(t, other)
	epoch := e.epochOf(e.s, "p1")
	k := func(id string) []task { return []task{{id: id, project: "p1", owner: "o1"}} }
	e.commitGated(e.s, "p1", 100, k("a"), nil)
	e.commitGated(e.s, "p1", 200, k("b"), nil)
	e.commitGated(other, "p1", 300, k("c"), nil)
	e.commitGated(e.s, "p1", 400, k("d"), nil)
	w := func(after, through int64) ports.CommitWindow {
		return ports.CommitWindow{Table: "tasks", ScopeFilter: map[string][]string{"project": {"p1"}}, AfterSeq: after, ThroughSeq: through, LimitChanges: 100}
	}
	e.notHeld(rr, "p1", epoch, 0, 4)
	e.notHeld(rr, "p1", epoch, 2, 4)
	e.notHeld(rr, "p1", epoch, 1, 2) // before the range began afresh
	e.held(rr, e.s, "p1", epoch, w(3, 4))
	e.held(rr2, other, "p1", epoch, w(2, 3))
	e.notHeld(rr2, "p1", epoch, 2, 4)
}

// A rotated epoch (a restored log) is never answered from what was held
// before it; the range begins again with the next commit.
func testRecentEpoch(t *testing.T, h Harness) {
	e := open(t, h)
	rr := recentOf(t, e.s)
	old := e.epochOf(e.s, "p1")
	k := func(id string) []task { return []task{{id: id, project: "p1", owner: "o1"}} }
	e.commitGated(e.s, "p1", 100, k("a"), nil)
	e.commitGated(e.s, "p1", 200, k("b"), nil)
	rotated, err := e.s.RotateLogEpoch(e.ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	e.notHeld(rr, "p1", old, 0, 2)
	e.notHeld(rr, "p1", rotated, 0, 2)
	e.commitGated(e.s, "p1", 300, k("c"), nil)
	e.notHeld(rr, "p1", rotated, 1, 3)
	e.notHeld(rr, "p1", old, 2, 3)
	e.held(rr, e.s, "p1", rotated, ports.CommitWindow{Table: "tasks", ScopeFilter: map[string][]string{"owner": {"o1"}}, AfterSeq: 2, ThroughSeq: 3, LimitChanges: 10})
}
