package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// groupStore opens a store whose groups never close on time, so a test
// decides a group's members by what it queues.
func groupStore(t *testing.T) *postgres.Store {
	t.Helper()
	return groupStoreOpen(t, time.Hour)
}

// groupStoreOpen opens a store whose groups take pushes for open.
func groupStoreOpen(t *testing.T, open time.Duration) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Options{DSN: pgtest.DSN(t), MaxConns: 8, PushGroupOpen: open})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(context.Background(), storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func exec(t *testing.T, s *postgres.Store, q string) {
	t.Helper()
	if _, err := s.DB().DB.ExecContext(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

func hold(t *testing.T, s *postgres.Store, partition string) func() error {
	return storetest.HoldPush(t, s, partition)
}

func push(ctx context.Context, s *postgres.Store, partition, id string, then func(context.Context, ports.PushTx) error, seq *int64) error {
	return storetest.PushItem(ctx, s, partition, id, then, seq)
}

func queue(t *testing.T, s *postgres.Store, f func() error) <-chan error {
	return storetest.QueuePush(t, s, f)
}

func present(t *testing.T, s *postgres.Store, partition, id string) bool {
	return storetest.ItemPresent(t, s, partition, id)
}

func maxSeq(t *testing.T, s *postgres.Store, partition string) int64 {
	return storetest.MaxSeq(t, s, partition)
}

// recordTransactions makes every commit insert record its top-level
// transaction id (a savepoint's rows carry the subtransaction's xmin).
func recordTransactions(t *testing.T, s *postgres.Store) {
	t.Helper()
	exec(t, s, `CREATE TABLE commit_txids(partition TEXT, txid BIGINT)`)
	exec(t, s, `CREATE FUNCTION record_txid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO commit_txids VALUES (NEW.partition, txid_current()); RETURN NEW; END $$`)
	exec(t, s, `CREATE TRIGGER record_txid BEFORE INSERT ON sync_commits FOR EACH ROW EXECUTE FUNCTION record_txid()`)
}

// transactions counts the distinct transactions that committed
// partition's commits (see recordTransactions).
func transactions(t *testing.T, s *postgres.Store, partition string) int {
	t.Helper()
	var n int
	if err := s.DB().DB.QueryRowContext(context.Background(),
		"SELECT count(DISTINCT txid) FROM commit_txids WHERE partition=$1", partition).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var errRefused = errors.New("refused by the push function")

// TestGroupPartialFailure: of a group of pushes, the failing ones leave no
// trace and get their own error, the others commit with dense seqs, all in
// the holder's one transaction.
func TestGroupPartialFailure(t *testing.T) {
	s := groupStore(t)
	recordTransactions(t, s)
	release := hold(t, s, "p")
	const n = 20
	seqs := make([]int64, n)
	results := make([]<-chan error, n)
	for i := range n {
		results[i] = queue(t, s, func() error {
			return push(context.Background(), s, "p", fmt.Sprint("i", i), func(context.Context, ports.PushTx) error {
				if i%2 == 1 {
					return errRefused
				}
				return nil
			}, &seqs[i])
		})
	}
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
			if present(t, s, "p", fmt.Sprint("i", i)) {
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
		if !present(t, s, "p", fmt.Sprint("i", i)) {
			t.Errorf("push %d missing", i)
		}
	}
	if got := maxSeq(t, s, "p"); got != want {
		t.Errorf("max seq %d, want %d", got, want)
	}
	if got := transactions(t, s, "p"); got != 1 {
		t.Errorf("%d transactions for the holder and the pushes queued behind it, want one", got)
	}
}

// TestGroupStatementFailure: a member whose function swallows the failure
// of one of its statements (the transaction then refuses everything until
// a rollback) fails alone; the members before and after it commit.
func TestGroupStatementFailure(t *testing.T) {
	s := groupStore(t)
	exec(t, s, `CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.client_commit_id = 'bad' THEN RAISE EXCEPTION 'bad commit'; END IF; RETURN NEW; END $$`)
	exec(t, s, `CREATE TRIGGER boom BEFORE INSERT ON sync_commits FOR EACH ROW EXECUTE FUNCTION boom()`)
	release := hold(t, s, "p")
	a := queue(t, s, func() error { return push(context.Background(), s, "p", "a", nil, nil) })
	bad := queue(t, s, func() error {
		return s.Push(context.Background(), "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
			w := storetest.Item("bad", "o", 0)
			if err := tx.UpsertRow(context.Background(), "items", w); err != nil {
				return err
			}
			_, _ = tx.AppendCommit(context.Background(), ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
				ClientCommitID: "bad", Changes: []commit.Change{storetest.Change(w)}})
			return nil // the failure swallowed
		})
	})
	c := queue(t, s, func() error { return push(context.Background(), s, "p", "c", nil, nil) })
	if err := release(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	for name, ch := range map[string]<-chan error{"a": a, "c": c} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := <-bad; err == nil {
		t.Error("the push whose statement failed succeeded")
	}
	if r, err := s.GetRow(context.Background(), "p", "items", "bad"); err != nil || r != nil {
		t.Errorf("the failed push persisted its row (%v)", err)
	}
	for _, id := range []string{"holder", "a", "c"} {
		if !present(t, s, "p", id) {
			t.Errorf("%s missing", id)
		}
	}
	if got := maxSeq(t, s, "p"); got != 3 {
		t.Errorf("max seq %d, want 3", got)
	}
}

// TestGroupCancelledQueued: a push whose context ends while queued returns
// at once and never runs; one cancelled mid-function is rolled back alone.
func TestGroupCancelledQueued(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s, "p")
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	queued := queue(t, s, func() error {
		return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(ports.PushTx) error {
			ran.Store(true)
			return nil
		})
	})
	first := queue(t, s, func() error { return push(context.Background(), s, "p", "first", nil, nil) })
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
	last := queue(t, s, func() error { return push(context.Background(), s, "p", "last", nil, nil) })
	cancel()
	select {
	case err := <-queued:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled queued push: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled queued push waited for the group")
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
	if !present(t, s, "p", "first") || !present(t, s, "p", "last") || maxSeq(t, s, "p") != 3 {
		t.Errorf("first %v, last %v, max seq %d", present(t, s, "p", "first"), present(t, s, "p", "last"), maxSeq(t, s, "p"))
	}
}

// TestGroupCommitFailure: a failed COMMIT (here a deferred trigger that
// refuses one member's commit at COMMIT time) reaches every push of the
// group, the holder's included, and persists none of them; a retry of
// the others commits.
func TestGroupCommitFailure(t *testing.T) {
	s := groupStore(t)
	exec(t, s, `CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.client_commit_id = 'boom' THEN RAISE EXCEPTION 'boom at commit'; END IF; RETURN NULL; END $$`)
	exec(t, s, `CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON sync_commits DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION boom()`)
	release := hold(t, s, "p")
	var results []<-chan error
	for i := range 4 {
		results = append(results, queue(t, s, func() error { return push(context.Background(), s, "p", fmt.Sprint("i", i), nil, nil) }))
	}
	boom := queue(t, s, func() error { return push(context.Background(), s, "p", "boom", nil, nil) })
	if err := release(); err == nil {
		t.Error("holder: committed, want the COMMIT failure")
	}
	for i, ch := range append(results, boom) {
		if err := <-ch; err == nil {
			t.Errorf("push %d: committed, want the COMMIT failure", i)
		}
	}
	for _, id := range []string{"holder", "i0", "i1", "i2", "i3", "boom"} {
		if present(t, s, "p", id) {
			t.Errorf("%s persisted", id)
		}
	}
	if got := maxSeq(t, s, "p"); got != 0 {
		t.Errorf("max seq %d after the failed COMMIT", got)
	}
	var seq int64
	if err := push(context.Background(), s, "p", "i0", nil, &seq); err != nil || seq != 1 {
		t.Fatalf("retry: seq %d, %v", seq, err)
	}
}

// TestGroupDiscardWrites: DiscardWrites inside a group discards only the
// calling push's writes and keeps the client binding it made; what it
// writes afterwards commits.
func TestGroupDiscardWrites(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s, "p")
	var seqA, seqC int64
	a := queue(t, s, func() error { return push(context.Background(), s, "p", "a", nil, &seqA) })
	b := queue(t, s, func() error {
		return s.Push(context.Background(), "p", ports.PushOptions{WriterVersion: 1, ActorID: "actor-b"}, func(tx ports.PushTx) error {
			ctx := context.Background()
			if bound, err := tx.BindClient(ctx, "client-b"); err != nil || bound != "actor-b" {
				return fmt.Errorf("bind: %q %v", bound, err)
			}
			w := storetest.Item("b", "o", 0)
			if err := tx.UpsertRow(ctx, "items", w); err != nil {
				return err
			}
			if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "actor-b", ClientID: "client-b",
				ClientCommitID: "b", Changes: []commit.Change{storetest.Change(w)}}); err != nil {
				return err
			}
			if err := tx.DiscardWrites(ctx); err != nil {
				return err
			}
			_, err := tx.PutPushResult(ctx, "client-b", "b", []byte(`{"status":"rejected"}`))
			return err
		})
	})
	c := queue(t, s, func() error { return push(context.Background(), s, "p", "c", nil, &seqC) })
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{a, b, c} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if !present(t, s, "p", "a") || !present(t, s, "p", "c") {
		t.Fatal("a group member lost its writes to another's DiscardWrites")
	}
	if r, err := s.GetRow(context.Background(), "p", "items", "b"); err != nil || r != nil {
		t.Fatalf("DiscardWrites kept the push's row (%v)", err)
	}
	if _, ok, err := s.GetPushResult(context.Background(), "p", "client-b", "b"); err != nil || !ok {
		t.Fatalf("write after DiscardWrites lost: %v %v", ok, err)
	}
	if actor, ok, err := s.ClientBinding(context.Background(), "p", "client-b"); err != nil || !ok || actor != "actor-b" {
		t.Fatalf("binding after DiscardWrites: %q %v %v", actor, ok, err)
	}
	if seqA != 2 || seqC != 3 || maxSeq(t, s, "p") != 3 {
		t.Fatalf("seqs a=%d c=%d, max %d", seqA, seqC, maxSeq(t, s, "p"))
	}
}

