// Package checkpoint drives backfill checkpoints (the 0.24 safe-upgrade
// rules of domain/checkpoint) for hosts and operators: declare a
// checkpoint at the running schema version, run its backfill, activate
// it.
//
// A run claims the checkpoint (owner epoch += 1), then:
//
//  1. Full pass. At its start the log's newest seq becomes the
//     watermark (base) and the cursor "scan:". Each batch the
//     ports.Backfiller returns is written as one server commit through
//     the push pipeline (clients pull it like any commit) whose
//     transaction also advances the checkpoint: the cursor, the observed
//     rows, the same watermark, by the owner-epoch CAS. A batch without
//     writes advances outside a commit. A superseded owner's advance
//     fails, the batch rolls back, and the run stops. A restarted run
//     resumes after the stored cursor.
//  2. Catch-up. The source changes above the watermark (other writers'
//     commits; the backfill's own are left out) are read from the log
//     and handed to the Backfiller; its writes commit with the advance
//     of the watermark past what was read.
//  3. Activation under the partition lock: activated ends the run;
//     stale (a source changed since the catch-up read) goes back to 2;
//     unverifiable (the log was pruned past the watermark, so the
//     changes since cannot be read) restarts the full pass, as the state
//     machine prescribes.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/push"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is the storage a backfill needs.
type Store interface {
	ports.CheckpointStore
	ports.TableScanner
	LogBounds(ctx context.Context, partition string) (ports.LogBounds, error)
	ReadCommitRange(ctx context.Context, partition string, r ports.CommitRange) (ports.CommitSpan, error)
	GetRow(ctx context.Context, partition, table, rowID string) (*commit.Row, error)
}

// Committer writes server commits; *push.Pipeline is one.
type Committer interface {
	ApplyServerCommit(ctx context.Context, c push.ServerCommit) (push.ServerCommitResult, error)
}

// Options configure a Runner.
type Options struct {
	Store   Store
	Commits Committer
	// Schema is the running schema: checkpoints are declared and claimed
	// at its version.
	Schema *schema.Schema
	Clock  ports.Clock
	Log    *zap.Logger
	// BatchRows bounds the source rows one batch examines and the changes
	// one catch-up read takes (default 500).
	BatchRows int
	// ActorID is the actor of the backfill's commits (default
	// "syncd.backfill").
	ActorID string
	// MaxActivations bounds the activation attempts of one run before it
	// gives up with sync.backfill.activation_stale (default 20).
	MaxActivations int
	// OnProgress, when set, hears every step of a run, synchronously (it
	// must not block for long).
	OnProgress func(Progress)
	// Metrics, when set, counts batches, rows, activations and runs.
	Metrics *Metrics
}

// Phase names a step of a run.
type Phase string

// Run phases, as Progress reports them.
const (
	PhaseClaimed    Phase = "claimed"
	PhaseScan       Phase = "scan"
	PhaseCatchUp    Phase = "catch_up"
	PhaseActivation Phase = "activation"
	PhaseRestart    Phase = "restart"
	PhaseActivated  Phase = "activated"
	PhaseSuperseded Phase = "superseded"
)

// Progress is one step of a run.
type Progress struct {
	Partition  string
	Name       string
	Phase      Phase
	OwnerEpoch int64
	// Watermark and ObservedRows are the checkpoint's after the step.
	Watermark    int64
	ObservedRows int64
	// Batches and RowsWritten count this run's batches and written rows.
	Batches     int
	RowsWritten int64
	// Activation is the outcome of a PhaseActivation step.
	Activation cpdomain.Activation
	// Checkpoint is the checkpoint row as the run last stored it.
	Checkpoint cpdomain.Checkpoint
	// TargetSeq is the log's newest seq when the current pass or
	// catch-up began: the watermark the run works toward (0 before).
	TargetSeq int64
}

// Outcome is how a run ended.
type Outcome string

// Run outcomes.
const (
	// OutcomeActivated: the checkpoint is activated.
	OutcomeActivated Outcome = "activated"
	// OutcomeSuperseded: another runner claimed the checkpoint; this one
	// stopped without writing past its last committed batch.
	OutcomeSuperseded Outcome = "superseded"
)

// Result sums up a run.
type Result struct {
	Outcome      Outcome
	Checkpoint   cpdomain.Checkpoint
	Batches      int
	RowsWritten  int64
	Activations  int
	FullPasses   int
	CaughtUpRows int64
}

// Runner declares, runs and activates checkpoints.
type Runner struct {
	o Options
}

