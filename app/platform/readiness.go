package platform

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
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

// Reasons a ready phase is not ready, as /readyz reports them.
const (
	ReasonDraining        = "draining"
	ReasonListenerUnbound = "sync_listener_not_bound"
	ReasonDependencyDown  = "dependency_down"
)

// Status is the /readyz document.
type Status struct {
	Ready         bool  `json:"ready"`
	Phase         Phase `json:"phase"`
	SchemaVersion int32 `json:"schemaVersion,omitempty"`
	// SchemaWindow lists the served schema versions, current first, when
	// older ones are served beside it (SPEC §9).
	SchemaWindow []int32      `json:"schemaWindow,omitempty"`
	Draining     bool         `json:"draining,omitempty"`
	Since        time.Time    `json:"since"`
	Error        *StatusError `json:"error,omitempty"`
	// Reason says why the server is not ready: the phase while it is
	// starting, else draining, sync_listener_not_bound or dependency_down.
	Reason string `json:"reason,omitempty"`
	// Down names the dependencies whose check failed.
	Down []string `json:"down,omitempty"`
	// Checks are the dependency checks' last results (once ready).
	Checks map[string]CheckStatus `json:"checks,omitempty"`
	// Checkpoints are the pending (not activated) backfill checkpoints at
	// the running schema version, with their progress.
	Checkpoints []CheckpointStatus `json:"checkpoints,omitempty"`
}