// TestGroupPartitionsParallel: a push to one partition commits while a
// group of another partition is held open, and neither waits for the
// other's commit.
func TestGroupPartitionsParallel(t *testing.T) {
	s := groupStore(t)
	release := hold(t, s, "p")
	var seq int64
	if err := push(context.Background(), s, "q", "q1", nil, &seq); err != nil || seq != 1 {
		t.Fatalf("push to q while p's group is open: seq %d, %v", seq, err)
	}
	if !present(t, s, "q", "q1") {
		t.Fatal("q's push is not visible while p's group is open")
	}
	if present(t, s, "p", "holder") {
		t.Fatal("p's held push is visible before its commit")
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if !present(t, s, "p", "holder") || maxSeq(t, s, "p") != 1 {
		t.Fatal("p's push did not commit")
	}
}

// TestGroupConcurrent: many goroutines pushing at once to two partitions,
// some failing: each log is dense and holds exactly its successful pushes.
func TestGroupConcurrent(t *testing.T) {
	s := groupStore(t)
	const workers, each = 16, 20
	parts := []string{"p", "q"}
	errs := make(chan error, workers*each)
	var ok [2]atomic.Int64
	for w := range workers {
		go func() {
			part := parts[w%2]
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				err := push(context.Background(), s, part, id, func(context.Context, ports.PushTx) error {
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
					ok[w%2].Add(1)
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
	for pi, part := range parts {
		n := ok[pi].Load()
		if got := maxSeq(t, s, part); got != n {
			t.Fatalf("%s: max seq %d for %d successful pushes", part, got, n)
		}
		cs, err := s.ReadCommitWindow(context.Background(), part, ports.CommitWindow{Table: "items",
			ScopeFilter: map[string][]string{"org": {"o"}}, ThroughSeq: n, LimitChanges: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			if c.Seq != int64(i+1) {
				t.Fatalf("%s: commit %d has seq %d", part, i, c.Seq)
			}
		}
		if int64(len(cs)) != n {
			t.Fatalf("%s: %d commits in the log, want %d", part, len(cs), n)
		}
	}
	for w := range workers {
		for i := range each {
			if got := present(t, s, parts[w%2], fmt.Sprintf("w%d-%d", w, i)); got != (i%3 != 0) {
				t.Errorf("w%d-%d present=%v", w, i, got)
			}
		}
	}
}

// TestGroupServeGate: a member's serve gate, read ahead with its savepoint
// when it is the member's first statement, is what a read of its own
// gives: the epoch and schema version, and the pending checkpoints once
// one is declared at the running version; a member reading it after
// statements of its own reads it afresh, and sees the same.
func TestGroupServeGate(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	if _, err := s.TouchPartition(ctx, "p", 1); err != nil {
		t.Fatal(err)
	}
	gateFirst := func(got *checkpoint.ServeGate) func() error {
		return func() error {
			return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
				g, err := tx.ReadServeGate(ctx)
				*got = g
				return err
			})
		}
	}
	gateLater := func(got *checkpoint.ServeGate) func() error {
		return func() error {
			return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
				if _, _, err := tx.GetPushResult(ctx, "c", "x"); err != nil {
					return err
				}
				g, err := tx.ReadServeGate(ctx)
				*got = g
				return err
			})
		}
	}
	for _, declared := range []bool{false, true} {
		if declared {
			if _, err := s.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "p", Name: "cp", SchemaVersion: 1}, 1); err != nil {
				t.Fatal(err)
			}
		}
		want, err := s.ReadServeGate(ctx, "p", 1)
		if err != nil {
			t.Fatal(err)
		}
		if want.LogEpoch == "" || want.StoredSchemaVersion != 1 || (len(want.Pending) == 1) != declared {
			t.Fatalf("declared %v: gate outside a push %+v", declared, want)
		}
		var lead, first, later, second checkpoint.ServeGate
		release := hold(t, s, "p")
		a := queue(t, s, gateFirst(&first))
		b := queue(t, s, gateLater(&later))
		c := queue(t, s, gateFirst(&second))
		if err := release(); err != nil {
			t.Fatal(err)
		}
		for _, ch := range []<-chan error{a, b, c} {
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
		// A lone push leads its own group: its gate came with the BEGIN.
		if err := gateFirst(&lead)(); err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string]checkpoint.ServeGate{"lead": lead, "first": first, "later": later, "second": second} {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("declared %v: %s member's gate %+v, want %+v", declared, name, got, want)
			}
		}
	}
}

