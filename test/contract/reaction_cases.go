package contract

import (
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/ports"
)

// reactionGroups are the reaction case groups, in run order.
func reactionGroups() []group {
	return []group{
		{"ReactionQueue", []testCase{
			{"ClaimLeasesDueWork", testReactionClaim},
			{"LeaseOwnerCAS", testReactionLeaseCAS},
			{"FailRetryAndDeadLetter", testReactionFail},
			{"PruneTerminalOnly", testReactionPrune},
		}},
	}
}

// queue returns the storage's reaction queue, enqueuing the given
// reactions (key, type, available at) in one commit created at 10.
func queue(t *testing.T, h Harness, rs ...ports.Reaction) (*env, ports.ReactionQueue) {
	t.Helper()
	e := open(t, h)
	q, ok := e.s.(ports.ReactionQueue)
	if !ok {
		t.Skip("storage does not implement ports.ReactionQueue")
	}
	must(t, e.push("p1", func(tx ports.PushTx) error {
		seq, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 10, ActorID: "a", ClientID: "c", ClientCommitID: "cc"})
		if err != nil {
			return err
		}
		return tx.EnqueueReactions(e.ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "cc", CommitSeq: seq, CreatedAtMs: 10}, rs)
	}))
	return e, q
}

func reaction(key, typ string, availableAt int64) ports.Reaction {
	return ports.Reaction{IdempotencyKey: key, Type: typ, Version: 1, Payload: []byte(`{}`), MaxAttempts: 3, AvailableAtMs: availableAt}
}

func keysOf(rs []ports.StoredReaction) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.IdempotencyKey
	}
	return out
}

func testReactionClaim(t *testing.T, h Harness) {
	e, q := queue(t, h, reaction("a", "email", 10), reaction("b", "email", 50), reaction("c", "sms", 10), reaction("d", "email", 20))
	for _, c := range []ports.ReactionClaim{
		{LeaseOwner: "w", Types: nil, NowMs: 100, LeaseDurationMs: 10, Limit: 10},
		{LeaseOwner: "w", Types: []string{"email"}, NowMs: 100, LeaseDurationMs: 10, Limit: 0},
	} {
		got, err := q.ClaimReactions(e.ctx, "p1", c)
		must(t, err)
		if len(got) != 0 {
			t.Fatalf("claim %+v leased %v", c, keysOf(got))
		}
	}
	got, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w1", Types: []string{"email"}, NowMs: 30, LeaseDurationMs: 100, Limit: 10})
	must(t, err)
	if !equalStrings(keysOf(got), []string{"a", "d"}) {
		t.Fatalf("claimed %v, want the due email reactions a, d", keysOf(got))
	}
	for _, r := range got {
		if r.Status != ports.ReactionLeased || r.Attempts != 1 || r.LeaseOwner != "w1" || r.LeaseExpiresAt != 130 {
			t.Fatalf("claimed reaction = %+v", r)
		}
	}
	// Leased work is not claimable again until the lease expires.
	got, err = q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w2", Types: []string{"email"}, NowMs: 60, LeaseDurationMs: 100, Limit: 10})
	must(t, err)
	if !equalStrings(keysOf(got), []string{"b"}) {
		t.Fatalf("second claim = %v, want b", keysOf(got))
	}
	got, err = q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w3", Types: []string{"email"}, NowMs: 130, LeaseDurationMs: 5, Limit: 1})
	must(t, err)
	if len(got) != 1 || got[0].Attempts != 2 || got[0].LeaseOwner != "w3" || got[0].LeaseExpiresAt != 135 {
		t.Fatalf("reclaim after expiry = %+v", got)
	}
	if r, _ := e.s.GetReaction(e.ctx, "p1", "c"); r.Status != ports.ReactionPending || r.Attempts != 0 {
		t.Fatalf("unclaimed type changed: %+v", r)
	}
}

func testReactionLeaseCAS(t *testing.T, h Harness) {
	e, q := queue(t, h, reaction("a", "email", 10))
	_, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w1", Types: []string{"email"}, NowMs: 10, LeaseDurationMs: 100, Limit: 1})
	must(t, err)
	check := func(name string, ok bool, err error, want bool) {
		t.Helper()
		must(t, err)
		if ok != want {
			t.Fatalf("%s = %v, want %v", name, ok, want)
		}
	}
	ok, err := q.ExtendReactionLease(e.ctx, "p1", "a", "w2", 500)
	check("extend by another owner", ok, err, false)
	ok, err = q.ExtendReactionLease(e.ctx, "p1", "a", "w1", 500)
	check("extend by the owner", ok, err, true)
	if r, _ := e.s.GetReaction(e.ctx, "p1", "a"); r.LeaseExpiresAt != 500 {
		t.Fatalf("extended lease = %+v", r)
	}
	ok, err = q.CompleteReaction(e.ctx, "p1", "a", "w2", 50)
	check("complete by another owner", ok, err, false)
	ok, err = q.CompleteReaction(e.ctx, "p1", "a", "w1", 50)
	check("complete by the owner", ok, err, true)
	r, _ := e.s.GetReaction(e.ctx, "p1", "a")
	if r.Status != ports.ReactionCompleted || r.CompletedAtMs != 50 || r.LeaseOwner != "" {
		t.Fatalf("completed reaction = %+v", r)
	}
	ok, err = q.CompleteReaction(e.ctx, "p1", "a", "w1", 60)
	check("complete twice", ok, err, false)
	ok, err = q.CompleteReaction(e.ctx, "p1", "missing", "w1", 60)
	check("complete a missing reaction", ok, err, false)
}

