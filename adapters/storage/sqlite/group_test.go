package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// groupStore opens a store whose groups never close on time, so a test
// decides a group's members by what it queues.
func groupStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db"), PushGroupOpen: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(context.Background(), storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// The engine's pushes all go to partition "p".

func hold(t *testing.T, s *sqlite.Store) func() error { return storetest.HoldPush(t, s, "p") }

func push(ctx context.Context, s *sqlite.Store, id string, then func(context.Context, ports.PushTx) error, seq *int64) error {
	return storetest.PushItem(ctx, s, "p", id, then, seq)
}

func queue(t *testing.T, s *sqlite.Store, f func() error) <-chan error {
	return storetest.QueuePush(t, s, f)
}

func present(t *testing.T, s *sqlite.Store, id string) bool {
	return storetest.ItemPresent(t, s, "p", id)
}

func maxSeq(t *testing.T, s *sqlite.Store) int64 { return storetest.MaxSeq(t, s, "p") }

var errRefused = errors.New("refused by the push function")

// TestGroupPartialFailure: of a group of pushes, the failing ones leave no
// trace and get their own error, the others commit with dense seqs, all in
// one COMMIT.
func TestGroupPartialFailure(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s)
	const n = 20
	seqs := make([]int64, n)
	results := make([]<-chan error, n)
	for i := range n {
		results[i] = queue(t, s, func() error {
			return push(context.Background(), s, fmt.Sprint("i", i), func(context.Context, ports.PushTx) error {
				if i%2 == 1 {
					return errRefused
				}
				return nil
			}, &seqs[i])
		})
	}
	before := sqlite.Commits(s)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	want := int64(1) // the holder
	for i := range n {
		err := <-results[i]
		if i%2 == 1 {
			if !errors.Is(err, errRefused) {
				t.Errorf("push %d: err %v, want its own error", i, err)
			}
			if present(t, s, fmt.Sprint("i", i)) {
				t.Errorf("failed push %d persisted", i)
			}
			continue
		}
		if err != nil {
			t.Errorf("push %d: %v", i, err)
		}
		want++
		if seqs[i] != want {
			t.Errorf("push %d: seq %d, want %d", i, seqs[i], want)
		}
		if !present(t, s, fmt.Sprint("i", i)) {
			t.Errorf("push %d missing", i)
		}
	}
	if got := maxSeq(t, s); got != want {
		t.Errorf("max seq %d, want %d", got, want)
	}
	if got := sqlite.Commits(s) - before; got != 1 {
		t.Errorf("%d COMMITs for the holder and the pushes queued behind it, want one", got)
	}
}

// TestGroupSeqsPerPartition: a group holds each partition's seq for its
// members, so pushes to two partitions interleaved in one group, one of
// them failing after its append, leave each log dense and each partition
// row at its own last seq; the next group goes on from there.
func TestGroupSeqsPerPartition(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s) // partition p, seq 1
	pushTo := func(partition, id string, fail bool, seq *int64) <-chan error {
		return queue(t, s, func() error {
			return storetest.PushItem(context.Background(), s, partition, id, func(context.Context, ports.PushTx) error {
				if fail {
					return errRefused
				}
				return nil
			}, seq)
		})
	}
	steps := []struct {
		partition, id string
		fail          bool
		want          int64
	}{
		{"q", "q1", false, 1},
		{"p", "p2", false, 2},
		{"q", "q-failed", true, 0},
		{"p", "p-failed", true, 0},
		{"q", "q2", false, 2},
		{"p", "p3", false, 3},
	}
	seqs := make([]int64, len(steps))
	results := make([]<-chan error, len(steps))
	for i, st := range steps {
		results[i] = pushTo(st.partition, st.id, st.fail, &seqs[i])
	}
	before := sqlite.Commits(s)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		err := <-results[i]
		switch {
		case st.fail && !errors.Is(err, errRefused):
			t.Errorf("%s: err %v, want its own error", st.id, err)
		case !st.fail && err != nil:
			t.Errorf("%s: %v", st.id, err)
		case !st.fail && seqs[i] != st.want:
			t.Errorf("%s: seq %d, want %d", st.id, seqs[i], st.want)
		}
	}
	if got := sqlite.Commits(s) - before; got != 1 {
		t.Errorf("%d COMMITs, want one group", got)
	}
	for partition, want := range map[string]int64{"p": 3, "q": 2} {
		if got := storetest.MaxSeq(t, s, partition); got != want {
			t.Errorf("partition %s: max seq %d, want %d", partition, got, want)
		}
	}
	var next int64
	if err := storetest.PushItem(context.Background(), s, "q", "q3", nil, &next); err != nil || next != 3 {
		t.Fatalf("next group's push to q: seq %d, err %v; want 3", next, err)
	}
}

