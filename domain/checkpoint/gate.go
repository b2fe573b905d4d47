package checkpoint

import "github.com/syncd-dev/syncd/domain/syncerr"

// RefusalKind names why a serve gate refuses.
type RefusalKind string

// Refusal kinds (0.24 readiness).
const (
	// RefuseSchema: the database was migrated past the running build.
	RefuseSchema RefusalKind = "schema"
	// RefuseCheckpoint: a pending checkpoint this process did not declare.
	RefuseCheckpoint RefusalKind = "checkpoint"
	// RefuseEpoch: the gate token changed between two reads.
	RefuseEpoch RefusalKind = "epoch"
)

// Refusal is a closed serve gate. Stored and Running are set for
// RefuseSchema; Partition and Name for RefuseCheckpoint.
type Refusal struct {
	Kind      RefusalKind
	Stored    int32
	Running   int32
	Partition string
	Name      string
}

// notReadyMessage is the client-facing message of every refusal; the
// projection name travels only in details.
const notReadyMessage = "server schema is not ready for this request"

// Declared reports whether decls declare the checkpoint (partition, name).
func Declared(decls []Declaration, partition, name string) bool {
	for _, d := range decls {
		if d.Partition == partition && d.Name == name {
			return true
		}
	}
	return false
}

// FirstUndeclared returns the first pending checkpoint that decls do not
// declare.
func FirstUndeclared(pending []PendingRef, decls []Declaration) (PendingRef, bool) {
	for _, p := range pending {
		if !Declared(decls, p.Partition, p.Name) {
			return p, true
		}
	}
	return PendingRef{}, false
}

// GateRefusal evaluates the serve gate for a process running schema version
// running that declared decls: a database newer than the build refuses
// with RefuseSchema; otherwise the first pending checkpoint the process did
// not declare refuses with RefuseCheckpoint; otherwise the gate is open
// (nil). A process that declares a pending checkpoint may serve while it
// backfills.
func GateRefusal(g ServeGate, running int32, decls []Declaration) *Refusal {
	if g.StoredSchemaVersion > running {
		return &Refusal{Kind: RefuseSchema, Stored: g.StoredSchemaVersion, Running: running}
	}
	if p, ok := FirstUndeclared(g.Pending, decls); ok {
		return &Refusal{Kind: RefuseCheckpoint, Partition: p.Partition, Name: p.Name}
	}
	return nil
}

// TokenChanged compares two gate reads taken around a data read: a changed
// stored schema version or log epoch refuses with RefuseEpoch (a restore
// presenting V → other → V is still caught by the epoch).
func TokenChanged(before, after ServeGate) *Refusal {
	if before.StoredSchemaVersion != after.StoredSchemaVersion || before.LogEpoch != after.LogEpoch {
		return &Refusal{Kind: RefuseEpoch}
	}
	return nil
}

type checkpointDetails struct {
	Partition  string `json:"partition"`
	Projection string `json:"projection"`
}

type epochDetails struct {
	LogEpochChanged bool `json:"logEpochChanged"`
}

type schemaDetails struct {
	StoredSchemaVersion  int32 `json:"storedSchemaVersion"`
	RunningSchemaVersion int32 `json:"runningSchemaVersion"`
}

// Err maps the refusal to sync.schema_not_ready with the reference's
// details JSON: checkpoint → {"partition","projection"}, epoch →
// {"logEpochChanged":true}, schema → {"storedSchemaVersion",
// "runningSchemaVersion"}.
func (r *Refusal) Err() *syncerr.Error {
	e := syncerr.New(syncerr.SchemaNotReady).WithMessage(notReadyMessage)
	switch r.Kind {
	case RefuseCheckpoint:
		e.Reason = "undeclared pending backfill checkpoint"
		return e.WithDetails(checkpointDetails{Partition: r.Partition, Projection: r.Name})
	case RefuseEpoch:
		e.Reason = "serve gate token changed during the request"
		return e.WithDetails(epochDetails{LogEpochChanged: true})
	default:
		e.Reason = "stored schema version is newer than the running build"
		return e.WithDetails(schemaDetails{StoredSchemaVersion: r.Stored, RunningSchemaVersion: r.Running})
	}
}

// IncompleteError is the ensureSchema refusal for a pending checkpoint at
// the running version that the process did not declare
// (sync.storage.checkpoint_incomplete; the readiness phase
// backfill_checkpoint).
func IncompleteError(p PendingRef) *syncerr.Error {
	return syncerr.Newf(syncerr.StorageCheckpointIncomplete,
		"pending checkpoint %q of partition %q is not declared by this process", p.Name, p.Partition)
}