// TestGroupLateFailure: a write held back for the pipeline fails after its
// push's function returned, reported by the next member's savepoint or by
// the COMMIT. That push fails alone with the write's own error; the others
// commit, with dense seqs, in the group's one transaction (no retry).
func TestGroupLateFailure(t *testing.T) {
	s := groupStore(t)
	recordTransactions(t, s)
	exec(t, s, `CREATE FUNCTION late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.client_commit_id LIKE 'late%' THEN RAISE EXCEPTION 'late result'; END IF; RETURN NEW; END $$`)
	exec(t, s, `CREATE TRIGGER late BEFORE INSERT ON sync_push_results FOR EACH ROW EXECUTE FUNCTION late()`)
	ctx := context.Background()
	// checked pushes read the record first, as the sync pipeline does, so
	// the store may hold the result back.
	checked := func(id string, w ports.RowWrite) func() error {
		return func() error {
			return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
				if _, ok, err := tx.GetPushResult(ctx, "c", id); err != nil || ok {
					return fmt.Errorf("record of %s: %v %v", id, ok, err)
				}
				if err := tx.UpsertRow(ctx, "items", w); err != nil {
					return err
				}
				if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
					ClientCommitID: id, Changes: []commit.Change{storetest.Change(w)}}); err != nil {
					return err
				}
				_, err := tx.PutPushResult(ctx, "c", id, []byte(`{"status":"applied"}`))
				return err
			})
		}
	}
	dup := storetest.Item("dup", "o", 0)
	dup.Values[2] = storetest.Item("a", "o", 0).Values[2] // a's unique title
	release := hold(t, s, "p")
	a := queue(t, s, checked("a", storetest.Item("a", "o", 0)))
	unique := queue(t, s, func() error {
		return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
			return tx.UpsertRow(ctx, "items", dup) // nothing read after it
		})
	})
	lateMid := queue(t, s, checked("late-mid", storetest.Item("m", "o", 0)))
	c := queue(t, s, checked("c", storetest.Item("c", "o", 0)))
	lateLast := queue(t, s, checked("late-last", storetest.Item("l", "o", 0)))
	if err := release(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	for name, ch := range map[string]<-chan error{"a": a, "c": c} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	var ce *ports.ConstraintError
	if err := <-unique; !errors.As(err, &ce) || ce.Kind != "unique" {
		t.Errorf("held upsert violating a unique index: %v, want its ConstraintError", err)
	}
	for name, ch := range map[string]<-chan error{"late-mid": lateMid, "late-last": lateLast} {
		if err := <-ch; err == nil {
			t.Errorf("%s: the push whose held result failed succeeded", name)
		}
	}
	for id, want := range map[string]bool{"holder": true, "a": true, "c": true, "dup": false, "m": false, "l": false} {
		if got := present(t, s, "p", id); got != want {
			t.Errorf("row %s present %v, want %v", id, got, want)
		}
	}
	if got := maxSeq(t, s, "p"); got != 3 {
		t.Errorf("max seq %d, want 3", got)
	}
	if n := transactions(t, s, "p"); n != 1 {
		t.Errorf("the group committed in %d transactions, want 1", n)
	}
	for _, id := range []string{"late-mid", "late-last"} {
		if _, ok, err := s.GetPushResult(ctx, "p", "c", id); err != nil || ok {
			t.Errorf("result of %s stored: %v %v", id, ok, err)
		}
	}
}