// TestGroupCancelledQueued: a push whose context ends while queued returns
// at once and never runs; one cancelled mid-function is rolled back alone.
func TestGroupCancelledQueued(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	queued := queue(t, s, func() error {
		return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(ports.PushTx) error {
			ran.Store(true)
			return nil
		})
	})
	first := queue(t, s, func() error { return push(context.Background(), s, "first", nil, nil) })
	mctx, mcancel := context.WithCancel(context.Background())
	mid := queue(t, s, func() error {
		return s.Push(mctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
			w := storetest.Item("mid", "o", 0)
			if err := tx.UpsertRow(mctx, "items", w); err != nil {
				return err
			}
			mcancel()
			_, err := tx.AppendCommit(mctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "mid",
				Changes: []commit.Change{storetest.Change(w)}})
			return err
		})
	})
	last := queue(t, s, func() error { return push(context.Background(), s, "last", nil, nil) })
	cancel()
	select {
	case err := <-queued:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled queued push: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled queued push waited for the writer")
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-mid; !errors.Is(err, context.Canceled) {
		t.Errorf("push cancelled mid-function: %v", err)
	}
	if err := <-last; err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Error("the cancelled queued push ran")
	}
	if r, err := s.GetRow(context.Background(), "p", "items", "mid"); err != nil || r != nil {
		t.Errorf("push cancelled mid-function persisted (%v)", err)
	}
	if !present(t, s, "first") || !present(t, s, "last") || maxSeq(t, s) != 3 {
		t.Errorf("first %v, last %v, max seq %d", present(t, s, "first"), present(t, s, "last"), maxSeq(t, s))
	}
}

// TestGroupCommitFailure: a failed COMMIT reaches every push of the group
// (the holder leads it: the queued pushes join its group) and persists
// none of them; a retry commits.
func TestGroupCommitFailure(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s)
	fail := errors.New("commit failed")
	sqlite.SetCommitHook(s, func() error { return fail })
	var results []<-chan error
	for i := range 5 {
		results = append(results, queue(t, s, func() error { return push(context.Background(), s, fmt.Sprint("i", i), nil, nil) }))
	}
	if err := release(); !errors.Is(err, fail) {
		t.Errorf("holder: err %v, want the COMMIT failure", err)
	}
	for i, ch := range results {
		if err := <-ch; !errors.Is(err, fail) {
			t.Errorf("push %d: err %v, want the COMMIT failure", i, err)
		}
		if present(t, s, fmt.Sprint("i", i)) {
			t.Errorf("push %d persisted", i)
		}
	}
	if present(t, s, "holder") || maxSeq(t, s) != 0 {
		t.Errorf("holder present %v, max seq %d", present(t, s, "holder"), maxSeq(t, s))
	}
	sqlite.SetCommitHook(s, nil)
	var seq int64
	if err := push(context.Background(), s, "i0", nil, &seq); err != nil || seq != 1 {
		t.Fatalf("retry: seq %d, %v", seq, err)
	}
}

