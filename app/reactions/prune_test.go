package reactions_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/reactions"
	"github.com/syncd-dev/syncd/ports"
)

// terminal makes the store's reactions completed (done*) or dead-lettered
// (dead*) at the times given, as a runner would.
func terminal(t *testing.T, st *memory.Store, at map[string]int64) {
	t.Helper()
	ctx := context.Background()
	for k, ms := range at {
		if _, err := st.ClaimReactions(ctx, "p", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"mail"}, NowMs: 1000, LeaseDurationMs: 1 << 40, Limit: 10_000}); err != nil {
			t.Fatal(err)
		}
		var ok bool
		var err error
		if k[:4] == "done" {
			ok, err = st.CompleteReaction(ctx, "p", k, "w", ms)
		} else {
			ok, err = st.FailReaction(ctx, "p", k, ports.ReactionFailure{LeaseOwner: "w", Failure: []byte(`{"code":"x"}`), AtMs: ms})
		}
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", k, ok, err)
		}
	}
}

// TestPrunerRetention: completed reactions older than the completed
// retention and dead letters older than theirs go; younger ones, pending
// and leased ones stay; a backlog beyond one pass's limit is worked off
// by repeated passes in one run.
func TestPrunerRetention(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	now := 100 * day
	keys := []string{"done-old", "done-young", "dead-old", "dead-young", "pending", "leased"}
	for i := range 25 {
		keys = append(keys, fmt.Sprintf("done-backlog-%02d", i))
	}
	st := setup(t, 3, keys...)
	at := map[string]int64{
		"done-old": now - 31*day, "done-young": now - 29*day,
		"dead-old": now - 91*day, "dead-young": now - 89*day,
	}
	for i := range 25 {
		at[fmt.Sprintf("done-backlog-%02d", i)] = now - 40*day
	}
	terminal(t, st, at)
	// "pending" went back to pending; "leased" holds a lease.
	ctx := context.Background()
	if ok, _ := st.FailReaction(ctx, "p", "pending", ports.ReactionFailure{LeaseOwner: "w", Retry: true, RetryAtMs: now, AtMs: now}); !ok {
		t.Fatal("reschedule pending")
	}
	p, err := reactions.NewPruner(reactions.PruneOptions{Queue: st, Partitions: st, Limit: 4, Now: func() time.Time { return time.UnixMilli(now) }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PruneAll(ctx)
	if err != nil || len(res) != 1 || res[0] != (reactions.PruneResult{Partition: "p", Completed: 26, DeadLetters: 1}) {
		t.Fatalf("prune: %+v %v", res, err)
	}
	left, _ := st.ListReactions(ctx, "p", nil, 100)
	got := map[string]ports.ReactionStatus{}
	for _, r := range left {
		got[r.IdempotencyKey] = r.Status
	}
	want := map[string]ports.ReactionStatus{"done-young": ports.ReactionCompleted, "dead-young": ports.ReactionDeadLetter,
		"pending": ports.ReactionPending, "leased": ports.ReactionLeased}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}

// TestPrunePass: the scheduled pass prunes every partition and reports
// its result.
func TestPrunePass(t *testing.T) {
	st := setup(t, 3, "done-a")
	terminal(t, st, map[string]int64{"done-a": 1000})
	var passed []error
	p, _ := reactions.NewPruner(reactions.PruneOptions{Queue: st, Partitions: st, KeepCompleted: time.Millisecond,
		Now: func() time.Time { return time.UnixMilli(5000) }, Passed: func(err error) { passed = append(passed, err) }})
	if err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(passed) != 1 || passed[0] != nil {
		t.Fatalf("passes reported %v, want one without error", passed)
	}
	if r, _ := st.GetReaction(context.Background(), "p", "done-a"); r != nil {
		t.Fatalf("kept %+v", r)
	}
}