// TestGroupIdempotencyReadAhead: the idempotency record read with a
// member's savepoint sees what the group's earlier members stored (a
// duplicate of a commit in the same group is a replay), and what a member
// stores after its own read is found by the next reader.
func TestGroupIdempotencyReadAhead(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	var found [3]atomic.Bool
	once := func(i int, id string) func() error {
		return func() error {
			o := ports.PushOptions{WriterVersion: 1, ActorID: "a", ClientID: "c", ClientCommitID: "dup"}
			return s.Push(ctx, "p", o, func(tx ports.PushTx) error {
				if _, ok, err := tx.GetPushResult(ctx, "c", "dup"); err != nil || ok {
					found[i].Store(ok)
					return err
				}
				w := storetest.Item(id, "o", 0)
				if err := tx.UpsertRow(ctx, "items", w); err != nil {
					return err
				}
				if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
					ClientCommitID: "dup", Changes: []commit.Change{storetest.Change(w)}}); err != nil {
					return err
				}
				_, err := tx.PutPushResult(ctx, "c", "dup", []byte(`{"status":"applied"}`))
				return err
			})
		}
	}
	release := hold(t, s, "p")
	first := queue(t, s, once(0, "first"))
	second := queue(t, s, once(1, "second"))
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if found[0].Load() || !found[1].Load() {
		t.Fatalf("record found by the first %v, by the second %v; want false, true", found[0].Load(), found[1].Load())
	}
	for id, want := range map[string]bool{"first": true, "second": false} {
		if r, err := s.GetRow(ctx, "p", "items", id); err != nil || (r != nil) != want {
			t.Fatalf("row %s present %v (%v), want %v: the duplicate applied again", id, r != nil, err, want)
		}
	}
	// After the group: a lone push reads it ahead in its own group.
	if err := once(2, "third")(); err != nil || !found[2].Load() {
		t.Fatalf("lone duplicate: %v, found %v", err, found[2].Load())
	}
}