// TestGroupDiscardWrites: DiscardWrites inside a group discards only the
// calling push's writes; what it writes afterwards commits.
func TestGroupDiscardWrites(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s)
	var seqA, seqC int64
	a := queue(t, s, func() error { return push(context.Background(), s, "a", nil, &seqA) })
	b := queue(t, s, func() error {
		return push(context.Background(), s, "b", func(ctx context.Context, tx ports.PushTx) error {
			if err := tx.DiscardWrites(ctx); err != nil {
				return err
			}
			_, err := tx.PutPushResult(ctx, "c", "b-rejected", []byte(`{"status":"rejected"}`))
			return err
		}, nil)
	})
	c := queue(t, s, func() error { return push(context.Background(), s, "c", nil, &seqC) })
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{a, b, c} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if !present(t, s, "a") || !present(t, s, "c") {
		t.Fatal("a group member lost its writes to another's DiscardWrites")
	}
	if present(t, s, "b") {
		t.Fatal("DiscardWrites kept the push's writes")
	}
	if _, ok, err := s.GetPushResult(context.Background(), "p", "c", "b-rejected"); err != nil || !ok {
		t.Fatalf("write after DiscardWrites lost: %v %v", ok, err)
	}
	if seqA != 2 || seqC != 3 || maxSeq(t, s) != 3 {
		t.Fatalf("seqs a=%d c=%d, max %d", seqA, seqC, maxSeq(t, s))
	}
}

// TestGroupConcurrent: many goroutines pushing at once, some failing: the
// log is dense and holds exactly the successful pushes.
func TestGroupConcurrent(t *testing.T) {
	s := groupStore(t)
	const workers, each = 16, 20
	errs := make(chan error, workers*each)
	var ok atomic.Int64
	for w := range workers {
		go func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				err := push(context.Background(), s, id, func(context.Context, ports.PushTx) error {
					if i%3 == 0 {
						return errRefused
					}
					return nil
				}, nil)
				if i%3 == 0 {
					if !errors.Is(err, errRefused) {
						err = fmt.Errorf("%s: %v, want its own error", id, err)
					} else {
						err = nil
					}
				} else if err == nil {
					ok.Add(1)
				}
				errs <- err
			}
		}()
	}
	for range workers * each {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := maxSeq(t, s); got != ok.Load() {
		t.Fatalf("max seq %d for %d successful pushes", got, ok.Load())
	}
	for w := range workers {
		for i := range each {
			if got := present(t, s, fmt.Sprintf("w%d-%d", w, i)); got != (i%3 != 0) {
				t.Errorf("w%d-%d present=%v", w, i, got)
			}
		}
	}
	cs, err := s.ReadCommitWindow(context.Background(), "p", ports.CommitWindow{Table: "items",
		ScopeFilter: map[string][]string{"org": {"o"}}, ThroughSeq: ok.Load(), LimitChanges: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.Seq != int64(i+1) {
			t.Fatalf("commit %d has seq %d", i, c.Seq)
		}
	}
	if int64(len(cs)) != ok.Load() {
		t.Fatalf("%d commits in the log, want %d", len(cs), ok.Load())
	}
}

// TestGroupWriteOne: single-statement writes outside Push (here a client
// record) queued behind the writer join the group and commit with it.
func TestGroupWriteOne(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s)
	before := sqlite.Commits(s)
	rec := queue(t, s, func() error {
		return s.PutClient(context.Background(), ports.ClientRecord{Partition: "p", ClientID: "c1", ActorID: "a", WireVersion: 3, Cursor: 7, UpdatedAtMs: 1})
	})
	p := queue(t, s, func() error { return push(context.Background(), s, "after", nil, nil) })
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-rec; err != nil {
		t.Fatal(err)
	}
	if err := <-p; err != nil {
		t.Fatal(err)
	}
	if got := sqlite.Commits(s) - before; got != 1 {
		t.Errorf("%d COMMITs, want one group", got)
	}
	c, err := s.GetClient(context.Background(), "p", "c1")
	if err != nil || c == nil || c.Cursor != 7 {
		t.Fatalf("client record %+v, %v", c, err)
	}
	if !present(t, s, "after") || maxSeq(t, s) != 2 {
		t.Fatalf("after present %v, max seq %d", present(t, s, "after"), maxSeq(t, s))
	}
}