// CheckpointStatus is one pending checkpoint as /readyz lists it.
type CheckpointStatus struct {
	Partition     string `json:"partition"`
	Name          string `json:"name"`
	State         string `json:"state"`
	SchemaVersion int32  `json:"schemaVersion"`
	Watermark     int64  `json:"watermark"`
	ObservedRows  int64  `json:"observedRows"`
	OwnerEpoch    int64  `json:"ownerEpoch"`
	// Declared: this process declared it, so it serves meanwhile; a
	// pending checkpoint it did not declare keeps it not ready.
	Declared  bool      `json:"declared"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// CheckpointReader is what the checkpoint watch reads.
type CheckpointReader interface {
	ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error)
	ReadCheckpoints(ctx context.Context, partition string) ([]checkpoint.Checkpoint, error)
}

// CheckpointWatch makes /readyz list pending checkpoints and, once the
// phases are done, say not ready (reason backfill_checkpoint) while one
// that this process did not declare is pending: a checkpoint declared
// after the start (syncd checkpoint declare) gates requests at once, and
// the server turns ready again by itself when it activates.
type CheckpointWatch struct {
	Store        CheckpointReader
	Declarations []checkpoint.Declaration
	// TTL is how long a read is reused (default 1 s).
	TTL time.Duration
	// Timeout bounds one read (default 2 s).
	Timeout time.Duration
}

// checkpointWatch caches the watch's last read.
type checkpointWatch struct {
	CheckpointWatch
	now func() time.Time
	mu  sync.Mutex
	at  time.Time
	ver int32
	ok  bool
	cps []CheckpointStatus
}

// read lists the pending checkpoints at running; ok is false when the
// read failed (storage not migrated yet, or down: other phases and checks
// say so).
func (w *checkpointWatch) read(running int32) ([]CheckpointStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if !w.at.IsZero() && w.ver == running && now.Sub(w.at) < w.TTL && !now.Before(w.at) {
		return w.cps, w.ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
	defer cancel()
	w.at, w.ver = now, running
	w.cps, w.ok = nil, false
	g, err := w.Store.ReadServeGate(ctx, "", running)
	if err != nil {
		return nil, false
	}
	byPartition := map[string][]checkpoint.Checkpoint{}
	for _, p := range g.Pending {
		cps, ok := byPartition[p.Partition]
		if !ok {
			if cps, err = w.Store.ReadCheckpoints(ctx, p.Partition); err != nil {
				return nil, false
			}
			byPartition[p.Partition] = cps
		}
		st := CheckpointStatus{Partition: p.Partition, Name: p.Name, State: string(checkpoint.StateDeclared),
			SchemaVersion: running, Declared: checkpoint.Declared(w.Declarations, p.Partition, p.Name)}
		for _, cp := range cps {
			if cp.Name == p.Name {
				st.State, st.SchemaVersion, st.Watermark = string(cp.State), cp.SchemaVersion, cp.Watermark
				st.ObservedRows, st.OwnerEpoch = cp.ObservedRows, cp.OwnerEpoch
				st.UpdatedAt = time.UnixMilli(cp.UpdatedAtMs).UTC()
			}
		}
		w.cps = append(w.cps, st)
	}
	w.ok = true
	return w.cps, true
}

// WatchCheckpoints registers the checkpoint watch (see CheckpointWatch).
func (r *Readiness) WatchCheckpoints(w CheckpointWatch) {
	if w.TTL <= 0 {
		w.TTL = time.Second
	}
	if w.Timeout <= 0 {
		w.Timeout = 2 * time.Second
	}
	r.mu.Lock()
	r.watch = &checkpointWatch{CheckpointWatch: w, now: r.now}
	r.mu.Unlock()
}

// CheckStatus is one dependency check's last result.
type CheckStatus struct {
	OK        bool         `json:"ok"`
	CheckedAt time.Time    `json:"checkedAt"`
	Error     *StatusError `json:"error,omitempty"`
}

// Check is a dependency /readyz probes once the phases are done.
type Check struct {
	// Name is how /readyz names the dependency ("storage").
	Name string
	// Probe fails while the dependency is down.
	Probe func(ctx context.Context) error
	// Now is the clock of the cache (default the Readiness clock).
	Now func() time.Time
	// TTL is how long a result is reused (default 1 s), so probes of
	// /readyz and /metrics cost at most one Probe per TTL.
	TTL time.Duration
	// Timeout bounds one Probe (default 2 s).
	Timeout time.Duration
}

// Readiness holds the current phase, the compiled schema once there is
// one, and the last preparation error. It is safe for concurrent use and
// implements httpapi.Gate.
type Readiness struct {
	mu        sync.RWMutex
	phase     Phase
	since     time.Time
	schema    *schema.Schema
	window    *schema.Window
	err       error
	draining  bool
	listening bool
	checks    []*check
	watch     *checkpointWatch
	now       func() time.Time
	onChange  func(Phase)
}

// check caches one Check's result; mu is held across a probe, so
// concurrent callers wait for it instead of probing again.
type check struct {
	Check
	mu  sync.Mutex
	at  time.Time
	ok  bool
	err error
}

func (c *check) result() CheckStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	if c.at.IsZero() || now.Sub(c.at) >= c.TTL || now.Before(c.at) {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		c.err = c.Probe(ctx)
		cancel()
		c.at, c.ok = now, c.err == nil
	}
	st := CheckStatus{OK: c.ok, CheckedAt: c.at.UTC()}
	if c.err != nil {
		st.Error = statusError(c.err)
	}
	return st
}

func statusError(err error) *StatusError {
	e := &StatusError{Code: string(syncerr.CodeOf(err)), Message: err.Error()}
	if e.Code == "" {
		e.Code = string(syncerr.InternalError)
	}
	return e
}

// AddCheck registers a dependency check: /readyz is 503 with reason
// dependency_down while its Probe fails, and ready again once it passes.
func (r *Readiness) AddCheck(c Check) {
	if c.Now == nil {
		c.Now = r.now
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	r.mu.Lock()
	r.checks = append(r.checks, &check{Check: c})
	r.mu.Unlock()
}

// SetListening records that the sync API listener accepts connections;
// the server is never ready before.
func (r *Readiness) SetListening() {
	r.mu.Lock()
	r.listening = true
	r.mu.Unlock()
}

// NewReadiness starts in phase schema_compile; clk stamps the phase
// changes and is the default clock of the checks' cache.
func NewReadiness(clk ports.Clock) *Readiness {
	return &Readiness{phase: PhaseSchemaCompile, since: clk.Now(), now: clk.Now}
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

func (r *Readiness) setWindow(w *schema.Window) {
	r.mu.Lock()
	r.schema, r.window = w.Current(), w
	r.mu.Unlock()
}

// Window returns the served schema window (SPEC §9), or nil before the
// schema compiled.
func (r *Readiness) Window() *schema.Window {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.window
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

// Ready reports whether /readyz answers ready: the phases are done, the
// sync listener is bound, the server is not draining and every dependency
// check passes.
func (r *Readiness) Ready() bool { return r.Status().Ready }

// Drain marks the server as shutting down: /readyz turns 503 draining.
// The sync API keeps serving (the lame-duck delay) until its listener
// shuts down.
func (r *Readiness) Drain() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
}

// Status returns the /readyz document. Once the phases are done it runs
// the dependency checks (each cached for its TTL).
func (r *Readiness) Status() Status {
	r.mu.RLock()
	st := Status{
		Phase:    r.phase,
		Draining: r.draining,
		Since:    r.since.UTC(),
	}
	if r.schema != nil {
		st.SchemaVersion = r.schema.Version
	}
	if r.window != nil && r.window.Len() > 1 {
		st.SchemaWindow = r.window.Versions()
	}
	if r.err != nil {
		// Operators read /readyz: the precise internal reason is useful
		// here, and the admin listener is not the public API.
		st.Error = statusError(r.err)
	}
	listening, checks, watch := r.listening, r.checks, r.watch
	r.mu.RUnlock()
	undeclared := false
	if watch != nil && st.SchemaVersion != 0 && st.Phase != PhaseSchemaCompile && st.Phase != PhaseStorageMigration {
		cps, _ := watch.read(st.SchemaVersion)
		st.Checkpoints = cps
		for _, c := range cps {
			undeclared = undeclared || !c.Declared
		}
	}
	switch {
	case st.Phase != PhaseReady:
		st.Reason = string(st.Phase)
	case st.Draining:
		st.Reason = ReasonDraining
	case !listening:
		st.Reason = ReasonListenerUnbound
	default:
		// Probed outside the lock: a slow dependency must not hold up
		// the sync API's gate.
		for _, c := range checks {
			if st.Checks == nil {
				st.Checks = map[string]CheckStatus{}
			}
			cs := c.result()
			st.Checks[c.Name] = cs
			if !cs.OK {
				st.Down = append(st.Down, c.Name)
			}
		}
		if len(st.Down) > 0 {
			st.Reason = ReasonDependencyDown
		} else if undeclared {
			// The request gate refuses every request meanwhile.
			st.Reason = string(PhaseBackfillCheckpoint)
		}
	}
	st.Ready = st.Reason == ""
	return st
}

// ServeError implements httpapi.Gate: nil once the phases are done,
// otherwise sync.schema_not_ready (503). The details of a storage refusal that
// clients may see pass through: a pending checkpoint's {partition,
// projection}, a too-new stored schema's {storedSchemaVersion,
// runningSchemaVersion}.
func (r *Readiness) ServeError() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	// Draining keeps serving: load balancers still route here until they
	// notice /readyz, and refusing them would fail requests for nothing.
	// A dependency that is down fails its requests by itself.
	if r.phase == PhaseReady {
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