// TestGroupGateAfterCommit: a push asking for the serve gate gets the one
// read after its group's COMMIT (the same as a read of its own then); a
// pending checkpoint leaves it to the caller.
func TestGroupGateAfterCommit(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	if _, err := s.TouchPartition(ctx, "p", 1); err != nil {
		t.Fatal(err)
	}
	gatedPush := func(id string) (checkpoint.ServeGate, bool, error) {
		return s.PushThenReadGate(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
			w := storetest.Item(id, "o", 0)
			if err := tx.UpsertRow(ctx, "items", w); err != nil {
				return err
			}
			_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
				ClientCommitID: id, Changes: []commit.Change{storetest.Change(w)}})
			return err
		})
	}
	release := hold(t, s, "p")
	type answer struct {
		g   checkpoint.ServeGate
		ok  bool
		err error
	}
	got := make(chan answer, 1)
	queued := queue(t, s, func() error {
		g, ok, err := gatedPush("a")
		got <- answer{g, ok, err}
		return err
	})
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
	a := <-got
	want, err := s.ReadServeGate(ctx, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !a.ok || !reflect.DeepEqual(a.g, want) || a.g.LogEpoch == "" {
		t.Fatalf("gate after commit %+v (read %v), want %+v", a.g, a.ok, want)
	}
	if _, err := s.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "p", Name: "proj", SchemaVersion: 1}, 2); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := gatedPush("b"); err != nil || ok {
		t.Fatalf("gate with a pending checkpoint: read %v (%v), want left to the caller", ok, err)
	}
}

// TestGroupFirstRowReadAhead: the row PushOptions.FirstRow names is read
// in the round trip of the member's savepoint, not by a statement of its
// own. A change made behind the store's back after that round trip (no
// writer of the partition can make one: they wait for its lock) is what
// tells the two apart.
func TestGroupFirstRowReadAhead(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	if err := push(ctx, s, "p", "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		first ports.RowKey
		want  int64
	}{
		{"hinted row read with the savepoint", ports.RowKey{Table: "items", RowID: "x"}, 1},
		{"another row hinted: read by the push", ports.RowKey{Table: "items", RowID: "y"}, 99},
		{"no hint: read by the push", ports.RowKey{}, 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec(t, s, `UPDATE items SET _sync_server_version=1 WHERE _sync_row_id='x'`)
			var got int64
			err := s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a", FirstRow: tc.first}, func(tx ports.PushTx) error {
				exec(t, s, `UPDATE items SET _sync_server_version=99 WHERE _sync_row_id='x'`)
				r, err := tx.GetRow(ctx, "items", "x")
				if err != nil || r == nil {
					return fmt.Errorf("get row: %v, %v", r, err)
				}
				got = r.Version
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("version read %d, want %d", got, tc.want)
			}
		})
	}
}

// TestGroupHeldAppendChecksItsSeq: a member's commit append takes the seq
// its group hands out from the partition's last seq, read once under the
// lock, and the group's COMMIT moves the partition row only if it still
// holds that seq. Should anything else have moved it in between (here a
// trigger on the row table, which no real deployment has), the COMMIT
// fails: the push is refused as an internal error with nothing stored,
// never acknowledged at a seq the partition row does not agree with.
func TestGroupHeldAppendChecksItsSeq(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	var before int64
	if err := push(ctx, s, "p", "first", nil, &before); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `CREATE FUNCTION bump_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE sync_partitions SET max_commit_seq=max_commit_seq+1 WHERE partition=NEW._sync_partition; RETURN NEW; END $$`)
	exec(t, s, `CREATE TRIGGER bump_seq AFTER INSERT ON items FOR EACH ROW EXECUTE FUNCTION bump_seq()`)
	var acked int64
	err := push(ctx, s, "p", "second", nil, &acked)
	var stored int64
	if qerr := s.DB().DB.QueryRowContext(ctx,
		"SELECT coalesce(max(commit_seq), 0) FROM sync_commits WHERE partition='p' AND client_commit_id='second'").Scan(&stored); qerr != nil {
		t.Fatal(qerr)
	}
	if err == nil {
		t.Fatalf("push acknowledged at seq %d (its commit stored at %d) though the partition row moved under its group", acked, stored)
	}
	var se *syncerr.Error
	if !errors.As(err, &se) || se.Code != syncerr.InternalError {
		t.Fatalf("failure %v, want %s", err, syncerr.InternalError)
	}
	if stored != 0 || present(t, s, "p", "second") {
		t.Fatalf("the refused push left its commit (seq %d) or its row", stored)
	}
	if got := maxSeq(t, s, "p"); got != before {
		t.Fatalf("partition row at %d after the refused push, want %d", got, before)
	}
}

