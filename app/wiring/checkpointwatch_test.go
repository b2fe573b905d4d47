package wiring

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/testclock"
)

// activate claims and activates a checkpoint the way a finished backfill
// does (no sources: nothing can be stale).
func activate(t *testing.T, st ports.Storage, d checkpoint.Declaration) {
	t.Helper()
	ctx := context.Background()
	cp, err := st.ClaimCheckpoint(ctx, d, 5)
	if err != nil {
		t.Fatal(err)
	}
	if act, err := st.ActivateCheckpoint(ctx, ports.CheckpointActivation{Partition: d.Partition, Name: d.Name, OwnerEpoch: cp.OwnerEpoch, NowMs: 6}); err != nil || act != checkpoint.Activated {
		t.Fatalf("activate = %v, %v", act, err)
	}
}

// TestReadinessWatchesCheckpoints: once ready, a checkpoint declared at the
// running version by someone else turns /readyz not ready (reason
// backfill_checkpoint) and lists it with its progress; the server turns
// ready again by itself when it activates. A checkpoint the process
// declared is listed but keeps it ready.
func TestReadinessWatchesCheckpoints(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.UnixMilli(1_000_000))
	r := platform.NewReadiness(clk)
	s, err := platform.CompileSchema(platform.NewSchemaSource(config.Default()), r)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.NewWithOptions(memory.Options{Now: func() time.Time { return time.UnixMilli(1) }})
	own := checkpoint.Declaration{Partition: "p1", Name: "ours", SchemaVersion: s.Version}
	p := &platform.Preparer{Store: st, Readiness: r, Log: zap.NewNop(), Declarations: []checkpoint.Declaration{own}}
	if err := p.EnsureStorage(ctx, s); err != nil {
		t.Fatal(err)
	}
	r.SetListening()
	r.WatchCheckpoints(platform.CheckpointWatch{Store: st, Declarations: p.Declarations})
	// The migration installed the process's own declaration: listed, ready.
	if st := r.Status(); !st.Ready || len(st.Checkpoints) != 1 || !st.Checkpoints[0].Declared {
		t.Fatalf("with our own checkpoint: %+v", st)
	}
	other := checkpoint.Declaration{Partition: "p2", Name: "theirs", SchemaVersion: s.Version}
	if _, err := st.DeclareCheckpoint(ctx, other, 2); err != nil {
		t.Fatal(err)
	}
	cp, err := st.ClaimCheckpoint(ctx, other, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.AdvanceCheckpoint(ctx, ports.CheckpointAdvance{Partition: "p2", Name: "theirs", OwnerEpoch: cp.OwnerEpoch, Watermark: 7, ObservedRows: 40, NowMs: 4}); err != nil || !ok {
		t.Fatalf("advance = %v, %v", ok, err)
	}
	// Within the TTL the last read stands.
	if st := r.Status(); !st.Ready {
		t.Fatalf("read again within the TTL: %+v", st)
	}
	clk.Advance(time.Second)
	got := r.Status()
	if got.Ready || got.Reason != string(platform.PhaseBackfillCheckpoint) || len(got.Checkpoints) != 2 {
		t.Fatalf("with an undeclared pending checkpoint: %+v", got)
	}
	b, _ := json.Marshal(got.Checkpoints)
	want := `[{"partition":"p1","name":"ours","state":"declared","schemaVersion":` + itoa(s.Version) + `,"watermark":0,"observedRows":0,"ownerEpoch":0,"declared":true,"updatedAt":"1970-01-01T00:00:00.001Z"},` +
		`{"partition":"p2","name":"theirs","state":"backfilling","schemaVersion":` + itoa(s.Version) + `,"watermark":7,"observedRows":40,"ownerEpoch":1,"declared":false,"updatedAt":"1970-01-01T00:00:00.004Z"}]`
	if string(b) != want {
		t.Fatalf("/readyz checkpoints\n got %s\nwant %s", b, want)
	}
	activate(t, st, other)
	clk.Advance(time.Second)
	if got := r.Status(); !got.Ready || len(got.Checkpoints) != 1 || got.Checkpoints[0].Name != "ours" {
		t.Fatalf("after the activation: %+v", got)
	}
}

// TestPreparerTurnsReadyWhenTheCheckpointActivates: a process started
// while an undeclared checkpoint is pending waits in phase
// backfill_checkpoint, retrying, and turns ready without a restart once
// another process activates it.
func TestPreparerTurnsReadyWhenTheCheckpointActivates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := platform.NewReadiness(platform.NewClock())
	s, err := platform.CompileSchema(platform.NewSchemaSource(config.Default()), r)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	if err := st.EnsureSchema(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	d := checkpoint.Declaration{Partition: "p1", Name: "proj", SchemaVersion: s.Version}
	if _, err := st.DeclareCheckpoint(ctx, d, 1); err != nil {
		t.Fatal(err)
	}
	// A second handle: this process's store has not ensured the schema.
	p := &platform.Preparer{Store: st.Reopen(), Readiness: r, Log: zap.NewNop()}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, s, platform.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}) }()
	for r.Phase() != platform.PhaseBackfillCheckpoint {
		if ctx.Err() != nil {
			t.Fatalf("never waited for the checkpoint: phase %s", r.Phase())
		}
		time.Sleep(100 * time.Microsecond)
	}
	if e := r.Status().Error; e == nil || e.Code != string(syncerr.StorageCheckpointIncomplete) {
		t.Fatalf("waiting phase error = %+v", e)
	}
	activate(t, st, d)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Phase() != platform.PhaseReady {
		t.Fatalf("phase = %s", r.Phase())
	}
}

func itoa(v int32) string { b, _ := json.Marshal(v); return string(b) }