// Defaults of Options.
const (
	DefaultBatchRows      = 500
	DefaultActorID        = "syncd.backfill"
	DefaultMaxActivations = 20
)

// New checks o and builds a Runner.
func New(o Options) (*Runner, error) {
	if o.Store == nil || o.Commits == nil || o.Schema == nil || o.Clock == nil {
		return nil, errors.New("backfill: Store, Commits, Schema and Clock are required")
	}
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.ActorID == "" {
		o.ActorID = DefaultActorID
	}
	if o.MaxActivations <= 0 {
		o.MaxActivations = DefaultMaxActivations
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Runner{o: o}, nil
}

func (r *Runner) nowMs() int64 { return r.o.Clock.Now().UnixMilli() }

func (r *Runner) decl(partition, name string) cpdomain.Declaration {
	return cpdomain.Declaration{Partition: partition, Name: name, SchemaVersion: r.o.Schema.Version}
}

// Declare declares the checkpoint at the running schema version (raising
// the partition's writer fence) and returns the stored row; an existing
// row is returned unchanged.
func (r *Runner) Declare(ctx context.Context, partition, name string) (cpdomain.Checkpoint, error) {
	if partition == "" || name == "" {
		return cpdomain.Checkpoint{}, syncerr.Newf(syncerr.BackfillInvalidSpec, "a checkpoint needs a partition and a name")
	}
	cp, err := r.o.Store.DeclareCheckpoint(ctx, r.decl(partition, name), r.nowMs())
	if err != nil {
		return cp, fmt.Errorf("declare checkpoint %s/%s: %w", partition, name, err)
	}
	r.o.Log.Info("checkpoint declared", zap.String("partition", partition), zap.String("checkpoint", name),
		zap.Int32("schema_version", cp.SchemaVersion), zap.String("state", string(cp.State)))
	return cp, nil
}

// SchemaVersion is the running schema version checkpoints are declared at.
func (r *Runner) SchemaVersion() int32 { return r.o.Schema.Version }

// List returns the partition's checkpoints ordered by name.
func (r *Runner) List(ctx context.Context, partition string) ([]cpdomain.Checkpoint, error) {
	return r.o.Store.ReadCheckpoints(ctx, partition)
}

// Get returns one checkpoint; ok is false when it is absent.
func (r *Runner) Get(ctx context.Context, partition, name string) (cpdomain.Checkpoint, bool, error) {
	cps, err := r.o.Store.ReadCheckpoints(ctx, partition)
	if err != nil {
		return cpdomain.Checkpoint{}, false, err
	}
	for _, cp := range cps {
		if cp.Name == name {
			return cp, true, nil
		}
	}
	return cpdomain.Checkpoint{}, false, nil
}

// The runner's cursor encoding: "" before the full pass began (or after
// a restart), "scan:<the Backfiller's cursor>" during it, "done" after.
const (
	cursorScan = "scan:"
	cursorDone = "done"
)

// PassComplete reports whether the checkpoint's full pass has ended.
func PassComplete(cp cpdomain.Checkpoint) bool { return cp.Cursor == cursorDone }

// errSuperseded ends a run whose claim another runner took over.
var errSuperseded = errors.New("backfill: superseded by a newer claim")

// run is one run's state.
type run struct {
	r     *Runner
	bf    ports.Backfiller
	cp    cpdomain.Checkpoint
	res   Result
	own   string
	batch int
	// target is the log's newest seq the run works toward.
	target int64
}

// Run claims the checkpoint and runs bf until the checkpoint activates
// or another runner supersedes this one (both end without error). A
// failing Backfiller, store or commit stops the run with the error; the
// stored cursor and watermark let the next run resume.
func (r *Runner) Run(ctx context.Context, partition, name string, bf ports.Backfiller) (Result, error) {
	if bf == nil {
		return Result{}, syncerr.Newf(syncerr.BackfillUnregistered, "no backfill for checkpoint %s/%s", partition, name)
	}
	for _, t := range bf.Sources() {
		if r.o.Schema.Table(t) == nil {
			return Result{}, syncerr.Newf(syncerr.BackfillInvalidSpec, "backfill source %q is not a table of the running schema", t)
		}
	}
	cp, err := r.o.Store.ClaimCheckpoint(ctx, r.decl(partition, name), r.nowMs())
	if err != nil {
		return Result{}, fmt.Errorf("claim checkpoint %s/%s: %w", partition, name, err)
	}
	rn := &run{r: r, bf: bf, cp: cp, own: OwnClientID(name)}
	rn.report(PhaseClaimed, "")
	err = rn.loop(ctx)
	rn.res.Checkpoint = rn.cp
	if errors.Is(err, errSuperseded) {
		rn.res.Outcome = OutcomeSuperseded
		rn.report(PhaseSuperseded, "")
		r.o.Metrics.ended(string(OutcomeSuperseded))
		return rn.res, nil
	}
	if err != nil {
		r.o.Metrics.ended("failed")
		r.o.Log.Warn("backfill stopped", zap.String("partition", partition), zap.String("checkpoint", name),
			zap.Int64("owner_epoch", rn.cp.OwnerEpoch), zap.Error(err))
		return rn.res, err
	}
	rn.res.Outcome = OutcomeActivated
	rn.report(PhaseActivated, "")
	r.o.Metrics.ended(string(OutcomeActivated))
	return rn.res, nil
}

// OwnClientID is the client id of a checkpoint's backfill commits.
func OwnClientID(name string) string { return "syncd.backfill/" + name }

func (rn *run) loop(ctx context.Context) error {
	for {
		if !PassComplete(rn.cp) {
			if err := rn.fullPass(ctx); err != nil {
				return err
			}
		}
		restart, err := rn.catchUpAndActivate(ctx)
		if err != nil || !restart {
			return err
		}
		// Unverifiable: the log was pruned past the watermark, so the
		// changes since cannot be read; derive everything again.
		if err := rn.advance(ctx, nil, 0, 0, ""); err != nil {
			return err
		}
		rn.report(PhaseRestart, "")
	}
}

// fullPass runs (or resumes) the pass over the current rows.
func (rn *run) fullPass(ctx context.Context) error {
	if !strings.HasPrefix(rn.cp.Cursor, cursorScan) {
		b, err := rn.r.o.Store.LogBounds(ctx, rn.cp.Partition)
		if err != nil {
			return fmt.Errorf("read log bounds: %w", err)
		}
		rn.target = b.MaxSeq
		if err := rn.advance(ctx, nil, b.MaxSeq, 0, cursorScan); err != nil {
			return err
		}
		rn.res.FullPasses++
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		in := ports.BackfillScan{Partition: rn.cp.Partition, Cursor: strings.TrimPrefix(rn.cp.Cursor, cursorScan),
			Limit: rn.r.o.BatchRows, Rows: rn.r.o.Store}
		b, err := rn.bf.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("backfill scan after %q: %w", in.Cursor, err)
		}
		next := cursorScan + b.Cursor
		if b.Done {
			next = cursorDone
		}
		if err := rn.write(ctx, b, rn.cp.Watermark, rn.cp.ObservedRows+b.Examined, next, func() (ports.BackfillBatch, error) {
			return rn.bf.Scan(ctx, in)
		}); err != nil {
			return err
		}
		rn.report(PhaseScan, "")
		if b.Done {
			return nil
		}
	}
}