// TestGroupDiscardThenAppend: a member that appends, discards its writes
// and appends again gets the seq its first append had.
func TestGroupDiscardThenAppend(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	var before int64
	if err := push(ctx, s, "p", "first", nil, &before); err != nil {
		t.Fatal(err)
	}
	var seqs [2]int64
	err := s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
		for i := range 2 {
			w := storetest.Item(fmt.Sprint("x", i), "o", 0)
			if err := tx.UpsertRow(ctx, "items", w); err != nil {
				return err
			}
			seq, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
				ClientCommitID: fmt.Sprint("x", i), Changes: []commit.Change{storetest.Change(w)}})
			if err != nil {
				return err
			}
			seqs[i] = seq
			if i == 0 {
				if err := tx.DiscardWrites(ctx); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	x0, err := s.GetRow(ctx, "p", "items", "x0")
	if err != nil {
		t.Fatal(err)
	}
	if seqs != [2]int64{before + 1, before + 1} || maxSeq(t, s, "p") != before+1 || x0 != nil {
		t.Fatalf("seqs %v (max %d, discarded row present %v), want both %d", seqs, maxSeq(t, s, "p"), x0 != nil, before+1)
	}
}

// TestGroupMovesSeqOnce: a group's members append at the seqs the group
// hands out and the partition row is written once, with the COMMIT,
// whatever path each append takes (held back, run at once after a write
// that may fail a constraint, or statement by statement past a combined
// statement's size) and whichever members fail; the log stays dense and
// the next group starts after it.
func TestGroupMovesSeqOnce(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	exec(t, s, `CREATE TABLE seq_moves(n INT)`)
	exec(t, s, `CREATE FUNCTION count_seq_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO seq_moves VALUES (1); RETURN NEW; END $$`)
	exec(t, s, `CREATE TRIGGER count_seq_move AFTER UPDATE ON sync_partitions FOR EACH ROW
WHEN (OLD.max_commit_seq IS DISTINCT FROM NEW.max_commit_seq) EXECUTE FUNCTION count_seq_move()`)
	moves := func() int {
		t.Helper()
		var n int
		if err := s.DB().DB.QueryRowContext(ctx, "SELECT count(*) FROM seq_moves").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	big := func(id string, seq *int64) func() error {
		return func() error {
			ws := make([]ports.RowWrite, 70)
			for i := range ws {
				ws[i] = storetest.Item(fmt.Sprint(id, "-", i), "o", i)
			}
			n, err := storetest.PushItems(ctx, s, "p", ws, id)
			*seq = n
			return err
		}
	}
	// A unique-index write keeps its failure for the append to report:
	// this one fails, and the append never runs.
	dup := storetest.Item("dup", "o", 0)
	dup.Values[2] = storetest.Item("holder", "o", 0).Values[2]
	// An append without a row write (items has a unique index, so its
	// writes keep the append from being held back).
	appendOnly := func(id string, seq *int64) func() error {
		return func() error {
			return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
				n, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: id,
					Changes: []commit.Change{storetest.Change(storetest.Item(id, "o", 0))}})
				*seq = n
				return err
			})
		}
	}
	var seqA, seqW, seqBig, seqC int64
	release := hold(t, s, "p")
	pushes := []struct {
		name string
		ok   bool
		done <-chan error
	}{
		{"held append", true, queue(t, s, appendOnly("a", &seqA))},
		{"append after a row write", true, queue(t, s, func() error { return push(ctx, s, "p", "w", nil, &seqW) })},
		{"refused", false, queue(t, s, func() error {
			return push(ctx, s, "p", "r", func(context.Context, ports.PushTx) error { return errRefused }, nil)
		})},
		{"unique violation", false, queue(t, s, func() error {
			_, err := storetest.PushItems(ctx, s, "p", []ports.RowWrite{dup}, "dup")
			return err
		})},
		{"70 changes", true, queue(t, s, big("big", &seqBig))},
		{"held append after them", true, queue(t, s, appendOnly("c", &seqC))},
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pushes {
		if err := <-p.done; (err == nil) != p.ok {
			t.Errorf("%s: %v, want success %v", p.name, err, p.ok)
		}
	}
	if seqA != 2 || seqW != 3 || seqBig != 4 || seqC != 5 || maxSeq(t, s, "p") != 5 {
		t.Fatalf("seqs a %d, w %d, big %d, c %d, max %d; want 2, 3, 4, 5, 5", seqA, seqW, seqBig, seqC, maxSeq(t, s, "p"))
	}
	if n := moves(); n != 1 {
		t.Errorf("the partition row moved %d times for one group, want once", n)
	}
	var next int64
	if err := push(ctx, s, "p", "next", nil, &next); err != nil || next != 6 {
		t.Fatalf("the next group's push: seq %d, %v; want 6", next, err)
	}
	var commits, top int64
	if err := s.DB().DB.QueryRowContext(ctx, "SELECT count(*), max(commit_seq) FROM sync_commits WHERE partition='p'").Scan(&commits, &top); err != nil {
		t.Fatal(err)
	}
	if commits != 6 || top != 6 {
		t.Fatalf("%d commits up to %d, want a dense 6", commits, top)
	}
}

// prefetchGroup runs pushes as one group whose members all queued before
// it began, so their reads go ahead with its BEGIN: a holder's group,
// closed by time once the holder returns, keeps them queued meanwhile.
func prefetchGroup(t *testing.T, pushes ...func(s *postgres.Store) error) (*postgres.Store, []error) {
	t.Helper()
	s := groupStoreOpen(t, time.Millisecond)
	return s, runPrefetched(t, s, pushes...)
}

