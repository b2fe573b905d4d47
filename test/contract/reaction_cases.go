package contract

import (
	"fmt"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
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
			{"PruneRacesRetry", testReactionPruneRacesRetry},
			{"ClaimsExclusiveAcrossStores", testReactionClaimsAcrossStores},
			{"ListPages", testReactionListPages},
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
	if n != (ports.ReactionPruneCounts{Completed: 1, DeadLetter: 1, MayHaveMore: true}) {
		t.Fatalf("first pass = %+v, want the two oldest terminal rows (r0, r2) and more to come", n)
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

// deadLetters enqueues n reactions and dead-letters them all at 100.
func deadLetters(t *testing.T, h Harness, n int) (*env, ports.ReactionQueue, []string) {
	t.Helper()
	var rs []ports.Reaction
	var keys []string
	for i := range n {
		k := fmt.Sprintf("d%02d", i)
		rs = append(rs, reaction(k, "email", 10))
		keys = append(keys, k)
	}
	e, q := queue(t, h, rs...)
	got, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"email"}, NowMs: 10, LeaseDurationMs: 1000, Limit: n})
	must(t, err)
	if len(got) != n {
		t.Fatalf("claimed %d of %d", len(got), n)
	}
	for _, k := range keys {
		ok, err := q.FailReaction(e.ctx, "p1", k, ports.ReactionFailure{LeaseOwner: "w", Failure: []byte(`{"code":"x","atMs":100}`), AtMs: 100})
		if err != nil || !ok {
			t.Fatalf("fail %s: %v %v", k, ok, err)
		}
	}
	return e, q, keys
}

