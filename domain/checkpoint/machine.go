package checkpoint

import "github.com/syncd-dev/syncd/domain/syncerr"

// The state machine below is the storage-independent part of the
// checkpoint rules. The in-memory storage applies it directly; the SQL
// engines express the same transitions in statements and can use these
// functions to decide outcomes from values they read under the lock.

// Install is the declaration transition: an absent checkpoint becomes a
// fresh declared row; an existing row, whatever its state, is returned
// unchanged (never re-declared). created reports whether a row was made.
func Install(existing *Checkpoint, d Declaration, nowMs int64) (cp Checkpoint, created bool) {
	if existing != nil {
		return *existing, false
	}
	return Checkpoint{
		Partition:     d.Partition,
		Name:          d.Name,
		SchemaVersion: d.SchemaVersion,
		State:         StateDeclared,
		UpdatedAtMs:   nowMs,
	}, true
}

// RaiseFence returns the partition's required writer version after a
// declaration at version: max(current, version), never lower; has reports
// whether a fence row existed.
func RaiseFence(current int32, has bool, version int32) int32 {
	if has && current > version {
		return current
	}
	return version
}

// FenceAllows reports whether a commit stamped writerVersion (nil = NULL,
// an old writer) may be appended under the partition's fence.
func FenceAllows(required int32, has bool, writerVersion *int32) bool {
	if !has {
		return true
	}
	return writerVersion != nil && *writerVersion >= required
}

// Claim is the ownership transition: owner_epoch += 1, declared →
// backfilling (backfilling stays), schema version and time refreshed. An
// absent or activated checkpoint is sync.storage.checkpoint_not_declared.
func Claim(existing *Checkpoint, schemaVersion int32, nowMs int64) (Checkpoint, error) {
	if existing == nil || existing.State == StateActivated {
		return Checkpoint{}, syncerr.Newf(syncerr.StorageCheckpointNotDeclared, "no claimable checkpoint")
	}
	cp := *existing
	cp.OwnerEpoch++
	if cp.State == StateDeclared {
		cp.State = StateBackfilling
	}
	cp.SchemaVersion = schemaVersion
	cp.UpdatedAtMs = nowMs
	return cp, nil
}

// Advance is the owner-epoch CAS: the watermark, observed rows, cursor
// and time move only while ownerEpoch matches; ok is false (and the row
// unchanged) for an absent checkpoint or a superseded owner.
func Advance(existing *Checkpoint, ownerEpoch, watermark, observedRows int64, cursor string, nowMs int64) (cp Checkpoint, ok bool) {
	if existing == nil || existing.OwnerEpoch != ownerEpoch {
		if existing != nil {
			return *existing, false
		}
		return Checkpoint{}, false
	}
	cp = *existing
	cp.Watermark = watermark
	cp.ObservedRows = observedRows
	cp.Cursor = cursor
	cp.UpdatedAtMs = nowMs
	return cp, true
}

// ClassifySources answers hasSourceChangesAbove from values read in one
// snapshot, the horizon first: a source change above watermark is changed;
// else a horizon past the watermark is unverifiable (pruned history never
// reports clean); else clean. An empty source list is clean without reading.
func ClassifySources(changedAbove bool, horizonSeq, watermark int64) SourceState {
	if changedAbove {
		return SourceChanged
	}
	if horizonSeq > watermark {
		return SourceUnverifiable
	}
	return SourceClean
}

// ActivationInput is what activation reads under the partition write lock.
type ActivationInput struct {
	// Checkpoint is the stored row, nil when absent.
	Checkpoint *Checkpoint
	// FenceVersion and HasFence describe the partition's writer fence.
	FenceVersion int32
	HasFence     bool
	// Sources is the source state above the requested watermark.
	Sources SourceState
	// OwnerEpoch is the caller's claim.
	OwnerEpoch int64
}

// Decide is the activation decision: the fence must exist at or above the
// checkpoint's schema version (else sync.storage.checkpoint_fence_missing);
// changed sources give Stale and unverifiable sources Unverifiable, both
// writing nothing; then a matching owner epoch on a not-yet-activated row
// gives Activated (the caller then stores state activated with the
// watermark); anything else (superseded owner, already activated) is Stale.
func Decide(in ActivationInput) (Activation, error) {
	if in.Checkpoint == nil || !in.HasFence || in.FenceVersion < in.Checkpoint.SchemaVersion {
		return "", syncerr.Newf(syncerr.StorageCheckpointFenceMissing, "writer fence not raised for the checkpoint's schema version")
	}
	switch in.Sources {
	case SourceChanged:
		return Stale, nil
	case SourceUnverifiable:
		return Unverifiable, nil
	}
	if in.Checkpoint.State == StateActivated || in.Checkpoint.OwnerEpoch != in.OwnerEpoch {
		return Stale, nil
	}
	return Activated, nil
}
