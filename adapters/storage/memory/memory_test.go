package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

const ir = `{"irVersion":1,"schemaVersion":1,"schemaVersions":[{"version":1,"migrations":[]}],
 "tables":[{"name":"t","primaryKey":"id","columns":[{"name":"id","type":"string","nullable":false},
 {"name":"p","type":"string","nullable":false}],"scopes":["p:{p}"]}]}`

func ensured(t *testing.T, s *memory.Store) {
	t.Helper()
	sc, err := schema.Load([]byte(ir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(context.Background(), sc, nil); err != nil {
		t.Fatal(err)
	}
}

func TestHandlesShareTheDatabase(t *testing.T) {
	ctx := context.Background()
	a := memory.New()
	ensured(t, a)
	err := a.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		return tx.UpsertRow(ctx, "t", ports.RowWrite{RowID: "r", Version: 1, Scopes: map[string]string{"p": "x"}, Payload: []byte{0}, Values: []any{"r", "x"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	b := a.Reopen()
	// A reopened handle needs its own EnsureSchema before row work.
	if _, err := b.GetRow(ctx, "p", "t", "r"); syncerr.CodeOf(err) != syncerr.InternalError {
		t.Fatalf("row read before EnsureSchema: %v", err)
	}
	ensured(t, b)
	if r, err := b.GetRow(ctx, "p", "t", "r"); err != nil || r == nil {
		t.Fatalf("row through the second handle = %v, %v", r, err)
	}
	// Closing one handle leaves the other working.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetRow(ctx, "p", "t", "r"); err == nil {
		t.Fatal("closed handle still reads")
	}
	if r, err := a.GetRow(ctx, "p", "t", "r"); err != nil || r == nil {
		t.Fatalf("first handle after the second closed = %v, %v", r, err)
	}
}

func TestReturnedRowsAreCopies(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	ensured(t, s)
	payload := []byte{1, 2, 3}
	err := s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		return tx.UpsertRow(ctx, "t", ports.RowWrite{RowID: "r", Version: 1, Scopes: map[string]string{"p": "x"}, Payload: payload, Values: []any{"r", "x"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	payload[0] = 9
	r, _ := s.GetRow(ctx, "p", "t", "r")
	if r.Payload[0] != 1 {
		t.Fatal("the store aliases the caller's payload")
	}
	r.Payload[1], r.Scopes["p"] = 9, "y"
	again, _ := s.GetRow(ctx, "p", "t", "r")
	if again.Payload[1] != 2 || again.Scopes["p"] != "x" {
		t.Fatal("the store hands out its own row")
	}
}

func TestPushHonoursContextWhileWaiting(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	ensured(t, s)
	hold, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(ports.PushTx) error {
			close(hold)
			<-release
			return nil
		})
	}()
	<-hold
	defer close(release)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := s.Push(cctx, "p", ports.PushOptions{WriterVersion: 1}, func(ports.PushTx) error {
		t.Error("ran while the partition was locked")
		return nil
	})
	if err == nil {
		t.Fatal("waiting push succeeded after its deadline")
	}
}
