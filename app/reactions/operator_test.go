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

// deadLettered runs every reaction of setup once into a permanent failure.
func deadLettered(t *testing.T, keys ...string) *memory.Store {
	t.Helper()
	st := setup(t, 3, keys...)
	h := &handler{typ: "mail", fn: func(int32, ports.ReactionDelivery) error {
		return &ports.ReactionError{Code: "mail.bad_address", Permanent: true}
	}}
	r, err := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{h}, BatchSize: len(keys),
		Now: func() time.Time { return time.UnixMilli(2000) }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(context.Background(), "p"); err != nil || n != len(keys) {
		t.Fatalf("pass: %d %v", n, err)
	}
	return st
}

// TestListPagesThroughLimit: List reads across pages up to its limit.
func TestListPagesThroughLimit(t *testing.T) {
	var keys []string
	for i := range 1200 {
		keys = append(keys, fmt.Sprintf("k%04d", i))
	}
	st := deadLettered(t, keys...)
	for _, c := range []struct{ limit, want int }{{1, 1}, {500, 500}, {501, 501}, {1199, 1199}, {5000, 1200}} {
		got, err := reactions.List(context.Background(), st, "p", ports.ReactionListQuery{}, c.limit)
		if err != nil || len(got) != c.want {
			t.Fatalf("limit %d: %d reactions, %v", c.limit, len(got), err)
		}
		for i, r := range got {
			if r.IdempotencyKey != keys[i] {
				t.Fatalf("limit %d: #%d is %s, want %s", c.limit, i, r.IdempotencyKey, keys[i])
			}
		}
	}
}

// TestRetryDeadLetters: every dead letter (of the type asked for) becomes
// pending and due now, attempts and failure cleared; others stay.
func TestRetryDeadLetters(t *testing.T) {
	ctx := context.Background()
	var keys []string
	for i := range 700 {
		keys = append(keys, fmt.Sprintf("k%04d", i))
	}
	st := deadLettered(t, keys...)
	res, err := reactions.RetryDeadLetters(ctx, st, st, "p", []string{"sms"}, 9000)
	if err != nil || res.Retried != 0 {
		t.Fatalf("other type: %+v %v", res, err)
	}
	res, err = reactions.RetryDeadLetters(ctx, st, st, "p", []string{"mail"}, 9000)
	if err != nil || res != (reactions.RetryResult{Partition: "p", Retried: 700}) {
		t.Fatalf("retry: %+v %v", res, err)
	}
	for _, k := range []string{"k0000", "k0699"} {
		r, _ := st.GetReaction(ctx, "p", k)
		if r.Status != ports.ReactionPending || r.Attempts != 0 || r.AvailableAtMs != 9000 || r.LastFailure != nil {
			t.Fatalf("%s after retry: %+v", k, r)
		}
	}
	if res, _ := reactions.RetryDeadLetters(ctx, st, st, "p", nil, 9000); res.Retried != 0 {
		t.Fatalf("second retry reset %d", res.Retried)
	}
}
