package app

import (
	"errors"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Phase is a readiness phase (the reference server's readiness phases,
// reported by /readyz).
type Phase string

// Readiness phases, in order.
const (
	PhaseSchemaCompile      Phase = "schema_compile"
	PhaseStorageMigration   Phase = "storage_migration"
	PhaseBackfillCheckpoint Phase = "backfill_checkpoint"
	PhaseReady              Phase = "ready"
)

// Phases lists every phase in order.
func Phases() []Phase {
	return []Phase{PhaseSchemaCompile, PhaseStorageMigration, PhaseBackfillCheckpoint, PhaseReady}
}

// PhaseOf maps a preparation failure to the phase it blocks: schema
// compile errors to schema_compile, storage errors with code
// sync.storage.checkpoint_incomplete to backfill_checkpoint, any other
// storage error to storage_migration.
func PhaseOf(err error, duringCompile bool) Phase {
	switch {
	case err == nil:
		return PhaseReady
	case duringCompile:
		return PhaseSchemaCompile
	case syncerr.CodeOf(err) == syncerr.StorageCheckpointIncomplete:
		return PhaseBackfillCheckpoint
	default:
		return PhaseStorageMigration
	}
}

// StatusError is the failure of the current phase as /readyz shows it.
type StatusError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Status is the /readyz document.
type Status struct {
	Ready         bool         `json:"ready"`
	Phase         Phase        `json:"phase"`
	SchemaVersion int32        `json:"schemaVersion,omitempty"`
	Draining      bool         `json:"draining,omitempty"`
	Since         time.Time    `json:"since"`
	Error         *StatusError `json:"error,omitempty"`
}

// Readiness holds the current phase, the compiled schema once there is
// one, and the last preparation error. It is safe for concurrent use and
// implements httpapi.Gate.
type Readiness struct {
	mu       sync.RWMutex
	phase    Phase
	since    time.Time
	schema   *schema.Schema
	err      error
	draining bool
	now      func() time.Time
	onChange func(Phase)
}

// NewReadiness starts in phase schema_compile.
func NewReadiness() *Readiness {
	return &Readiness{phase: PhaseSchemaCompile, since: time.Now(), now: time.Now}
}

// OnChange registers f to be called with every new phase (metrics).
func (r *Readiness) OnChange(f func(Phase)) {
	r.mu.Lock()
	r.onChange = f
	p := r.phase
	r.mu.Unlock()
	f(p)
}

// enter moves to phase, remembering err as the reason it is not ready.
func (r *Readiness) enter(p Phase, err error) {
	r.mu.Lock()
	changed := r.phase != p
	r.phase, r.err = p, err
	if changed {
		r.since = r.now()
	}
	f := r.onChange
	r.mu.Unlock()
	if changed && f != nil {
		f(p)
	}
}

func (r *Readiness) setSchema(s *schema.Schema) {
	r.mu.Lock()
	r.schema = s
	r.mu.Unlock()
}

// Schema returns the compiled schema, or nil before compile succeeded.
func (r *Readiness) Schema() *schema.Schema {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.schema
}

// Phase returns the current phase.
func (r *Readiness) Phase() Phase {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.phase
}

// Ready reports whether the sync API may serve.
func (r *Readiness) Ready() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.phase == PhaseReady && !r.draining
}

// Drain marks the server as shutting down: /readyz turns 503 and the sync
// API refuses new requests.
func (r *Readiness) Drain() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
}

// Status returns the /readyz document.
func (r *Readiness) Status() Status {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st := Status{
		Ready:    r.phase == PhaseReady && !r.draining,
		Phase:    r.phase,
		Draining: r.draining,
		Since:    r.since.UTC(),
	}
	if r.schema != nil {
		st.SchemaVersion = r.schema.Version
	}
	if r.err != nil {
		// Operators read /readyz: the precise internal reason is useful
		// here, and the admin listener is not the public API.
		st.Error = &StatusError{Code: string(syncerr.CodeOf(r.err)), Message: r.err.Error()}
		if st.Error.Code == "" {
			st.Error.Code = string(syncerr.InternalError)
		}
	}
	return st
}

// ServeError implements httpapi.Gate: nil when ready, otherwise
// sync.schema_not_ready (503). The details of a storage refusal that
// clients may see pass through: a pending checkpoint's {partition,
// projection}, a too-new stored schema's {storedSchemaVersion,
// runningSchemaVersion}.
func (r *Readiness) ServeError() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.phase == PhaseReady && !r.draining {
		return nil
	}
	e := syncerr.New(syncerr.SchemaNotReady)
	var se *syncerr.Error
	if errors.As(r.err, &se) && len(se.Details) > 0 {
		switch se.Code {
		case syncerr.StorageCheckpointIncomplete, syncerr.StorageSchemaTooNew, syncerr.SchemaNotReady:
			e.Details = se.Details
		}
	}
	return e
}
