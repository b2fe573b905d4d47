package reactions_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/reactions"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

type handler struct {
	typ   string
	calls atomic.Int32
	fn    func(n int32, d ports.ReactionDelivery) error
}

func (h *handler) Type() string { return h.typ }
func (h *handler) HandleReaction(_ context.Context, d ports.ReactionDelivery) error {
	return h.fn(h.calls.Add(1), d)
}

func setup(t *testing.T, maxAttempts int, keys ...string) *memory.Store {
	t.Helper()
	st := memory.New()
	ctx := context.Background()
	if err := st.EnsureSchema(ctx, ssptest.Schema(t), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchPartition(ctx, "p", 1); err != nil {
		t.Fatal(err)
	}
	err := st.Push(ctx, "p", ports.PushOptions{WriterVersion: 2}, func(tx ports.PushTx) error {
		var rs []ports.Reaction
		for _, k := range keys {
			rs = append(rs, ports.Reaction{IdempotencyKey: k, Type: "mail", Version: 1, Payload: []byte(`{}`),
				MaxAttempts: maxAttempts, AvailableAtMs: 1000})
		}
		return tx.EnqueueReactions(ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "k", CommitSeq: 1, CreatedAtMs: 1000}, rs)
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRunnerLifecycle(t *testing.T) {
	ctx := context.Background()
	st := setup(t, 3, "a", "b")
	now := time.UnixMilli(2000)
	h := &handler{typ: "mail", fn: func(n int32, d ports.ReactionDelivery) error {
		if d.IdempotencyKey == "b" {
			return errors.New("smtp down: secret text")
		}
		return nil
	}}
	r, err := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{h}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx, "p"); err != nil || n != 2 {
		t.Fatalf("first pass: %d %v", n, err)
	}
	a, _ := st.GetReaction(ctx, "p", "a")
	b, _ := st.GetReaction(ctx, "p", "b")
	if a.Status != ports.ReactionCompleted || b.Status != ports.ReactionPending || b.AvailableAtMs != 3000 {
		t.Fatalf("after pass 1: %+v %+v", a, b)
	}
	if string(b.LastFailure) != `{"code":"reaction.handler_failed","atMs":2000}` {
		t.Fatalf("failure record %s", b.LastFailure)
	}
	// Not due yet.
	if n, _ := r.RunOnce(ctx, "p"); n != 0 {
		t.Fatalf("ran %d before the backoff elapsed", n)
	}
	now = time.UnixMilli(3000)
	r.RunOnce(ctx, "p") // attempt 2, backoff 2s
	now = time.UnixMilli(5000)
	r.RunOnce(ctx, "p") // attempt 3 = max → dead letter
	b, _ = st.GetReaction(ctx, "p", "b")
	if b.Status != ports.ReactionDeadLetter || b.Attempts != 3 {
		t.Fatalf("after max attempts: %+v", b)
	}
	if r.Backoff(1) != time.Second || r.Backoff(2) != 2*time.Second || r.Backoff(30) != 5*time.Minute {
		t.Fatal("backoff")
	}
}

func TestPermanentFailure(t *testing.T) {
	ctx := context.Background()
	st := setup(t, 10, "a")
	h := &handler{typ: "mail", fn: func(int32, ports.ReactionDelivery) error {
		return &ports.ReactionError{Code: "mail.bad_address", Details: []byte(`{"field":"to"}`), Permanent: true}
	}}
	r, _ := reactions.New(reactions.Options{Queue: st, Handlers: []ports.ReactionHandler{h}, Now: func() time.Time { return time.UnixMilli(2000) }})
	r.RunOnce(ctx, "p")
	a, _ := st.GetReaction(ctx, "p", "a")
	if a.Status != ports.ReactionDeadLetter || string(a.LastFailure) != `{"code":"mail.bad_address","atMs":2000,"details":{"field":"to"}}` {
		t.Fatalf("%+v %s", a, a.LastFailure)
	}
}

// claimFails fails every claim in one partition.
type claimFails struct {
	ports.ReactionQueue
	partition string
}

func (q claimFails) ClaimReactions(ctx context.Context, partition string, c ports.ReactionClaim) ([]ports.StoredReaction, error) {
	if partition == q.partition {
		return nil, errors.New("queue down")
	}
	return q.ReactionQueue.ClaimReactions(ctx, partition, c)
}

// TestRunnerPass: the scheduled delivery works every partition off in
// batches until nothing is due; a failing partition is reported with its
// name and does not keep the others from delivery.
func TestRunnerPass(t *testing.T) {
	tests := []struct {
		name    string
		failIn  string
		wantErr string
	}{
		{name: "every due reaction is delivered, batch after batch"},
		{name: "a failing partition does not stop the others", failIn: "q", wantErr: `partition "q": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := setup(t, 3, "a", "b", "c")
			if _, err := st.TouchPartition(ctx, "q", 1); err != nil {
				t.Fatal(err)
			}
			h := &handler{typ: "mail", fn: func(int32, ports.ReactionDelivery) error { return nil }}
			r, err := reactions.New(reactions.Options{Queue: claimFails{st, tt.failIn}, Partitions: st, BatchSize: 1,
				Handlers: []ports.ReactionHandler{h}, Now: func() time.Time { return time.UnixMilli(2000) }})
			if err != nil {
				t.Fatal(err)
			}
			err = r.Pass(ctx)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("pass: %v, want %q", err, tt.wantErr)
			}
			if got := h.calls.Load(); got != 3 {
				t.Fatalf("%d deliveries in one pass, want 3", got)
			}
		})
	}
	r, _ := reactions.New(reactions.Options{Queue: memory.New()})
	if err := r.Pass(context.Background()); err == nil {
		t.Fatal("a runner without partitions passed")
	}
}