// catchUpAndActivate catches up and activates until activated (false,
// nil) or unverifiable (true, nil).
func (rn *run) catchUpAndActivate(ctx context.Context) (restart bool, err error) {
	sources := rn.bf.Sources()
	for attempt := 0; attempt < rn.r.o.MaxActivations; attempt++ {
		restart, err := rn.catchUp(ctx)
		if err != nil || restart {
			return restart, err
		}
		act, err := rn.r.o.Store.ActivateCheckpoint(ctx, ports.CheckpointActivation{Partition: rn.cp.Partition,
			Name: rn.cp.Name, OwnerEpoch: rn.cp.OwnerEpoch, Watermark: rn.cp.Watermark, Sources: sources, NowMs: rn.r.nowMs()})
		if err != nil {
			return false, fmt.Errorf("activate checkpoint: %w", err)
		}
		rn.res.Activations++
		rn.report(PhaseActivation, act)
		switch act {
		case cpdomain.Activated:
			rn.cp.State = cpdomain.StateActivated
			return false, nil
		case cpdomain.Unverifiable:
			return true, nil
		}
		// Stale: a source changed after the catch-up read, or another
		// runner took over (the next advance tells).
	}
	return false, syncerr.Newf(syncerr.BackfillActivationStale,
		"checkpoint %s/%s: activation still stale after %d attempts (sources keep changing)", rn.cp.Partition, rn.cp.Name, rn.r.o.MaxActivations)
}

