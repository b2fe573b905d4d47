package checkpoint

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestInstall(t *testing.T) {
	d := Declaration{Partition: "p", Name: "n", SchemaVersion: 2}
	cp, created := Install(nil, d, 10)
	if !created || cp.State != StateDeclared || cp.OwnerEpoch != 0 || cp.Watermark != 0 || cp.SchemaVersion != 2 || cp.UpdatedAtMs != 10 {
		t.Fatalf("fresh install = %+v, %v", cp, created)
	}
	act := Checkpoint{Partition: "p", Name: "n", SchemaVersion: 2, State: StateActivated, Watermark: 7, OwnerEpoch: 3}
	got, created := Install(&act, Declaration{Partition: "p", Name: "n", SchemaVersion: 5}, 20)
	if created || got != act {
		t.Fatalf("re-declare changed an existing row: %+v", got)
	}
}

func TestFence(t *testing.T) {
	if RaiseFence(0, false, 2) != 2 || RaiseFence(3, true, 2) != 3 || RaiseFence(2, true, 4) != 4 {
		t.Fatal("RaiseFence must be max(current, version)")
	}
	v1, v2 := int32(1), int32(2)
	tests := []struct {
		name     string
		required int32
		has      bool
		writer   *int32
		want     bool
	}{
		{"no fence allows NULL", 0, false, nil, true},
		{"no fence allows any", 0, false, &v1, true},
		{"fence refuses NULL", 2, true, nil, false},
		{"fence refuses lower", 2, true, &v1, false},
		{"fence allows equal", 2, true, &v2, true},
	}
	for _, tt := range tests {
		if got := FenceAllows(tt.required, tt.has, tt.writer); got != tt.want {
			t.Errorf("%s: FenceAllows = %v", tt.name, got)
		}
	}
}

func TestClaim(t *testing.T) {
	if _, err := Claim(nil, 2, 1); syncerr.CodeOf(err) != syncerr.StorageCheckpointNotDeclared {
		t.Fatalf("absent: %v", err)
	}
	act := Checkpoint{State: StateActivated}
	if _, err := Claim(&act, 2, 1); syncerr.CodeOf(err) != syncerr.StorageCheckpointNotDeclared {
		t.Fatalf("activated: %v", err)
	}
	cp := Checkpoint{State: StateDeclared, SchemaVersion: 1}
	c1, err := Claim(&cp, 2, 5)
	if err != nil || c1.OwnerEpoch != 1 || c1.State != StateBackfilling || c1.SchemaVersion != 2 || c1.UpdatedAtMs != 5 {
		t.Fatalf("first claim = %+v, %v", c1, err)
	}
	c2, err := Claim(&c1, 2, 6)
	if err != nil || c2.OwnerEpoch != 2 || c2.State != StateBackfilling {
		t.Fatalf("second claim = %+v, %v", c2, err)
	}
}

func TestAdvance(t *testing.T) {
	cp := Checkpoint{State: StateBackfilling, OwnerEpoch: 2, Watermark: 3}
	if got, ok := Advance(&cp, 1, 9, 9, "c", 9); ok || got != cp {
		t.Fatalf("superseded owner advanced: %+v", got)
	}
	got, ok := Advance(&cp, 2, 9, 4, "c", 10)
	if !ok || got.Watermark != 9 || got.ObservedRows != 4 || got.UpdatedAtMs != 10 {
		t.Fatalf("owner advance = %+v, %v", got, ok)
	}
	if _, ok := Advance(nil, 0, 1, 1, "", 1); ok {
		t.Fatal("absent checkpoint advanced")
	}
}

func TestClassifySources(t *testing.T) {
	tests := []struct {
		changed   bool
		horizon   int64
		watermark int64
		want      SourceState
	}{
		{false, 0, 0, SourceClean},
		{false, 5, 5, SourceClean},
		{false, 6, 5, SourceUnverifiable},
		{true, 6, 5, SourceChanged},
		{true, 0, 5, SourceChanged},
	}
	for _, tt := range tests {
		if got := ClassifySources(tt.changed, tt.horizon, tt.watermark); got != tt.want {
			t.Errorf("ClassifySources(%v,%d,%d) = %q, want %q", tt.changed, tt.horizon, tt.watermark, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	backfilling := &Checkpoint{SchemaVersion: 2, State: StateBackfilling, OwnerEpoch: 1}
	activated := &Checkpoint{SchemaVersion: 2, State: StateActivated, OwnerEpoch: 1}
	tests := []struct {
		name      string
		in        ActivationInput
		want      Activation
		fenceMiss bool
	}{
		{"no fence", ActivationInput{Checkpoint: backfilling, Sources: SourceClean, OwnerEpoch: 1}, "", true},
		{"fence too low", ActivationInput{Checkpoint: backfilling, HasFence: true, FenceVersion: 1, Sources: SourceClean, OwnerEpoch: 1}, "", true},
		{"absent checkpoint", ActivationInput{HasFence: true, FenceVersion: 2, Sources: SourceClean, OwnerEpoch: 1}, "", true},
		{"changed sources", ActivationInput{Checkpoint: backfilling, HasFence: true, FenceVersion: 2, Sources: SourceChanged, OwnerEpoch: 1}, Stale, false},
		{"pruned window", ActivationInput{Checkpoint: backfilling, HasFence: true, FenceVersion: 2, Sources: SourceUnverifiable, OwnerEpoch: 1}, Unverifiable, false},
		{"superseded owner", ActivationInput{Checkpoint: backfilling, HasFence: true, FenceVersion: 2, Sources: SourceClean, OwnerEpoch: 0}, Stale, false},
		{"already activated", ActivationInput{Checkpoint: activated, HasFence: true, FenceVersion: 2, Sources: SourceClean, OwnerEpoch: 1}, Stale, false},
		{"activates", ActivationInput{Checkpoint: backfilling, HasFence: true, FenceVersion: 3, Sources: SourceClean, OwnerEpoch: 1}, Activated, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decide(tt.in)
			if tt.fenceMiss {
				if syncerr.CodeOf(err) != syncerr.StorageCheckpointFenceMissing {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Decide = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