func runPrefetched(t *testing.T, s *postgres.Store, pushes ...func(s *postgres.Store) error) []error {
	t.Helper()
	release := hold(t, s, "p")
	chans := make([]<-chan error, len(pushes))
	for i, p := range pushes {
		chans[i] = queue(t, s, func() error { return p(s) })
	}
	time.Sleep(5 * time.Millisecond) // the holder's group is closed by then
	if err := release(); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(pushes))
	for i, ch := range chans {
		errs[i] = <-ch
	}
	return errs
}

// versionSeen pushes a write of row id at version v after reading it (the
// push's first row, read ahead), recording the version it found (0: none).
func versionSeen(id string, v int64, seen *atomic.Int64) func(s *postgres.Store) error {
	return func(s *postgres.Store) error {
		ctx := context.Background()
		o := ports.PushOptions{WriterVersion: 1, ActorID: "a", FirstRow: ports.RowKey{Table: "items", RowID: id}}
		return s.Push(ctx, "p", o, func(tx ports.PushTx) error {
			r, err := tx.GetRow(ctx, "items", id)
			if err != nil {
				return err
			}
			if r != nil {
				seen.Store(r.Version)
			}
			w := storetest.Item(id, "o", 0)
			w.Version = v
			if err := tx.UpsertRow(ctx, "items", w); err != nil {
				return err
			}
			_, err = tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
				ClientCommitID: fmt.Sprint(id, v), Changes: []commit.Change{storetest.Change(w)}})
			return err
		})
	}
}

// TestGroupPrefetchedReadsSeeEarlierMembers: a member whose row or
// idempotency record was read with the BEGIN, before an earlier member of
// the group wrote it, reads it again and sees that write, as a serial run
// would have shown it.
func TestGroupPrefetchedReadsSeeEarlierMembers(t *testing.T) {
	var first, second, other atomic.Int64
	var found atomic.Bool
	dup := func(s *postgres.Store) error {
		ctx := context.Background()
		o := ports.PushOptions{WriterVersion: 1, ActorID: "a", ClientID: "c", ClientCommitID: "dup"}
		return s.Push(ctx, "p", o, func(tx ports.PushTx) error {
			if _, ok, err := tx.GetPushResult(ctx, "c", "dup"); err != nil || ok {
				found.Store(ok)
				return err
			}
			_, err := tx.PutPushResult(ctx, "c", "dup", []byte(`{"status":"applied"}`))
			return err
		})
	}
	s, errs := prefetchGroup(t, versionSeen("x", 1, &first), versionSeen("x", 2, &second), versionSeen("y", 1, &other), dup, dup)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if first.Load() != 0 || second.Load() != 1 || other.Load() != 0 {
		t.Fatalf("versions seen: first %d, second %d, other %d; want 0, 1, 0", first.Load(), second.Load(), other.Load())
	}
	if !found.Load() {
		t.Fatal("the second push of a commit id did not find the first one's record")
	}
	if got := maxSeq(t, s, "p"); got != 4 {
		t.Fatalf("max seq %d, want 4 (the holder and three commits)", got)
	}
}

// TestGroupPrefetchedLateFailure: in a group whose members' reads went
// with the BEGIN, a member's held statement failing while later members'
// statements wait behind it fails that member alone; the members after it
// run again and commit, with dense seqs, and nothing of the failed one
// stays.
func TestGroupPrefetchedLateFailure(t *testing.T) {
	pushes := []func(*postgres.Store) error{}
	ids := []string{"a", "late-b", "c", "d", "late-e"}
	for _, id := range ids {
		pushes = append(pushes, func(s *postgres.Store) error {
			ctx := context.Background()
			return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a", ClientID: "c", ClientCommitID: id}, func(tx ports.PushTx) error {
				if _, err := tx.ReadServeGate(ctx); err != nil {
					return err
				}
				if _, ok, err := tx.GetPushResult(ctx, "c", id); err != nil || ok {
					return fmt.Errorf("record of %s: %v %v", id, ok, err)
				}
				if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c",
					ClientCommitID: id, Changes: []commit.Change{storetest.Change(storetest.Item(id, "o", 0))}}); err != nil {
					return err
				}
				_, err := tx.PutPushResult(ctx, "c", id, []byte(`{"status":"applied"}`))
				return err
			})
		})
	}
	s := groupStoreOpen(t, time.Millisecond)
	epoch, err := s.TouchPartition(context.Background(), "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s, `CREATE FUNCTION late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.client_commit_id LIKE 'late%' THEN RAISE EXCEPTION 'late result'; END IF; RETURN NEW; END $$`)
	exec(t, s, `CREATE TRIGGER late BEFORE INSERT ON sync_push_results FOR EACH ROW EXECUTE FUNCTION late()`)
	errs := runPrefetched(t, s, pushes...)
	var seqs []int64
	for i, id := range ids {
		late := id[0] == 'l'
		if (errs[i] != nil) != late {
			t.Errorf("%s: %v, want failure %v", id, errs[i], late)
		}
		var seq sql.NullInt64
		if err := s.DB().DB.QueryRowContext(context.Background(),
			"SELECT max(commit_seq) FROM sync_commits WHERE partition='p' AND client_commit_id=$1", id).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if seq.Valid == late {
			t.Errorf("%s: commit stored %v, want %v", id, seq.Valid, !late)
		}
		if seq.Valid {
			seqs = append(seqs, seq.Int64)
		}
	}
	slices.Sort(seqs) // the members run again in the order they queued again
	if !reflect.DeepEqual(seqs, []int64{2, 3, 4}) || maxSeq(t, s, "p") != 4 {
		t.Fatalf("seqs %v, max %d; want [2 3 4], 4", seqs, maxSeq(t, s, "p"))
	}
	// The members rewound and run again are held as they committed.
	w := ports.CommitWindow{Table: "items", ScopeFilter: map[string][]string{"org": {"o"}}, AfterSeq: 1, ThroughSeq: 4, LimitChanges: 10}
	held, ok := s.ReadRecentWindow("p", epoch, w)
	logged, err := s.ReadCommitWindow(context.Background(), "p", w)
	if err != nil || !ok || !reflect.DeepEqual(held, logged) {
		t.Fatalf("held %v %+v, logged %+v (%v)", ok, held, logged, err)
	}
}