// catchUp brings the watermark to the log's newest seq, handing the
// source changes above it to the Backfiller. restart is true when the
// log no longer holds them (pruned past the watermark).
func (rn *run) catchUp(ctx context.Context) (restart bool, err error) {
	b, err := rn.r.o.Store.LogBounds(ctx, rn.cp.Partition)
	if err != nil {
		return false, fmt.Errorf("read log bounds: %w", err)
	}
	if b.HorizonSeq > rn.cp.Watermark {
		return true, nil
	}
	rn.target = b.MaxSeq
	sources := rn.bf.Sources()
	for rn.cp.Watermark < b.MaxSeq {
		span, err := rn.r.o.Store.ReadCommitRange(ctx, rn.cp.Partition, ports.CommitRange{AfterSeq: rn.cp.Watermark,
			ThroughSeq: b.MaxSeq, LimitChanges: rn.r.o.BatchRows})
		if err != nil {
			return false, fmt.Errorf("read commits after %d: %w", rn.cp.Watermark, err)
		}
		through := span.ThroughSeq
		if through <= rn.cp.Watermark {
			// One commit larger than a batch: take it alone.
			if span, err = rn.r.o.Store.ReadCommitRange(ctx, rn.cp.Partition, ports.CommitRange{AfterSeq: rn.cp.Watermark,
				ThroughSeq: rn.cp.Watermark + 1, LimitChanges: 1 << 30}); err != nil {
				return false, fmt.Errorf("read commit %d: %w", rn.cp.Watermark+1, err)
			}
			through = rn.cp.Watermark + 1
		}
		var changes []commit.Change
		for _, c := range span.Commits {
			if c.ClientID == rn.own {
				continue
			}
			for _, ch := range c.Changes {
				if slices.Contains(sources, ch.Table) {
					changes = append(changes, ch)
				}
			}
		}
		var batch ports.BackfillBatch
		fetch := func() (ports.BackfillBatch, error) {
			if len(changes) == 0 {
				return ports.BackfillBatch{}, nil
			}
			return rn.bf.CatchUp(ctx, ports.BackfillCatchUp{Partition: rn.cp.Partition, Changes: changes, Rows: rn.r.o.Store,
				Row: func(ctx context.Context, table, rowID string) (*commit.Row, error) {
					return rn.r.o.Store.GetRow(ctx, rn.cp.Partition, table, rowID)
				}})
		}
		if batch, err = fetch(); err != nil {
			return false, fmt.Errorf("backfill catch-up after %d: %w", rn.cp.Watermark, err)
		}
		rn.res.CaughtUpRows += int64(len(changes))
		if err := rn.write(ctx, batch, through, rn.cp.ObservedRows+int64(len(changes)), rn.cp.Cursor, fetch); err != nil {
			return false, err
		}
		rn.report(PhaseCatchUp, "")
	}
	return false, nil
}

// conflictRetries bounds how often a batch whose write met a concurrent
// one (sync.conflict) is derived again from the current rows.
const conflictRetries = 5

// write commits a batch with the advance, or advances alone when the
// batch writes nothing. A batch in conflict with a concurrent write is
// derived again (again()) and retried.
func (rn *run) write(ctx context.Context, b ports.BackfillBatch, watermark, observed int64, cursor string, again func() (ports.BackfillBatch, error)) error {
	for try := 0; ; try++ {
		if len(b.Operations) == 0 {
			return rn.advance(ctx, nil, watermark, observed, cursor)
		}
		rn.batch++
		ccid := fmt.Sprintf("%d.%d", rn.cp.OwnerEpoch, rn.batch)
		res, err := rn.r.o.Commits.ApplyServerCommit(ctx, push.ServerCommit{
			Partition: rn.cp.Partition, ActorID: rn.r.o.ActorID, ClientID: rn.own, ClientCommitID: ccid,
			Operations: b.Operations,
			AfterAppend: func(ctx context.Context, tx ports.PushTx, _ int64) error {
				return rn.advance(ctx, tx, watermark, observed, cursor)
			},
		})
		if err == nil {
			rn.res.Batches++
			rn.res.RowsWritten += int64(len(b.Operations))
			rn.r.o.Metrics.batch(rn.cp.Name, len(b.Operations))
			rn.r.o.Log.Debug("backfill batch committed", zap.String("partition", rn.cp.Partition),
				zap.String("checkpoint", rn.cp.Name), zap.Int64("commit_seq", res.CommitSeq), zap.Int("rows", len(b.Operations)))
			return nil
		}
		var rej *push.RejectedError
		if !errors.As(err, &rej) || rej.Code != string(syncerr.VersionConflict) || try >= conflictRetries {
			if errors.Is(err, errSuperseded) {
				return err
			}
			return fmt.Errorf("backfill batch %s: %w", ccid, err)
		}
		if b, err = again(); err != nil {
			return fmt.Errorf("backfill batch %s after a conflict: %w", ccid, err)
		}
	}
}

