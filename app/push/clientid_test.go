package push_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestClientIDBoundByFirstPush(t *testing.T) {
	tests := []struct {
		name string
		// first uses the client id; second is another actor using it next.
		first, second string
		// secondPull makes the second request a pull instead of a push.
		secondPull bool
	}{
		{"Bob pushes, then Alice pushes her own row under his ids", "bob", "alice", false},
		{"Alice squats Carol's ids, then Carol's real commit", "alice", "carol", false},
		{"Bob pushes, then Alice pulls under his client id", "bob", "alice", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := roundtest.New(t, roundtest.WithPull)
			resp, err := e.As(tt.first, "k", e.Req(e.Own("k1", "p-"+tt.first, tt.first)))
			if err != nil || resp.Results[0].Status != ssp2.PushApplied {
				t.Fatalf("first push %+v, %v", resp.Results, err)
			}
			second := e.Req(e.Own("k1", "p-"+tt.second, tt.second))
			if tt.secondPull {
				second = ssptest.Req{SchemaVersion: e.Schema.Version, Epoch: e.Epoch, Pull: true, SubTable: "projects"}
			}
			_, err = e.As(tt.second, "k", second)
			roundtest.WantCode(t, err, syncerr.InvalidClientID)
			e.NoRow(t, "p-"+tt.second)
			if rec, _ := e.Store.GetClient(context.Background(), "p1", "k"); rec != nil {
				t.Fatalf("a refused pull recorded the client: %+v", rec)
			}
			// The owner's replay is still cached with its seq.
			resp, err = e.As(tt.first, "k", e.Req(e.Own("k1", "p-"+tt.first, tt.first)))
			if err != nil || resp.Results[0].Status != ssp2.PushCached || resp.Results[0].CommitSeq != 1 {
				t.Fatalf("owner's replay %+v, %v", resp.Results, err)
			}
		})
	}
}

// unboundStore stores results owned by their actor but never binds: the
// shape of a record whose client id is not bound.
type unboundStore struct{ *memory.Store }

func (u unboundStore) Push(ctx context.Context, p string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	return u.Store.Push(ctx, p, o, func(tx ports.PushTx) error { return fn(unboundTx{tx, o.ActorID}) })
}

type unboundTx struct {
	ports.PushTx
	actor string
}

func (u unboundTx) BindClient(context.Context, string) (string, error) { return u.actor, nil }

// lockedOnly hides results from the optimistic lookup, so the locked
// re-check decides.
type lockedOnly struct{ *memory.Store }

func (lockedOnly) GetPushResult(context.Context, string, string, string) (ports.PushRecord, bool, error) {
	return ports.PushRecord{}, false, nil
}

func TestIdempotencyRecordReplayedOnlyToItsActor(t *testing.T) {
	for _, lookup := range []string{"optimistic", "locked"} {
		t.Run(lookup, func(t *testing.T) {
			e := roundtest.New(t, nil)
			// Bob's record exists, but his client id is not bound.
			bob := *e
			bob.Round, _ = e.Build(func(o *roundtest.Options) { o.Store = unboundStore{e.Store} })
			if resp, err := bob.As("bob", "k", e.Req(e.Own("k1", "p-bob", "bob"))); err != nil || resp.Results[0].Status != ssp2.PushApplied {
				t.Fatalf("bob's push %+v, %v", resp.Results, err)
			}
			if _, ok, _ := e.Store.ClientBinding(context.Background(), "p1", "k"); ok {
				t.Fatal("the unbound store bound")
			}
			if lookup == "locked" {
				e.Round, _ = e.Build(func(o *roundtest.Options) { o.Store = lockedOnly{e.Store} })
			}
			_, err := e.As("alice", "k", e.Req(e.Own("k1", "p-alice", "alice")))
			roundtest.WantCode(t, err, syncerr.InvalidClientID)
			e.NoRow(t, "p-alice")
			if a, ok, _ := e.Store.ClientBinding(context.Background(), "p1", "k"); ok {
				t.Fatalf("the refused push bound the client to %s", a)
			}
		})
	}
}