// TestGroupBeginFailureWakesTheBatch: the pushes taken into a group with
// its BEGIN are answered when the BEGIN fails (here its leader is
// cancelled while it waits for the partition lock), and run again in a
// group of their own.
func TestGroupBeginFailureWakesTheBatch(t *testing.T) {
	s := groupStoreOpen(t, time.Millisecond)
	ctx := context.Background()
	if err := push(ctx, s, "p", "first", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Another transaction holds the partition lock: every BEGIN waits.
	lock, err := s.DB().DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if _, err := lock.ExecContext(ctx, "SELECT 1 FROM sync_partitions WHERE partition='p' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	holderCtx, cancelHolder := context.WithCancel(ctx)
	holder := make(chan error, 1)
	go func() { holder <- push(holderCtx, s, "p", "h", nil, nil) }()
	time.Sleep(50 * time.Millisecond) // the holder leads and waits for the lock
	leadCtx, cancelLead := context.WithCancel(ctx)
	lead := queue(t, s, func() error { return push(leadCtx, s, "p", "a", nil, nil) })
	taken := queue(t, s, func() error { return push(ctx, s, "p", "b", nil, nil) })
	cancelHolder()
	if err := <-holder; !errors.Is(err, context.Canceled) {
		t.Fatalf("holder: %v, want its cancellation", err)
	}
	// a leads the next group and takes b with its BEGIN, which waits.
	waitFor("b taken into a's group", func() bool { return s.PushesQueued() == 0 })
	cancelLead()
	if err := <-lead; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v, want its cancellation", err)
	}
	if err := lock.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-taken:
		if err != nil {
			t.Fatalf("the push taken with the failed BEGIN: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the push taken with the failed BEGIN was never answered")
	}
	if !present(t, s, "p", "b") || present(t, s, "p", "a") || present(t, s, "p", "h") {
		t.Fatal("rows: want b only of the three")
	}
}

// TestGroupFailedReadAheadSparesTheLeader: a later member's read ahead
// failing with the BEGIN (here its row cannot be read: a division by zero
// at execution) leaves the transaction aborted; the group rolls back to
// the leader's clean savepoint, so the leader commits and only that
// member fails.
func TestGroupFailedReadAheadSparesTheLeader(t *testing.T) {
	leader := func(s *postgres.Store) error {
		ctx := context.Background()
		return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
			_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: "lead",
				Changes: []commit.Change{storetest.Change(storetest.Item("lead", "o", 0))}})
			return err
		})
	}
	var seen atomic.Int64
	s := groupStoreOpen(t, time.Millisecond)
	exec(t, s, "DROP TABLE items CASCADE")
	exec(t, s, `CREATE VIEW items AS SELECT 'p'::text AS _sync_partition, 'x'::text AS _sync_row_id,
  (1/(random()*0)::int)::bigint AS _sync_server_version, NULL::jsonb AS _sync_scopes, NULL::bytea AS _sync_payload,
  NULL::bytea AS _sync_column_versions`)
	// A holder that writes no row keeps the two queued behind its group.
	running, rel := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- s.Push(context.Background(), "p", ports.PushOptions{WriterVersion: 1}, func(ports.PushTx) error {
			close(running)
			<-rel
			return nil
		})
	}()
	<-running
	first := queue(t, s, func() error { return leader(s) })
	second := queue(t, s, func() error { return versionSeen("x", 1, &seen)(s) })
	time.Sleep(5 * time.Millisecond) // the holder's group is closed by then
	close(rel)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the leader, whose own reads succeeded: %v", err)
	}
	var se *syncerr.Error
	if err := <-second; !errors.As(err, &se) || se.Code != syncerr.InternalError {
		t.Fatalf("the member whose table is gone: %v, want %s", err, syncerr.InternalError)
	}
	var n int
	if err := s.DB().DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM sync_commits WHERE partition='p' AND client_commit_id='lead'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the leader's commit stored %d times (%v), want once", n, err)
	}
}