// advance is the owner-epoch CAS, inside tx when given; a refusal means
// another runner claimed the checkpoint (errSuperseded).
func (rn *run) advance(ctx context.Context, tx ports.PushTx, watermark, observed int64, cursor string) error {
	a := ports.CheckpointAdvance{Partition: rn.cp.Partition, Name: rn.cp.Name, OwnerEpoch: rn.cp.OwnerEpoch,
		Watermark: watermark, ObservedRows: observed, Cursor: cursor, NowMs: rn.r.nowMs()}
	var ok bool
	var err error
	if tx != nil {
		ok, err = tx.AdvanceCheckpoint(ctx, a)
	} else {
		ok, err = rn.r.o.Store.AdvanceCheckpoint(ctx, a)
	}
	if err != nil {
		return fmt.Errorf("advance checkpoint: %w", err)
	}
	if !ok {
		return errSuperseded
	}
	rn.cp.Watermark, rn.cp.ObservedRows, rn.cp.Cursor, rn.cp.UpdatedAtMs = watermark, observed, cursor, a.NowMs
	return nil
}

func (rn *run) report(p Phase, act cpdomain.Activation) {
	pr := Progress{Partition: rn.cp.Partition, Name: rn.cp.Name, Phase: p, OwnerEpoch: rn.cp.OwnerEpoch,
		Watermark: rn.cp.Watermark, ObservedRows: rn.cp.ObservedRows, Batches: rn.res.Batches,
		RowsWritten: rn.res.RowsWritten, Activation: act, Checkpoint: rn.cp, TargetSeq: rn.target}
	fields := []zap.Field{zap.String("partition", pr.Partition), zap.String("checkpoint", pr.Name),
		zap.String("phase", string(p)), zap.Int64("owner_epoch", pr.OwnerEpoch), zap.Int64("watermark", pr.Watermark),
		zap.Int64("observed_rows", pr.ObservedRows), zap.Int("batches", pr.Batches), zap.Int64("rows_written", pr.RowsWritten)}
	if act != "" {
		fields = append(fields, zap.String("activation", string(act)))
		rn.r.o.Metrics.activation(pr.Name, act)
	}
	rn.r.o.Metrics.progress(pr)
	switch p {
	case PhaseScan, PhaseCatchUp:
		rn.r.o.Log.Debug("backfill progress", fields...)
	default:
		rn.r.o.Log.Info("backfill "+string(p), fields...)
	}
	if rn.r.o.OnProgress != nil {
		rn.r.o.OnProgress(pr)
	}
}

// Activate activates a checkpoint whose backfill ran to the end of its
// full pass (a run that stopped before activating, or a host that
// backfilled with its own Runner elsewhere), under the current owner's
// epoch, checking sources above the stored watermark. A pass that has
// not completed is sync.backfill.incomplete; stale means the sources
// changed since (run again to catch up), unverifiable that the log was
// pruned past the watermark (run again: the pass restarts).
func (r *Runner) Activate(ctx context.Context, partition, name string, sources []string) (cpdomain.Activation, error) {
	cp, ok, err := r.Get(ctx, partition, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", syncerr.Newf(syncerr.StorageCheckpointNotDeclared, "checkpoint %s/%s is not declared", partition, name)
	}
	if cp.State == cpdomain.StateActivated {
		return cpdomain.Activated, nil
	}
	if !PassComplete(cp) {
		return "", syncerr.Newf(syncerr.BackfillIncomplete,
			"checkpoint %s/%s: the backfill has not completed its full pass (run it first)", partition, name)
	}
	act, err := r.o.Store.ActivateCheckpoint(ctx, ports.CheckpointActivation{Partition: partition, Name: name,
		OwnerEpoch: cp.OwnerEpoch, Watermark: cp.Watermark, Sources: sources, NowMs: r.nowMs()})
	if err != nil {
		return "", fmt.Errorf("activate checkpoint %s/%s: %w", partition, name, err)
	}
	r.o.Log.Info("checkpoint activation", zap.String("partition", partition), zap.String("checkpoint", name),
		zap.Int64("watermark", cp.Watermark), zap.String("activation", string(act)))
	return act, nil
}