// TestGroupAborted: a member whose failure makes SQLite roll back the whole
// transaction (here a trigger's RAISE(ROLLBACK)) gets its error; the
// group's other members are retried in a later group and commit; the log
// stays dense.
func TestGroupAborted(t *testing.T) {
	s := groupStore(t)
	if _, err := s.DB().ExecContext(context.Background(), `CREATE TRIGGER boom BEFORE INSERT ON sync_commits
WHEN NEW.client_commit_id = 'boom' BEGIN SELECT RAISE(ROLLBACK, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	release := hold(t, s)
	a := queue(t, s, func() error { return push(context.Background(), s, "a", nil, nil) })
	boom := queue(t, s, func() error { return push(context.Background(), s, "boom", nil, nil) })
	c := queue(t, s, func() error { return push(context.Background(), s, "c", nil, nil) })
	if err := release(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	if err := <-a; err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := <-boom; err == nil {
		t.Fatal("the push rolling back the transaction succeeded")
	}
	if err := <-c; err != nil {
		t.Fatalf("c: %v", err)
	}
	for _, id := range []string{"holder", "a", "c"} {
		if !present(t, s, id) {
			t.Errorf("%s missing", id)
		}
	}
	if present(t, s, "boom") {
		t.Error("boom persisted")
	}
	if got := maxSeq(t, s); got != 3 {
		t.Fatalf("max seq %d, want 3", got)
	}
	cs, err := s.ReadCommitWindow(context.Background(), "p", ports.CommitWindow{Table: "items",
		ScopeFilter: map[string][]string{"org": {"o"}}, ThroughSeq: 3, LimitChanges: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.Seq != int64(i+1) {
			t.Fatalf("commit %d has seq %d", i, c.Seq)
		}
	}
	if len(cs) != 3 {
		t.Fatalf("%d commits", len(cs))
	}
}

// TestGroupGateAfterEpochMint: a group's members share the serve gate its
// first push read, except across a single-statement write that joined the
// group: a push after a first-use touch sees the epoch it minted.
func TestGroupGateAfterEpochMint(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s)
	readGate := func(got *string) func() error {
		return func() error {
			return s.Push(context.Background(), "q", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
				g, err := tx.ReadServeGate(context.Background())
				*got = g.LogEpoch
				return err
			})
		}
	}
	var before, after, minted string
	b := queue(t, s, readGate(&before))
	m := queue(t, s, func() (err error) {
		minted, err = s.TouchPartition(context.Background(), "q", 1)
		return err
	})
	a := queue(t, s, readGate(&after))
	commits := sqlite.Commits(s)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{b, m, a} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := sqlite.Commits(s) - commits; got != 1 {
		t.Fatalf("%d COMMITs, want the three in the holder's group", got)
	}
	if before != "" || minted == "" || after != minted {
		t.Fatalf("epoch before the touch %q, minted %q, seen after %q", before, minted, after)
	}
}

// TestGroupGateAfterCommit: a gated push gets, as its read-verify, the
// serve gate its group read last, which nothing can change before the
// group's COMMIT on the one writer; a group that read none leaves it to
// the caller.
func TestGroupGateAfterCommit(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	if _, err := s.TouchPartition(ctx, "p", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "p", Name: "proj", SchemaVersion: 1}, 2); err != nil {
		t.Fatal(err)
	}
	gated := func(readGate bool) (checkpoint.ServeGate, bool, error) {
		return s.PushThenReadGate(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
			if readGate {
				_, err := tx.ReadServeGate(ctx)
				return err
			}
			return nil
		})
	}
	want, err := s.ReadServeGate(ctx, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Pending) != 1 || want.LogEpoch == "" {
		t.Fatalf("gate %+v, want the epoch and one pending checkpoint", want)
	}
	for _, tc := range []struct {
		name     string
		readGate bool
		wantOK   bool
	}{
		{"a push that read the gate", true, true},
		{"a push that read none", false, false},
	} {
		g, ok, err := gated(tc.readGate)
		if err != nil || ok != tc.wantOK || (ok && !reflect.DeepEqual(g, want)) {
			t.Errorf("%s: gate %+v (read %v, %v), want read %v of %+v", tc.name, g, ok, err, tc.wantOK, want)
		}
	}
}
