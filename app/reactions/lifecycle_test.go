package reactions_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/reactions"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// fakeClock is a test clock that moves only when told to.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func newClock(ms int64) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(ms)
	return c
}

// TestBackoffSchedule: a reaction failing every attempt is due again
// after min(max, initial × 2^(attempt−1)), not a millisecond earlier, and
// dead-letters at its last attempt (SPEC §6.9).
func TestBackoffSchedule(t *testing.T) {
	ctx := context.Background()
	st := setup(t, 5, "a")
	clk := newClock(1000)
	h := &handler{typ: "mail", fn: func(int32, ports.ReactionDelivery) error { return errors.New("down") }}
	r, err := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{h}, InitialBackoff: time.Second,
		MaxBackoff: 4 * time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	for attempt, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if n, err := r.RunOnce(ctx, "p"); err != nil || n != 1 {
			t.Fatalf("attempt %d: ran %d, %v", attempt+1, n, err)
		}
		rec, _ := st.GetReaction(ctx, "p", "a")
		if rec.Status != ports.ReactionPending || rec.Attempts != attempt+1 || rec.AvailableAtMs != clk.ms.Load()+wait.Milliseconds() {
			t.Fatalf("after attempt %d: %+v, want due in %v", attempt+1, rec, wait)
		}
		clk.advance(wait - time.Millisecond)
		if n, _ := r.RunOnce(ctx, "p"); n != 0 {
			t.Fatalf("attempt %d: retried before its backoff elapsed", attempt+1)
		}
		clk.advance(time.Millisecond)
	}
	if n, _ := r.RunOnce(ctx, "p"); n != 1 {
		t.Fatal("last attempt did not run")
	}
	if rec, _ := st.GetReaction(ctx, "p", "a"); rec.Status != ports.ReactionDeadLetter || rec.Attempts != 5 || rec.AvailableAtMs != clk.ms.Load() {
		t.Fatalf("after the last attempt: %+v", rec)
	}
	if h.calls.Load() != 5 {
		t.Fatalf("%d deliveries", h.calls.Load())
	}
}

// TestLongHandlerLease: a handler that extends its lease keeps the
// reaction from a second worker past the first lease's expiry; one that
// does not loses it, the second worker delivers it again (at least
// once), and the first one's late completion changes nothing.
func TestLongHandlerLease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		extend      bool
		wantSecond  int32
		wantAttempt int
	}{
		{"extended", true, 0, 1},
		{"not extended", false, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := setup(t, 3, "a")
			clk := newClock(1000)
			second := &handler{typ: "mail", fn: func(int32, ports.ReactionDelivery) error { return nil }}
			other, _ := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{second}, LeaseDuration: 30 * time.Second, Now: clk.now})
			first := &handler{typ: "mail", fn: func(_ int32, d ports.ReactionDelivery) error {
				clk.advance(20 * time.Second)
				if tc.extend {
					if ok, err := d.ExtendLease(ctx, 30*time.Second); err != nil || !ok {
						t.Errorf("extend: %v %v", ok, err)
					}
				}
				clk.advance(20 * time.Second) // past the first lease
				if _, err := other.RunOnce(ctx, "p"); err != nil {
					t.Error(err)
				}
				return nil
			}}
			r, _ := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{first}, LeaseDuration: 30 * time.Second, Now: clk.now})
			if n, err := r.RunOnce(ctx, "p"); err != nil || n != 1 {
				t.Fatalf("ran %d, %v", n, err)
			}
			rec, _ := st.GetReaction(ctx, "p", "a")
			if second.calls.Load() != tc.wantSecond || rec.Status != ports.ReactionCompleted || rec.Attempts != tc.wantAttempt {
				t.Fatalf("second worker ran %d times; %+v", second.calls.Load(), rec)
			}
		})
	}
}