func testReactionFail(t *testing.T, h Harness) {
	e, q := queue(t, h, reaction("a", "email", 10), reaction("b", "email", 10))
	_, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"email"}, NowMs: 10, LeaseDurationMs: 100, Limit: 2})
	must(t, err)
	failure := []byte(`{"code":"app.down","atMs":20}`)
	ok, err := q.FailReaction(e.ctx, "p1", "a", ports.ReactionFailure{LeaseOwner: "other", Failure: failure, AtMs: 20, Retry: true, RetryAtMs: 40})
	must(t, err)
	if ok {
		t.Fatal("another owner failed the reaction")
	}
	ok, err = q.FailReaction(e.ctx, "p1", "a", ports.ReactionFailure{LeaseOwner: "w", Failure: failure, AtMs: 20, Retry: true, RetryAtMs: 40})
	must(t, err)
	r, _ := e.s.GetReaction(e.ctx, "p1", "a")
	if !ok || r.Status != ports.ReactionPending || r.AvailableAtMs != 40 || r.LeaseOwner != "" || r.Attempts != 1 || !jsonEqual(r.LastFailure, string(failure)) {
		t.Fatalf("retried reaction = %+v (%v)", r, ok)
	}
	ok, err = q.FailReaction(e.ctx, "p1", "b", ports.ReactionFailure{LeaseOwner: "w", Failure: failure, AtMs: 25})
	must(t, err)
	r, _ = e.s.GetReaction(e.ctx, "p1", "b")
	if !ok || r.Status != ports.ReactionDeadLetter || r.AvailableAtMs != 25 {
		t.Fatalf("dead-lettered reaction = %+v (%v)", r, ok)
	}
	// An operator retry resets only dead letters.
	ok, err = q.RetryReaction(e.ctx, "p1", "a", 90)
	must(t, err)
	if ok {
		t.Fatal("retry of a pending reaction")
	}
	ok, err = q.RetryReaction(e.ctx, "p1", "b", 90)
	must(t, err)
	r, _ = e.s.GetReaction(e.ctx, "p1", "b")
	if !ok || r.Status != ports.ReactionPending || r.Attempts != 0 || r.AvailableAtMs != 90 || r.LastFailure != nil {
		t.Fatalf("operator retry = %+v (%v)", r, ok)
	}
}

func testReactionPrune(t *testing.T, h Harness) {
	var rs []ports.Reaction
	for i := range 6 {
		rs = append(rs, reaction(fmt.Sprint("r", i), "email", 10))
	}
	e, q := queue(t, h, rs...)
	_, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"email"}, NowMs: 10, LeaseDurationMs: 1000, Limit: 5})
	must(t, err)
	// r0, r1 completed at 100, 200; r2 dead at 150; r3 dead at 300; r4 leased; r5 pending.
	for _, c := range []struct {
		key string
		at  int64
	}{{"r0", 100}, {"r1", 200}} {
		ok, err := q.CompleteReaction(e.ctx, "p1", c.key, "w", c.at)
		if err != nil || !ok {
			t.Fatalf("complete %s: %v %v", c.key, ok, err)
		}
	}
	for _, c := range []struct {
		key string
		at  int64
	}{{"r2", 150}, {"r3", 300}} {
		ok, err := q.FailReaction(e.ctx, "p1", c.key, ports.ReactionFailure{LeaseOwner: "w", Failure: []byte(`{"code":"x"}`), AtMs: c.at})
		if err != nil || !ok {
			t.Fatalf("fail %s: %v %v", c.key, ok, err)
		}
	}
	n, err := q.PruneReactions(e.ctx, "p1", ports.ReactionPrune{CompletedBeforeMs: 10_000, DeadLetterBeforeMs: 200, Limit: 2})
	must(t, err)
	if n != (ports.ReactionPruneCounts{Completed: 1, DeadLetter: 1}) {
		t.Fatalf("first pass = %+v, want the two oldest terminal rows (r0, r2)", n)
	}
	n, err = q.PruneReactions(e.ctx, "p1", ports.ReactionPrune{CompletedBeforeMs: 10_000, DeadLetterBeforeMs: 200, Limit: 10})
	must(t, err)
	if n != (ports.ReactionPruneCounts{Completed: 1}) {
		t.Fatalf("second pass = %+v", n)
	}
	left, err := e.s.ListReactions(e.ctx, "p1", nil, 10)
	must(t, err)
	if got := sortedCopy(keysOf(left)); !equalStrings(got, []string{"r3", "r4", "r5"}) {
		t.Fatalf("left after prune = %v", got)
	}
}
