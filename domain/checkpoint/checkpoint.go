// Package checkpoint models safe schema upgrades: backfill checkpoint
// declarations and their stored state machine, and the serve gate that
// decides whether a process may serve a request (the 0.24 readiness rules).
package checkpoint

// State is a stored checkpoint's lifecycle state.
type State string

// Checkpoint states: declared → backfilling → activated (terminal).
const (
	StateDeclared    State = "declared"
	StateBackfilling State = "backfilling"
	StateActivated   State = "activated"
)

// Declaration names a checkpoint this process knows how to backfill.
type Declaration struct {
	Partition     string
	Name          string
	SchemaVersion int32
}

// Checkpoint is a stored checkpoint row.
type Checkpoint struct {
	Partition     string
	Name          string
	SchemaVersion int32
	State         State
	// Watermark is the highest source commit_seq the projection was derived from.
	Watermark int64
	// OwnerEpoch is the monotonic claim counter; advances CAS on it.
	OwnerEpoch   int64
	ObservedRows int64
	// Cursor is the backfill's own resume position, opaque to storage
	// and stored with every advance ("" until the first one).
	Cursor      string
	UpdatedAtMs int64
}

// Activation is the outcome of activating a checkpoint.
type Activation string

// Activation outcomes.
const (
	Activated    Activation = "activated"
	Stale        Activation = "stale"
	Unverifiable Activation = "unverifiable"
)

// SourceState answers whether source tables changed above a watermark.
type SourceState string

// Source states.
const (
	SourceClean        SourceState = "clean"
	SourceChanged      SourceState = "changed"
	SourceUnverifiable SourceState = "unverifiable"
)

// PendingRef names a checkpoint at the running version that is not activated.
type PendingRef struct {
	Partition string
	Name      string
}

// ServeGate is one consistent read of what decides serving: the stored
// schema version (0 when unset), the partition's log epoch and every
// pending checkpoint at the running version across all partitions.
type ServeGate struct {
	StoredSchemaVersion int32
	LogEpoch            string
	Pending             []PendingRef
}