// testReactionPruneRacesRetry: SPEC §6.9 "manual retry and cleanup may
// race; their storage operations MUST serialize so exactly one terminal
// transition wins": every dead letter is either reset by its retry or
// deleted by the prune, never both, never neither.
func testReactionPruneRacesRetry(t *testing.T, h Harness) {
	const n = 24
	e, q, keys := deadLetters(t, h, n)
	retried := make([]bool, n)
	var pruned ports.ReactionPruneCounts
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	start := make(chan struct{})
	for i, k := range keys {
		wg.Go(func() {
			<-start
			ok, err := q.RetryReaction(e.ctx, "p1", k, 200)
			retried[i] = ok
			errs <- err
		})
	}
	wg.Go(func() {
		<-start
		var err error
		pruned, err = q.PruneReactions(e.ctx, "p1", ports.ReactionPrune{CompletedBeforeMs: 1000, DeadLetterBeforeMs: 1000, Limit: 1000})
		errs <- err
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	deleted := 0
	for i, k := range keys {
		r, err := e.s.GetReaction(e.ctx, "p1", k)
		must(t, err)
		switch {
		case r == nil && retried[i]:
			t.Fatalf("%s: retried and pruned", k)
		case r == nil:
			deleted++
		case !retried[i]:
			t.Fatalf("%s: neither retried nor pruned: %+v", k, r)
		case r.Status != ports.ReactionPending:
			t.Fatalf("%s: retried but %s", k, r.Status)
		}
	}
	if pruned.DeadLetter != deleted || pruned.Completed != 0 {
		t.Fatalf("prune reported %+v, %d rows are gone", pruned, deleted)
	}
}

// testReactionClaimsAcrossStores: workers claiming at once through two
// storages over one database (two nodes) receive disjoint leases: while
// the leases hold, no reaction is handed out twice.
func testReactionClaimsAcrossStores(t *testing.T, h Harness) {
	const n, workers = 60, 4
	var rs []ports.Reaction
	for i := range n {
		rs = append(rs, reaction(fmt.Sprintf("k%02d", i), "email", 10))
	}
	e, q := queue(t, h, rs...)
	other := h.Reopen(t, e.s)
	must(t, other.EnsureSchema(e.ctx, e.sc, nil))
	q2, ok := other.(ports.ReactionQueue)
	if !ok {
		t.Fatal("the reopened storage has no reaction queue")
	}
	var mu sync.Mutex
	owners := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := make(chan struct{})
	for w := range workers {
		wq := q
		if w%2 == 1 {
			wq = q2
		}
		wg.Go(func() {
			<-start
			for pass := 0; ; pass++ {
				owner := fmt.Sprintf("w%d-%d", w, pass)
				got, err := wq.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: owner, Types: []string{"email"},
					NowMs: 100, LeaseDurationMs: 60_000, Limit: 3})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					if prev, dup := owners[r.IdempotencyKey]; dup {
						t.Errorf("%s leased to %s and %s", r.IdempotencyKey, prev, owner)
					}
					owners[r.IdempotencyKey] = owner
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	if len(owners) != n {
		t.Fatalf("%d of %d reactions claimed", len(owners), n)
	}
	for k, owner := range owners {
		r, err := e.s.GetReaction(e.ctx, "p1", k)
		must(t, err)
		if r.LeaseOwner != owner || r.Attempts != 1 {
			t.Fatalf("%s: stored %+v, claimed by %s", k, r, owner)
		}
	}
}

// testReactionListPages: filtered keyset pages in (created time, key)
// order, continuing after a cursor, across commits.
func testReactionListPages(t *testing.T, h Harness) {
	e, q := queue(t, h, reaction("b", "email", 10), reaction("a", "sms", 10), reaction("c", "email", 10))
	must(t, e.push("p1", func(tx ports.PushTx) error {
		seq, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 5, ActorID: "a", ClientID: "c", ClientCommitID: "early"})
		if err != nil {
			return err
		}
		return tx.EnqueueReactions(e.ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "early", CommitSeq: seq, CreatedAtMs: 5},
			[]ports.Reaction{reaction("z", "email", 10)})
	}))
	l, ok := e.s.(ports.ReactionLister)
	if !ok {
		t.Skip("storage does not implement ports.ReactionLister")
	}
	_, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"sms"}, NowMs: 10, LeaseDurationMs: 100, Limit: 1})
	must(t, err)
	page := func(q ports.ReactionListQuery) []string {
		t.Helper()
		rs, err := l.ListReactionPage(e.ctx, "p1", q)
		must(t, err)
		return keysOf(rs)
	}
	for _, c := range []struct {
		name string
		q    ports.ReactionListQuery
		want []string
	}{
		{"all", ports.ReactionListQuery{Limit: 10}, []string{"z", "a", "b", "c"}},
		{"first page", ports.ReactionListQuery{Limit: 2}, []string{"z", "a"}},
		{"after the first page", ports.ReactionListQuery{Limit: 2, After: &ports.ReactionCursor{CreatedAtMs: 10, IdempotencyKey: "a"}}, []string{"b", "c"}},
		{"after an earlier time", ports.ReactionListQuery{Limit: 10, After: &ports.ReactionCursor{CreatedAtMs: 5, IdempotencyKey: "zz"}}, []string{"a", "b", "c"}},
		{"by type", ports.ReactionListQuery{Limit: 10, Types: []string{"email"}}, []string{"z", "b", "c"}},
		{"by status", ports.ReactionListQuery{Limit: 10, Statuses: []ports.ReactionStatus{ports.ReactionLeased}}, []string{"a"}},
		{"by type and status", ports.ReactionListQuery{Limit: 10, Types: []string{"email"}, Statuses: []ports.ReactionStatus{ports.ReactionLeased}}, []string{}},
	} {
		if got := page(c.q); !equalStrings(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if rs, err := l.ListReactionPage(e.ctx, "other", ports.ReactionListQuery{Limit: 10}); err != nil || len(rs) != 0 {
		t.Fatalf("unknown partition: %v %v", rs, err)
	}
	if _, err := l.ListReactionPage(e.ctx, "p1", ports.ReactionListQuery{}); syncerr.CodeOf(err) != syncerr.StorageInvalidLimit {
		t.Fatalf("limit 0: %v", err)
	}
}
