package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// The helpers of the engines' group-commit tests: pushes of one items row
// each, held open, queued in order, and checked for all-or-nothing.

// GroupStore is an engine under a group-commit test.
type GroupStore interface {
	ports.Storage
	// PushesQueued is how many pushes wait behind a running one.
	PushesQueued() int
}

// PushItem upserts item id in partition, appends its commit (storing the
// seq in seq when set) and its push result, then runs then (which may
// fail the push).
func PushItem(ctx context.Context, s ports.Storage, partition, id string, then func(context.Context, ports.PushTx) error, seq *int64) error {
	return s.Push(ctx, partition, ports.PushOptions{WriterVersion: 1, ActorID: "a"}, func(tx ports.PushTx) error {
		w := Item(id, "o", 0)
		if err := tx.UpsertRow(ctx, "items", w); err != nil {
			return err
		}
		n, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: id,
			Changes: []commit.Change{Change(w)}})
		if err != nil {
			return err
		}
		if seq != nil {
			*seq = n
		}
		if _, err := tx.PutPushResult(ctx, "c", id, []byte(`{"status":"applied"}`)); err != nil {
			return err
		}
		if then != nil {
			return then(ctx, tx)
		}
		return nil
	})
}

// HoldPush starts a push to partition that keeps its transaction (its
// group) open until release is called; it returns once the push runs.
func HoldPush(t *testing.T, s ports.Storage, partition string) (release func() error) {
	t.Helper()
	running, rel := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once // the push runs again when its group is aborted
		done <- PushItem(context.Background(), s, partition, "holder", func(context.Context, ports.PushTx) error {
			once.Do(func() { close(running) })
			<-rel
			return nil
		}, nil)
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("holder: %v", err)
	}
	return func() error { close(rel); return <-done }
}

// QueuePush starts f in a goroutine and waits until its push is queued
// behind the running one, so queued pushes keep their order.
func QueuePush(t *testing.T, s GroupStore, f func() error) <-chan error {
	t.Helper()
	n := s.PushesQueued()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	deadline := time.Now().Add(10 * time.Second)
	for s.PushesQueued() != n+1 {
		select {
		case err := <-ch:
			t.Fatalf("push ended before queueing: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("push never queued")
		}
		time.Sleep(time.Millisecond)
	}
	return ch
}

// ItemPresent says whether item id's push landed, failing the test when
// its row and its push result disagree (half a push).
func ItemPresent(t *testing.T, s ports.Storage, partition, id string) bool {
	t.Helper()
	r, err := s.GetRow(context.Background(), partition, "items", id)
	if err != nil {
		t.Fatal(err)
	}
	_, stored, err := s.GetPushResult(context.Background(), partition, "c", id)
	if err != nil {
		t.Fatal(err)
	}
	if (r != nil) != stored {
		t.Fatalf("%s: row %v but push result %v", id, r != nil, stored)
	}
	return r != nil
}

// MaxSeq is the partition's newest commit seq.
func MaxSeq(t *testing.T, s ports.Storage, partition string) int64 {
	t.Helper()
	b, err := s.LogBounds(context.Background(), partition)
	if err != nil {
		t.Fatal(err)
	}
	return b.MaxSeq
}