// TestStaleBatchMemberSkipped: when an earlier batch member outlives the
// lease and another worker reclaims the rest, the stale runner's renewal
// fails and it skips the handler (SPEC §6.9).
func TestStaleBatchMemberSkipped(t *testing.T) {
	ctx := context.Background()
	st := setup(t, 3, "a", "b")
	clk := newClock(1000)
	var mu sync.Mutex
	delivered := map[string]int{}
	record := func(d ports.ReactionDelivery) {
		mu.Lock()
		delivered[d.IdempotencyKey]++
		mu.Unlock()
	}
	second := &handler{typ: "mail", fn: func(_ int32, d ports.ReactionDelivery) error { record(d); return nil }}
	other, _ := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{second}, LeaseDuration: 30 * time.Second, Now: clk.now})
	first := &handler{typ: "mail", fn: func(_ int32, d ports.ReactionDelivery) error {
		record(d)
		if d.IdempotencyKey == "a" {
			clk.advance(time.Minute)
			if _, err := other.RunOnce(ctx, "p"); err != nil {
				t.Error(err)
			}
		}
		return nil
	}}
	r, _ := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{first}, LeaseDuration: 30 * time.Second, Now: clk.now})
	if n, err := r.RunOnce(ctx, "p"); err != nil || n != 1 {
		t.Fatalf("first runner ran %d, %v; want only a", n, err)
	}
	if delivered["a"] != 2 || delivered["b"] != 1 {
		t.Fatalf("deliveries %v: a twice (its lease expired), b once", delivered)
	}
}

// TestRunnersExclusiveAcrossNodes: four runners on two storages over
// one database (two nodes with two workers each) deliver every reaction
// exactly once while the leases hold, on SQLite and PostgreSQL.
func TestRunnersExclusiveAcrossNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (a, b ports.Storage)
	}{
		{"memory", func(t *testing.T) (ports.Storage, ports.Storage) { st := memory.New(); return st, st }},
		{"sqlite", func(t *testing.T) (ports.Storage, ports.Storage) {
			path := filepath.Join(t.TempDir(), "syncd.db")
			return openSQLite(t, path), openSQLite(t, path)
		}},
		{"postgres", func(t *testing.T) (ports.Storage, ports.Storage) {
			dsn := pgtest.DSN(t)
			return openPostgres(t, dsn), openPostgres(t, dsn)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testRunnersExclusive(t, tc.open) })
	}
}

func openSQLite(t *testing.T, path string) ports.Storage {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openPostgres(t *testing.T, dsn string) ports.Storage {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func testRunnersExclusive(t *testing.T, open func(t *testing.T) (a, b ports.Storage)) {
	const n = 40
	ctx := context.Background()
	a, b := open(t)
	sch := ssptest.Schema(t)
	for _, st := range []ports.Storage{a, b} {
		if err := st.EnsureSchema(ctx, sch, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.TouchPartition(ctx, "p", 1); err != nil {
		t.Fatal(err)
	}
	err := a.Push(ctx, "p", ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
		seq, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1000, ActorID: "u", ClientID: "c", ClientCommitID: "k"})
		if err != nil {
			return err
		}
		var rs []ports.Reaction
		for i := range n {
			rs = append(rs, ports.Reaction{IdempotencyKey: fmt.Sprintf("r%02d", i), Type: "mail", Version: 1, Payload: []byte(`{}`), MaxAttempts: 3, AvailableAtMs: 1000})
		}
		return tx.EnqueueReactions(ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "k", CommitSeq: seq, CreatedAtMs: 1000}, rs)
	})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock(2000) // leases never expire: the clock stands still
	var mu sync.Mutex
	delivered := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		st := a
		if w%2 == 1 {
			st = b
		}
		h := &handler{typ: "mail", fn: func(_ int32, d ports.ReactionDelivery) error {
			mu.Lock()
			delivered[d.IdempotencyKey]++
			mu.Unlock()
			time.Sleep(time.Millisecond) // overlap with the other workers' claims
			return nil
		}}
		r, err := reactions.New(reactions.Options{Queue: st.(ports.ReactionQueue), Handlers: []ports.ReactionHandler{h}, BatchSize: 3, Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for {
				ran, err := r.RunOnce(ctx, "p")
				if err != nil {
					t.Error(err)
					return
				}
				if ran == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(delivered) != n {
		t.Fatalf("%d of %d reactions delivered", len(delivered), n)
	}
	for k, c := range delivered {
		if c != 1 {
			t.Errorf("%s delivered %d times", k, c)
		}
	}
	rs, err := a.ListReactions(ctx, "p", []ports.ReactionStatus{ports.ReactionCompleted}, 100)
	if err != nil || len(rs) != n {
		t.Fatalf("%d completed, %v", len(rs), err)
	}
}