// A record stored before records carried their actor is replayed to the
// actor its client id is bound to, and refused to every other.
func TestLegacyRecordReplayedToTheBoundActor(t *testing.T) {
	e := roundtest.New(t, nil)
	if resp, err := e.As("alice", "k", e.Req(e.Own("k1", "p-alice", "alice"))); err != nil || resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("alice's push %+v, %v", resp.Results, err)
	}
	ctx := context.Background()
	rec, ok, err := e.Store.GetPushResult(ctx, "p1", "k", "k1")
	if err != nil || !ok || rec.ActorID != "alice" {
		t.Fatalf("stored record %+v %v %v", rec, ok, err)
	}
	// The same bytes under client "old", without an owner.
	if err := e.Store.Push(ctx, "p1", ports.PushOptions{WriterVersion: e.Schema.Version}, func(tx ports.PushTx) error {
		_, err := tx.PutPushResult(ctx, "old", "k1", rec.Result)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.BindClient(ctx, "p1", "old", "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = e.As("bob", "old", e.Req(e.Own("k1", "p-bob", "bob")))
	roundtest.WantCode(t, err, syncerr.InvalidClientID)
	e.NoRow(t, "p-bob")
	resp, err := e.As("alice", "old", e.Req(e.Own("k1", "p-alice", "alice")))
	if err != nil || resp.Results[0].Status != ssp2.PushCached || resp.Results[0].CommitSeq != 1 {
		t.Fatalf("alice's legacy replay %+v, %v", resp.Results, err)
	}
}

// barrierStore holds every push until n of them have begun, so both
// requests pass the request-level check before either transaction runs.
type barrierStore struct {
	*memory.Store
	wg *sync.WaitGroup
}

func (b barrierStore) Push(ctx context.Context, p string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	b.wg.Done()
	b.wg.Wait()
	return b.Store.Push(ctx, p, o, fn)
}

func TestClientIDRaceExactlyOneActorWins(t *testing.T) {
	actors := []string{"alice", "bob"}
	for round := range 8 {
		var wg sync.WaitGroup
		wg.Add(len(actors))
		e := roundtest.New(t, nil)
		e.Round, _ = e.Build(func(o *roundtest.Options) { o.Store = barrierStore{e.Store, &wg} })
		client := fmt.Sprint("fresh-", round)
		errs := make([]error, len(actors))
		var done sync.WaitGroup
		for i, a := range actors {
			done.Add(1)
			go func() {
				defer done.Done()
				// Distinct commit ids: the binding alone must decide, not
				// the idempotency record of the other actor's commit.
				r := ssptest.Req{ClientID: client, SchemaVersion: e.Schema.Version, Epoch: e.Epoch,
					Commits: []*ssp2.PushCommit{e.Own("k-"+a, "p-"+a, a)}}
				_, errs[i] = e.Round.Handle(context.Background(), ports.Identity{ActorID: a, Partition: "p1"}, r.Encode(t))
			}()
		}
		done.Wait()
		winners := 0
		for i, err := range errs {
			row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-"+actors[i])
			if err == nil {
				winners++
				if row == nil {
					t.Fatalf("round %d: %s won but its row is missing", round, actors[i])
				}
				if a, _, _ := e.Store.ClientBinding(context.Background(), "p1", client); a != actors[i] {
					t.Fatalf("round %d: %s won, the id is bound to %q", round, actors[i], a)
				}
				continue
			}
			roundtest.WantCode(t, err, syncerr.InvalidClientID)
			if row != nil {
				t.Fatalf("round %d: the refused %s's row landed", round, actors[i])
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d actors won a fresh client id", round, winners)
		}
	}
}

// bindBarrier holds every partition-level bind (the one a pull makes)
// until n of them have begun, so both pulls pass the request-level check
// of an unbound id before either binds it.
type bindBarrier struct {
	*memory.Store
	wg *sync.WaitGroup
}

func (b bindBarrier) BindClient(ctx context.Context, p, client, actor string) (string, error) {
	b.wg.Done()
	b.wg.Wait()
	return b.Store.BindClient(ctx, p, client, actor)
}

// A pull binds a fresh client id too (SPEC §1.5): of two actors pulling
// under one, exactly one is served; the other is refused after the bind,
// its pull unserved and no client record written for it.
func TestClientIDPullRaceExactlyOneActorWins(t *testing.T) {
	actors := []string{"alice", "bob"}
	for round := range 8 {
		var wg sync.WaitGroup
		wg.Add(len(actors))
		e := roundtest.New(t, roundtest.WithPull)
		e.Round, _ = e.Build(func(o *roundtest.Options) { roundtest.WithPull(o); o.Store = bindBarrier{e.Store, &wg} })
		client := fmt.Sprint("fresh-", round)
		errs := make([]error, len(actors))
		var done sync.WaitGroup
		for i, a := range actors {
			done.Add(1)
			go func() {
				defer done.Done()
				r := ssptest.Req{ClientID: client, SchemaVersion: e.Schema.Version, Epoch: e.Epoch, Pull: true, SubTable: "projects"}
				_, errs[i] = e.Round.Handle(context.Background(), ports.Identity{ActorID: a, Partition: "p1"}, r.Encode(t))
			}()
		}
		done.Wait()
		winner := ""
		for i, err := range errs {
			if err == nil {
				if winner != "" {
					t.Fatalf("round %d: %s and %s were both served a pull under %s", round, winner, actors[i], client)
				}
				winner = actors[i]
				continue
			}
			roundtest.WantCode(t, err, syncerr.InvalidClientID)
		}
		if winner == "" {
			t.Fatalf("round %d: no actor was served", round)
		}
		ctx := context.Background()
		if a, _, _ := e.Store.ClientBinding(ctx, "p1", client); a != winner {
			t.Fatalf("round %d: %s was served, the id is bound to %q", round, winner, a)
		}
		if rec, _ := e.Store.GetClient(ctx, "p1", client); rec == nil || rec.ActorID != winner {
			t.Fatalf("round %d: client record %+v, want %s's", round, rec, winner)
		}
	}
}
