// Package push is the commit pipeline of SPEC §A.2: one commit's
// transaction (serve gate, client id binding, idempotency, scope
// authorization, row and commit validators, CRDT merges, references, the
// log append, reactions, the stored result) and the commit listeners
// after it. It serves the commits of a sync round (app/round, through
// Pipeline.Commit and a Batch), server commits (ApplyServerCommit: a
// backfill's batches) and command commits (PushCommand: app/operations).
package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/limits"
	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is the storage the pipeline needs.
type Store interface {
	ports.PushStore
	// TouchPartition marks a command's partition used, as a request's
	// head does.
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
}

// Options configure a Pipeline.
type Options struct {
	// Schema returns the running compiled schema (nil before it compiled).
	Schema func() *schema.Schema
	Store  Store
	// Declarations are the checkpoints this process declared (serve gate).
	Declarations []checkpoint.Declaration

	RowValidators   []ports.RowValidator
	CommitValidator ports.CommitValidator
	ReactionPlanner ports.ReactionPlanner
	Mergers         []ports.CRDTMerger
	// Blobs answers the blob existence check; nil refuses every blob_ref.
	Blobs ports.BlobChecker
	// Listeners hear of applied commits once they are durable.
	Listeners []ports.CommitListener
	// Metrics count every commit's answer; nil counts nothing.
	Metrics *Metrics
	// Events hears every commit answered (domain/event); nil: nothing
	// listens, and no event is built.
	Events ports.EventSink

	// MaxOperations caps the operations a command's plan returns (0 →
	// 500); a round caps its requests' itself.
	MaxOperations int
	// Limits bound the scope values a write stores (zero fields: the
	// defaults of domain/limits).
	Limits limits.Limits

	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *zap.Logger
}

// Pipeline runs commits through SPEC §A.2.
type Pipeline struct {
	o          Options
	validators map[string][]ports.RowValidator
	mergers    map[string]ports.CRDTMerger
	log        *zap.Logger
}

// New validates opts and builds the Pipeline.
func New(o Options) (*Pipeline, error) {
	if o.Schema == nil || o.Store == nil {
		return nil, errors.New("push: Schema and Store are required")
	}
	if o.MaxOperations < 0 {
		return nil, errors.New("push: negative operation cap")
	}
	// A zero cap and zero limits stand for the defaults where they are
	// applied (dompush.CheckOperationCap, limits.Limits.StoredScope).
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	p := &Pipeline{o: o, log: o.Log, validators: map[string][]ports.RowValidator{}, mergers: map[string]ports.CRDTMerger{}}
	for _, v := range o.RowValidators {
		if v == nil {
			continue
		}
		p.validators[v.Table()] = append(p.validators[v.Table()], v)
	}
	for _, m := range o.Mergers {
		if m == nil {
			continue
		}
		if _, dup := p.mergers[m.Type()]; dup {
			return nil, fmt.Errorf("push: two CRDT mergers for type %q", m.Type())
		}
		p.mergers[m.Type()] = m
	}
	return p, nil
}

// Commit runs pc, the next of b.Commits, through the pipeline and
// returns its answer at b's wire version: its PUSH_RESULT and, for a
// rejection that carries details, its PUSH_RESULT_DETAILS (nil
// otherwise). An error fails the whole request: ErrStaleEpoch when b was
// admitted at a remembered epoch that rotated (nothing of the commit was
// written).
func (p *Pipeline) Commit(ctx context.Context, b *Batch, pc *ssp2.PushCommit) (*ssp2.PushResult, *ssp2.PushResultDetails, error) {
	o, err := p.pushCommit(ctx, b, pc)
	return o.result, o.details, err
}

// Fixed public messages of unexpected hook failures (SPEC §6.7, §6.8).
const (
	msgRowValidatorFailed    = "write validator failed"
	msgCommitValidatorFailed = "whole-commit validator failed"
	msgCRDTMergerFailed      = "CRDT merger failed"
)

// termination is the terminating record of a rejected commit.
type termination struct {
	record  ssp2.OpResult
	details *ssp2.RejectionDetails
}

func errTerm(opIndex int, err error) *termination {
	pub := syncerr.Public(err)
	return &termination{record: ssp2.OpResult{
		OpIndex: int32(opIndex), Status: ssp2.OpError,
		Code: string(pub.Code), Message: pub.Message, Retryable: pub.Entry().Retryable,
	}}
}

func codeTerm(opIndex int, code syncerr.Code, message string) *termination {
	e := syncerr.New(code)
	if message != "" {
		e = e.WithMessage(message)
	}
	return errTerm(opIndex, e)
}

// pushCommit runs the SPEC §A.2 pipeline for one commit and returns its
// result as the client sees it. An error fails the whole request.
func (p *Pipeline) pushCommit(ctx context.Context, b *Batch, pc *ssp2.PushCommit) (outcome, error) {
	o, err := p.pushCommitOnce(ctx, b, pc)
	if err == nil {
		p.o.Metrics.observe(o, len(pc.Operations))
	}
	if err == nil && p.o.Events != nil {
		p.o.Events.Emit(commitEvent(b, pc, o))
	}
	return o, err
}

// commitEvent is the event of one commit's answer: applied (or cached),
// conflicted, or rejected with its terminating record's code.
func commitEvent(b *Batch, pc *ssp2.PushCommit, o outcome) event.Event {
	who := event.Who{Partition: b.Identity.Partition, ActorID: b.Identity.ActorID, ClientID: b.ClientID}
	ops := int64(len(pc.Operations))
	r := o.result
	switch r.Status {
	case ssp2.PushApplied, ssp2.PushCached:
		return event.PushApplied{Who: who, ClientCommitID: pc.ClientCommitID, CommitSeq: r.CommitSeq,
			Operations: ops, Changes: int64(o.changes), Replay: o.replayed}
	}
	var term ssp2.OpResult
	if len(r.Results) > 0 {
		term = r.Results[0]
	}
	if term.Status == ssp2.OpConflict {
		return event.PushConflicted{Who: who, ClientCommitID: pc.ClientCommitID, Operations: ops,
			OpIndex: int64(term.OpIndex), Code: term.Code, ServerVersion: term.ServerVersion, Replay: o.replayed}
	}
	return event.PushRejected{Who: who, ClientCommitID: pc.ClientCommitID, Operations: ops,
		OpIndex: int64(term.OpIndex), Code: term.Code, Retryable: term.Retryable, Replay: o.replayed}
}

func (p *Pipeline) pushCommitOnce(ctx context.Context, b *Batch, pc *ssp2.PushCommit) (outcome, error) {
	part, clientID, ccid, actor := b.Identity.Partition, b.ClientID, pc.ClientCommitID, b.Identity.ActorID
	// 1. Optimistic idempotency lookup outside any transaction. A record is
	// replayed only to the actor that stored it; one stored before records
	// carried their actor waits for the locked re-check, after the binding.
	if r, ok, err := p.optimisticLookup(ctx, b, pc); err != nil {
		return outcome{}, fmt.Errorf("idempotency lookup: %w", err)
	} else if ok && r.ActorID == actor {
		return replay(r.Result, ccid).forWire(b.WireVersion), nil
	} else if ok && r.ActorID != "" {
		return outcome{}, b.checkClientID(r.ActorID)
	}
	var out outcome
	var applied *commit.Commit
	b.afterGate = nil // only the request's last work may stand for the read-verify
	err := p.push(ctx, b, pc, ports.PushOptions{WriterVersion: b.Schema.Version, ActorID: actor,
		ClientID: clientID, ClientCommitID: ccid, FirstRow: firstRow(b, pc)}, func(tx ports.PushTx) error {
		// 2–3. The store took the partition lock. 4. Serve gate on the
		// transaction's own connection (0.24): a refusal rolls back.
		gate, err := tx.ReadServeGate(ctx)
		if err != nil {
			return fmt.Errorf("read serve gate: %w", err)
		}
		if b.headless() && !b.epochChecked && gate.LogEpoch != b.RememberedEpoch {
			// Admitted at a remembered epoch: it must be the one under
			// the lock, in every attempt until one commits, or the
			// request starts over with its head.
			return ErrStaleEpoch
		}
		b.NoteGate(gate) // the token base of a push-only request
		if r := checkpoint.GateRefusal(gate, b.Schema.Version, p.o.Declarations); r != nil {
			return r.Err()
		}
		// §1.5: the first use binds the client id to the actor, under the
		// partition lock and atomically with this commit, so of two actors
		// racing for a fresh id exactly one gets it; the other is refused.
		if boundTo, err := tx.BindClient(ctx, clientID); err != nil {
			return fmt.Errorf("bind client id: %w", err)
		} else if err := b.checkClientID(boundTo); err != nil {
			return err
		}
		// 5. Locked idempotency re-check, replayed only to its owner (a
		// record without one belongs to the id's actor, bound just above).
		if r, ok, err := tx.GetPushResult(ctx, clientID, ccid); err != nil {
			return fmt.Errorf("locked idempotency lookup: %w", err)
		} else if ok {
			if r.ActorID != "" && r.ActorID != actor {
				return b.checkClientID(r.ActorID)
			}
			out = replay(r.Result, ccid)
			return nil
		}
		reader := &txReader{tx: tx, b: b}
		if b.plan != nil {
			// A server-authoritative command plans its operations here,
			// under the lock and after the re-check, so a replay never
			// runs it again (REMOTE.md §3).
			ops, err := b.plan(ctx, reader)
			if err != nil {
				return err
			}
			pc.Operations = ops
		}
		a := &applier{p: p, b: b, tx: tx, pc: pc}
		a.reader = reader
		o, err := a.run(ctx)
		out, applied = o, a.applied
		return err
	})
	if err == nil && b.headless() {
		b.epochChecked = true // a transaction that committed saw it
	}
	if syncerr.CodeOf(err) == syncerr.StorageWriterFenceRejected {
		// A newer schema version owns this partition's writes now (SPEC
		// §2.4): this process must not write; the client retries and
		// reaches one running that version. The refusal comes from
		// AppendCommit or, for an append the store held back, from Push;
		// a server commit keeps the storage code (ApplyServerCommit).
		return outcome{}, syncerr.Wrap(syncerr.SchemaNotReady, err)
	}
	if err != nil {
		return outcome{}, err
	}
	if applied != nil {
		out.changes = len(applied.Changes)
	}
	if applied != nil && len(applied.Changes) > 0 {
		for _, l := range p.o.Listeners {
			if l != nil {
				l.CommitApplied(ctx, part, *applied)
			}
		}
	}
	return out.forWire(b.WireVersion), nil
}

// firstRow is the row pc's first operation reads, for the store to read
// ahead; none when that operation will not read one.
func firstRow(b *Batch, pc *ssp2.PushCommit) ports.RowKey {
	if len(pc.Operations) == 0 || !b.Scopes.OK() {
		return ports.RowKey{}
	}
	op := &pc.Operations[0]
	t := b.Schema.Table(op.Table)
	if _, known := b.projection(op.Table); t == nil || !known {
		return ports.RowKey{}
	}
	return ports.RowKey{Table: t.Name, RowID: op.RowID}
}

// push runs the commit's transaction. When it is the last work of a
// push-only request and the store can, the serve gate is read right after
// its commit, in the same round trip: the request's read-verify.
func (p *Pipeline) push(ctx context.Context, b *Batch, pc *ssp2.PushCommit, o ports.PushOptions, fn func(tx ports.PushTx) error) error {
	gs, ok := p.o.Store.(ports.GatedPushStore)
	if !ok || !b.PushOnly || pc != b.Commits[len(b.Commits)-1] {
		return p.o.Store.Push(ctx, b.Identity.Partition, o, fn)
	}
	g, read, err := gs.PushThenReadGate(ctx, b.Identity.Partition, o, fn)
	if err == nil && read {
		b.afterGate = &g
	}
	return err
}

// optimisticLookup reads pc's idempotency record outside any transaction,
// or takes it from the request head when that read it.
func (p *Pipeline) optimisticLookup(ctx context.Context, b *Batch, pc *ssp2.PushCommit) (ports.PushRecord, bool, error) {
	if h := b.Head; h != nil && len(b.Commits) > 0 && pc == b.Commits[0] {
		b.Head = nil
		return h.Push, h.PushFound, nil
	}
	if b.headless() && !b.epochChecked {
		// The first commit of a request without a head: its transaction
		// checks the epoch first, and its locked re-check finds a replay.
		return ports.PushRecord{}, false, nil
	}
	return p.o.Store.GetPushResult(ctx, b.Identity.Partition, b.ClientID, pc.ClientCommitID)
}

type applier struct {
	p       *Pipeline
	b       *Batch
	tx      ports.PushTx
	pc      *ssp2.PushCommit
	reader  *txReader
	changes []commit.Change
	ops     []ports.OperationEvidence
	staged  []stagedOp
	// origins maps appended (synthetic) operation indexes, counted from
	// len(pc.Operations), to the client operation they came from.
	origins []int
	// applied is the appended commit once its result is stored as ours.
	applied *commit.Commit
	// afterAppend, for a server commit, runs right after the append.
	afterAppend func(ctx context.Context, tx ports.PushTx, seq int64) error
}

// run applies the operations and finishes the commit: appended and
// stored as applied, or discarded and stored as rejected.
func (a *applier) run(ctx context.Context) (outcome, error) {
	term, err := a.apply(ctx)
	if err != nil {
		return outcome{}, err
	}
	var reactions []ports.Reaction
	if term == nil && hasReferences(a.b.Schema) {
		if term, err = a.enforceReferences(ctx); err != nil {
			var ce *ports.ConstraintError
			if !errors.As(err, &ce) {
				return outcome{}, err
			}
			term = constraintTerm(a.origin(ce.OpIndex), len(a.pc.Operations))
		}
	}
	if term == nil && a.p.o.CommitValidator != nil {
		if term, err = a.validateCommit(ctx); err != nil {
			if term = a.constraintFailure(err); term == nil {
				return outcome{}, err
			}
		}
	}
	if term == nil && a.p.o.ReactionPlanner != nil {
		if reactions, err = a.planReactions(ctx); err != nil {
			if term = a.constraintFailure(err); term == nil {
				return outcome{}, err
			}
		}
	}
	if term != nil {
		return a.reject(ctx, term)
	}
	createdAt := a.p.o.Now().UnixMilli()
	seq, err := a.tx.AppendCommit(ctx, ports.NewCommit{
		CreatedAtMs: createdAt, ActorID: a.b.Identity.ActorID,
		ClientID: a.b.ClientID, ClientCommitID: a.pc.ClientCommitID,
		Changes: a.changes,
	})
	if err != nil {
		var ce *ports.ConstraintError
		if errors.As(err, &ce) {
			return a.reject(ctx, constraintTerm(a.origin(ce.OpIndex), len(a.pc.Operations)))
		}
		return outcome{}, fmt.Errorf("append commit: %w", err)
	}
	if a.afterAppend != nil {
		if err := a.afterAppend(ctx, a.tx, seq); err != nil {
			return outcome{}, err
		}
	}
	if len(reactions) > 0 {
		src := ports.ReactionSource{ClientID: a.b.ClientID, ClientCommitID: a.pc.ClientCommitID,
			CommitSeq: seq, CreatedAtMs: createdAt}
		if err := a.tx.EnqueueReactions(ctx, src, reactions); err != nil {
			return outcome{}, fmt.Errorf("enqueue reactions: %w", err)
		}
	}
	res := &ssp2.PushResult{ClientCommitID: a.pc.ClientCommitID, Status: ssp2.PushApplied, CommitSeq: seq,
		Results: make([]ssp2.OpResult, len(a.pc.Operations))}
	for i := range res.Results {
		res.Results[i] = ssp2.OpResult{OpIndex: int32(i), Status: ssp2.OpApplied}
	}
	o, err := a.finish(ctx, outcome{result: res})
	if err == nil && o.result.Status == ssp2.PushApplied {
		a.applied = &commit.Commit{Seq: seq, CreatedAtMs: createdAt, ActorID: a.b.Identity.ActorID,
			ClientID: a.b.ClientID, ClientCommitID: a.pc.ClientCommitID, Changes: a.changes}
	}
	return o, err
}

// constraintFailure is the rejection a write's constraint failure makes
// when a later read of the push reported it (a store may pipeline writes);
// nil for any other error.
func (a *applier) constraintFailure(err error) *termination {
	var ce *ports.ConstraintError
	if !errors.As(err, &ce) {
		return nil
	}
	return constraintTerm(a.origin(ce.OpIndex), len(a.pc.Operations))
}

// reject discards the staged writes under the still-held lock and
// persists the rejected result in the same transaction.
func (a *applier) reject(ctx context.Context, t *termination) (outcome, error) {
	if err := a.tx.DiscardWrites(ctx); err != nil {
		return outcome{}, fmt.Errorf("discard writes: %w", err)
	}
	o := outcome{result: &ssp2.PushResult{ClientCommitID: a.pc.ClientCommitID, Status: ssp2.PushRejected,
		Results: []ssp2.OpResult{t.record}}}
	if t.details != nil {
		o.details = &ssp2.PushResultDetails{ClientCommitID: a.pc.ClientCommitID,
			Entries: []ssp2.DetailEntry{{OpIndex: t.record.OpIndex, Details: *t.details}}}
	}
	return a.finish(ctx, o)
}

// finish persists o (first writer wins) and returns the stored result.
func (a *applier) finish(ctx context.Context, o outcome) (outcome, error) {
	b, err := encodeStored(o)
	if err != nil {
		return outcome{}, fmt.Errorf("encode push result: %w", err)
	}
	stored, err := a.tx.PutPushResult(ctx, a.b.ClientID, a.pc.ClientCommitID, b)
	if err != nil {
		return outcome{}, fmt.Errorf("store push result: %w", err)
	}
	// The stored record is ours unless another writer stored first (the
	// lock makes that impossible, but the store decides). Compare decoded
	// frames: an engine may hand the record back reformatted.
	d, err := decodeStored(stored, a.pc.ClientCommitID)
	if err != nil {
		return cacheMiss(a.pc.ClientCommitID), nil
	}
	if again, err := encodeStored(d); err == nil && bytes.Equal(again, b) {
		return d, nil
	}
	return replay(stored, a.pc.ClientCommitID), nil
}

// origin maps an operation index to the client operation it belongs to.
func (a *applier) origin(idx int) int {
	if n := len(a.pc.Operations); idx >= n && idx-n < len(a.origins) {
		return a.origins[idx-n]
	}
	return idx
}

func constraintTerm(opIndex, ops int) *termination {
	if opIndex < 0 || opIndex >= ops {
		opIndex = 0
	}
	return codeTerm(opIndex, syncerr.ConstraintViolation, "")
}

// apply runs every client operation in order; the first terminating one
// stops the loop (SPEC §A.2 step 7).
func (a *applier) apply(ctx context.Context) (*termination, error) {
	for i := range a.pc.Operations {
		term, err := a.applyOp(ctx, i, &a.pc.Operations[i])
		if err != nil {
			var ce *ports.ConstraintError
			if errors.As(err, &ce) {
				// A store may report a write's failure with a later
				// statement: the failing write names its operation.
				at := i
				if ce.OpIndex >= 0 && ce.OpIndex < i {
					at = ce.OpIndex
				}
				return constraintTerm(at, len(a.pc.Operations)), nil
			}
			return nil, err
		}
		if term != nil {
			return term, nil
		}
	}
	return nil, nil
}

func (a *applier) applyOp(ctx context.Context, i int, op *ssp2.PushOperation) (*termination, error) {
	t := a.b.Schema.Table(op.Table)
	// A table the client's schema version does not declare is unknown to
	// it, as on a server running that version (SPEC §9).
	proj, known := a.b.projection(op.Table)
	if t == nil || !known {
		return codeTerm(i, syncerr.UnknownTable, ""), nil
	}
	if !a.b.Scopes.OK() {
		return codeTerm(i, syncerr.Forbidden, ""), nil
	}
	if op.Op == ssp2.OpDelete {
		return a.applyDelete(ctx, i, t, op)
	}
	return a.applyUpsert(ctx, i, t, proj, op)
}

func (a *applier) applyDelete(ctx context.Context, i int, t *schema.Table, op *ssp2.PushOperation) (*termination, error) {
	codec := a.b.codec(t)
	stored, err := a.tx.GetRow(ctx, t.Name, op.RowID)
	if err != nil {
		return nil, fmt.Errorf("read row: %w", err)
	}
	target := dompush.Target{}
	if stored != nil {
		target.Stored = &dompush.Stored{Version: stored.Version}
	}
	d, err := dompush.DecideDelete(target, func() error {
		return scopes.AuthorizeWrite(t, scopes.Stored(stored.Scopes), a.b.Scopes)
	})
	if err != nil {
		return errTerm(i, err), nil
	}
	ev := ports.OperationEvidence{OpIndex: i, Op: commit.OpDelete, Table: t.Name, RowID: op.RowID}
	if d.Action == dompush.ActionDeleteAbsent {
		a.ops = append(a.ops, ev)
		return nil, nil
	}
	for _, v := range t.ScopeVariables() {
		if stored.Scopes[v] == "" {
			return codeTerm(i, syncerr.MissingScopes, ""), nil
		}
	}
	storedVals, err := codec.DecodeRow(stored.Payload, nil)
	if err != nil {
		return nil, fmt.Errorf("decode stored row %s/%s: %w", t.Name, op.RowID, err)
	}
	storedRow := rowValues(t, storedVals)
	if term, err := a.validateRow(ctx, ports.RowValidation{
		Op: commit.OpDelete, Table: t.Name, RowID: op.RowID, OpIndex: i, Stored: storedRow,
	}); term != nil || err != nil {
		return term, err
	}
	if err := a.tx.DeleteRow(ctx, t.Name, op.RowID, i); err != nil {
		return nil, err
	}
	a.changes = append(a.changes, commit.Change{Table: t.Name, RowID: op.RowID, Op: commit.OpDelete,
		Scopes: copyScopes(stored.Scopes)})
	a.staged = append(a.staged, stagedOp{opIndex: i, table: t, rowID: op.RowID, del: true, pk: storedVals[t.PKIndex].Plain()})
	ev.Stored, ev.StoredServerVersion = storedRow, stored.Version
	a.ops = append(a.ops, ev)
	return nil, nil
}

// applyUpsert applies an upsert of table t; proj, when set, is the
// client's older form of t (SPEC §9): the payload decodes with its codec
// and the columns appended since are NULL on an insert, untouched on an
// update.
func (a *applier) applyUpsert(ctx context.Context, i int, t *schema.Table, proj *schema.Projection, op *ssp2.PushOperation) (*termination, error) {
	codec := a.b.codec(t)
	n := len(t.Columns)
	dec := codec
	if proj != nil {
		dec = a.b.versionCodec(proj.Table())
	}
	var vals []rowcodec.Value
	var err error
	if a.b.WireVersion >= 3 {
		vals, err = dec.DecodeSparse(op.Payload, nil)
	} else {
		// Wires 1 and 2 push full rows: a write naming every column.
		vals, err = dec.DecodeRow(op.Payload, nil)
	}
	if err != nil {
		return errTerm(i, syncerr.Wrap(syncerr.InvalidRequest, err)), nil
	}
	if proj != nil {
		// The appended columns are absent from an older version's write.
		vals = append(vals, make([]rowcodec.Value, n-len(vals))...)
	}
	if rid, ok := rowcodec.ScopeString(vals[t.PKIndex]); !ok || rid != op.RowID {
		return codeTerm(i, syncerr.InvalidRequest, ""), nil
	}
	present := make([]bool, n)
	for c := range vals {
		present[c] = !vals[c].IsAbsent()
	}
	stored, err := a.tx.GetRow(ctx, t.Name, op.RowID)
	if err != nil {
		return nil, fmt.Errorf("read row: %w", err)
	}
	var target dompush.Target
	var storedVals []rowcodec.Value
	if stored != nil {
		if storedVals, err = codec.DecodeRow(stored.Payload, nil); err != nil {
			return nil, fmt.Errorf("decode stored row %s/%s: %w", t.Name, op.RowID, err)
		}
		cv, err := commit.ExpandColumnVersions(stored.ColumnVersions, n, stored.Version)
		if err != nil {
			return nil, fmt.Errorf("row %s/%s: %w", t.Name, op.RowID, err)
		}
		target.Stored = &dompush.Stored{Version: stored.Version, ColumnVersions: cv}
	} else {
		_, tomb, err := a.tx.TombstoneSeq(ctx, t.Name, op.RowID)
		if err != nil {
			return nil, fmt.Errorf("read tombstone: %w", err)
		}
		target.Tombstoned = tomb
		if proj != nil {
			// An older version's insert: the columns it cannot name are NULL.
			for c := proj.Columns(); c < n; c++ {
				vals[c], present[c] = rowcodec.Null(), true
			}
		}
	}
	d, err := dompush.DecideUpsert(dompush.Upsert{Table: t, Present: present,
		BaseVersion: op.BaseVersion.Value, HasBaseVersion: op.BaseVersion.Present, WireVersion: a.b.WireVersion}, target, dompush.Checks{
		AuthorizeStored: func() error {
			return scopes.AuthorizeWrite(t, scopes.Stored(stored.Scopes), a.b.Scopes)
		},
		AuthorizePayload: func() error {
			return scopes.AuthorizeWrite(t, scopes.Collect(t, valueFunc(t, vals)), a.b.Scopes)
		},
		ScopeColumnChanged: func(c int) bool { return !vals[c].Equal(storedVals[c]) },
	})
	if err != nil {
		return errTerm(i, err), nil
	}
	switch d.Action {
	case dompush.ActionConflict:
		e := syncerr.Lookup(syncerr.VersionConflict)
		row, cols := append([]byte(nil), stored.Payload...), d.ConflictColumns
		if proj != nil {
			// The client's codec reads the row and the bitmap in its shape.
			if row, err = rowcodec.Project(nil, stored.Payload, proj); err != nil {
				return nil, fmt.Errorf("project stored row %s/%s: %w", t.Name, op.RowID, err)
			}
			cols = rowcodec.CutBitmap(nil, cols, proj.Columns())
		}
		return &termination{record: ssp2.OpResult{
			OpIndex: int32(i), Status: ssp2.OpConflict, Code: string(e.Code), Message: e.Message,
			ServerVersion: stored.Version, ServerRow: row,
			ConflictColumns: cols,
		}}, nil
	case dompush.ActionUpdate, dompush.ActionInsert:
	default:
		return nil, fmt.Errorf("push: unexpected upsert action %s", d.Action)
	}
	// A wire-1/2 update keeps the stored scope columns (the change it
	// carries, if any, is dropped silently, as a server of theirs does).
	for _, c := range d.Stripped {
		present[c] = false
	}
	merged := make([]rowcodec.Value, n)
	for c := range merged {
		if present[c] || storedVals == nil {
			merged[c] = vals[c]
		} else {
			merged[c] = storedVals[c]
		}
		col := t.Columns[c]
		if col.Type == schema.TypeCRDT && present[c] && !vals[c].IsNull() {
			var prev []byte
			if storedVals != nil && !storedVals[c].IsNull() {
				prev = storedVals[c].Raw()
			}
			m := a.p.mergers[col.CRDTType]
			if m == nil {
				return codeTerm(i, syncerr.CRDTMergeFailed, msgCRDTMergerFailed), nil
			}
			out, err := m.Merge(prev, vals[c].Raw())
			if err != nil {
				return codeTerm(i, syncerr.CRDTMergeFailed, msgCRDTMergerFailed), nil
			}
			merged[c] = rowcodec.CRDT(out)
		}
	}
	payload, err := codec.AppendRow(nil, merged)
	if err != nil {
		return errTerm(i, syncerr.Wrap(syncerr.InvalidRequest, err)), nil
	}
	storedScopes, err := scopes.ExtractStored(t, valueFunc(t, merged))
	if err != nil {
		return errTerm(i, err), nil
	}
	// A stored scope value is echoed in every COMMIT frame of the row and
	// keys the scope indexes: one no subscription could request is refused.
	for v, val := range storedScopes {
		if err := a.p.o.Limits.StoredScope(v, val); err != nil {
			return errTerm(i, err), nil
		}
	}
	blobIDs, term, err := a.checkBlobs(ctx, i, t, merged)
	if term != nil || err != nil {
		return term, err
	}
	row := rowValues(t, merged)
	rv := ports.RowValidation{Op: commit.OpUpsert, Table: t.Name, RowID: op.RowID, OpIndex: i, Row: row}
	ev := ports.OperationEvidence{OpIndex: i, Op: commit.OpUpsert, Table: t.Name, RowID: op.RowID,
		Row: row, NextServerVersion: d.Version}
	if stored != nil {
		rv.Stored = rowValues(t, storedVals)
		ev.Stored, ev.StoredServerVersion = rv.Stored, stored.Version
	}
	if term, err := a.validateRow(ctx, rv); term != nil || err != nil {
		return term, err
	}
	if err := a.tx.UpsertRow(ctx, t.Name, ports.RowWrite{
		RowID: op.RowID, Version: d.Version, Scopes: storedScopes, Payload: payload,
		ColumnVersions: commit.EncodeRowColumnVersions(d.ColumnVersions, d.Version),
		Values:         cellValues(merged), OpIndex: i,
	}); err != nil {
		return nil, err
	}
	if hasBlobColumn(t) {
		if err := a.tx.SetBlobRefs(ctx, t.Name, op.RowID, blobIDs); err != nil {
			return nil, err
		}
	}
	a.changes = append(a.changes, commit.Change{Table: t.Name, RowID: op.RowID, Op: commit.OpUpsert,
		RowVersion: d.Version, Scopes: storedScopes, Row: payload})
	a.staged = append(a.staged, stagedOp{opIndex: i, table: t, rowID: op.RowID, present: present, vals: merged})
	a.ops = append(a.ops, ev)
	return nil, nil
}

// checkBlobs is the push-time blob existence check (SPEC §6.6) and returns
// the blob ids the row references, sorted and distinct. A blob is present
// when the blob store has it and the orphan sweep has not claimed it.
func (a *applier) checkBlobs(ctx context.Context, i int, t *schema.Table, vals []rowcodec.Value) ([]string, *termination, error) {
	var ids []string
	for c, col := range t.Columns {
		if col.Type != schema.TypeBlobRef || vals[c].IsNull() || vals[c].IsAbsent() {
			continue
		}
		doc, err := rowcodec.ParseBlobRef(vals[c].Raw())
		if err != nil {
			return nil, errTerm(i, syncerr.Wrap(syncerr.InvalidRequest, err)), nil
		}
		if a.p.o.Blobs == nil {
			return nil, codeTerm(i, syncerr.BlobNotFound, ""), nil
		}
		ok, err := a.p.o.Blobs.BlobExists(ctx, a.b.Identity.Partition, doc.BlobID)
		if err != nil {
			return nil, nil, fmt.Errorf("blob existence check: %w", err)
		}
		if ok {
			// A blob the orphan sweep claimed is about to be deleted: it
			// is absent to a push (the claim is read under the partition
			// lock, so the sweep never deletes a blob this commit keeps).
			claimed, err := a.tx.BlobClaimed(ctx, doc.BlobID)
			if err != nil {
				return nil, nil, fmt.Errorf("blob claim check: %w", err)
			}
			ok = !claimed
		}
		if !ok {
			return nil, codeTerm(i, syncerr.BlobNotFound, ""), nil
		}
		ids = appendUnique(ids, doc.BlobID)
	}
	return ids, nil, nil
}

// validateRow runs the table's validators (SPEC §6.7). An error fails
// the request: the context's, or a validator that could not decide
// (validatorUnavailable).
func (a *applier) validateRow(ctx context.Context, v ports.RowValidation) (*termination, error) {
	vs := a.p.validators[v.Table]
	v.ActorID, v.Partition, v.Tx = a.b.Identity.ActorID, a.b.Identity.Partition, a.reader
	for _, val := range vs {
		if err := val.ValidateRow(ctx, v); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ports.ErrValidatorUnavailable) {
				return nil, a.validatorUnavailable(v.OpIndex, err)
			}
			return a.hookTerm(v.OpIndex, err, msgRowValidatorFailed, false, 0), nil
		}
	}
	return nil, ctx.Err()
}

// validatorUnavailable is the request-level failure of a validator that
// could not decide (ports.ErrValidatorUnavailable): the retryable
// sync.rate_limited. The commit's transaction rolls back and no result is
// stored, so the client keeps the commit and its retry validates again;
// a rejection, even a retryable one, would be final to a client (SPEC
// §7.2 keeps only sync.idempotency_cache_miss queued).
func (a *applier) validatorUnavailable(opIndex int, err error) error {
	a.p.log.Warn("push validator unavailable; the request fails retryable and the commit is not applied",
		zap.String("partition", a.b.Identity.Partition), zap.String("client_commit_id", a.pc.ClientCommitID),
		zap.Int("op_index", opIndex), zap.Error(err))
	return syncerr.Wrap(syncerr.RateLimited, err).WithMessage("write validator unavailable; retry later")
}

// hookTerm maps a hook error to the terminating record: a deliberate
// rejection with a host code keeps its code, message and details; any
// other error is sync.constraint_violation with the fixed message. Its
// text never reaches the result or the logs.
func (a *applier) hookTerm(opIndex int, err error, fixed string, attributed bool, ops int) *termination {
	var rej *ports.ValidationRejection
	if errors.As(err, &rej) && ports.CheckHostCode(rej.Code) == nil {
		idx := opIndex
		if attributed {
			idx = rej.OpIndex
			if idx < 0 || idx >= ops+len(a.origins) {
				// §6.8: the index must name an operation of the commit;
				// any other is a host bug, answered with the generic code.
				a.p.log.Info("whole-commit rejection names no operation of the commit; rejected as sync.constraint_violation",
					zap.String("partition", a.b.Identity.Partition), zap.Int("op_index", idx), zap.Int("operations", ops))
				return codeTerm(0, syncerr.ConstraintViolation, fixed)
			}
			idx = a.origin(idx)
		}
		t := &termination{record: ssp2.OpResult{OpIndex: int32(idx), Status: ssp2.OpError,
			Code: rej.Code, Message: rej.Message}}
		if rej.Details != nil {
			if d, err := rej.Details.Normalize(); err == nil {
				t.details = &d
			}
		}
		return t
	}
	a.p.log.Info("push hook failed unexpectedly; rejected as sync.constraint_violation",
		zap.String("partition", a.b.Identity.Partition), zap.String("hook", fixed), zap.Int("op_index", opIndex))
	return codeTerm(opIndex, syncerr.ConstraintViolation, fixed)
}

func (a *applier) evidence() ports.CommitValidation {
	return ports.CommitValidation{ClientID: a.b.ClientID, ClientCommitID: a.pc.ClientCommitID,
		ActorID: a.b.Identity.ActorID, Partition: a.b.Identity.Partition, Operations: a.ops, Tx: a.reader}
}

// CommitValidators is the one whole-commit validator (SPEC §6.8) the
// pipeline runs, made of several: each runs in order and the first that
// does not accept decides. Nil entries are skipped; none is nil (no
// validator, no candidate work).
func CommitValidators(vs ...ports.CommitValidator) ports.CommitValidator {
	var out commitValidators
	for _, v := range vs {
		if v != nil {
			out = append(out, v)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

type commitValidators []ports.CommitValidator

func (vs commitValidators) ValidateCommit(ctx context.Context, c ports.CommitValidation) error {
	for _, v := range vs {
		if err := v.ValidateCommit(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// validateCommit runs the whole-commit validator (SPEC §6.8).
func (a *applier) validateCommit(ctx context.Context) (*termination, error) {
	err := a.p.o.CommitValidator.ValidateCommit(ctx, a.evidence())
	if err == nil {
		return nil, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, ports.ErrValidatorUnavailable) {
		return nil, a.validatorUnavailable(0, err)
	}
	return a.hookTerm(0, err, msgCommitValidatorFailed, true, len(a.pc.Operations)), nil
}

// defaultMaxAttempts is a planned reaction's delivery attempts when its
// planner leaves them 0 (SPEC §6.9; the other bounds are dompush's).
const defaultMaxAttempts = 10

// planReactions runs the planner and validates its records; any failure
// aborts the push as a server failure (nothing is persisted).
func (a *applier) planReactions(ctx context.Context) ([]ports.Reaction, error) {
	planned, err := a.p.o.ReactionPlanner.PlanReactions(ctx, a.evidence())
	if err != nil {
		return nil, fmt.Errorf("reaction planner: %w", err)
	}
	if len(planned) > dompush.MaxReactionsPerCommit {
		return nil, fmt.Errorf("reaction planner: %d records (max %d)", len(planned), dompush.MaxReactionsPerCommit)
	}
	seen := map[string]bool{}
	out := make([]ports.Reaction, 0, len(planned))
	for _, p := range planned {
		if err := checkReaction(p); err != nil {
			return nil, fmt.Errorf("reaction planner: %w", err)
		}
		if seen[p.Key] {
			return nil, fmt.Errorf("reaction planner: duplicate key %q", p.Key)
		}
		seen[p.Key] = true
		key, err := stableJSON([]string{a.b.Identity.Partition, a.b.ClientID, a.pc.ClientCommitID, p.Key})
		if err != nil {
			return nil, err
		}
		var payload bytes.Buffer
		if err := json.Compact(&payload, p.Payload); err != nil {
			return nil, fmt.Errorf("reaction planner: payload: %w", err)
		}
		attempts := p.MaxAttempts
		if attempts == 0 {
			attempts = defaultMaxAttempts
		}
		out = append(out, ports.Reaction{IdempotencyKey: string(key), Type: p.Type, Version: p.Version,
			Payload: payload.Bytes(), MaxAttempts: attempts, AvailableAtMs: a.b.Now.UnixMilli()})
	}
	return out, nil
}

func checkReaction(p ports.PlannedReaction) error {
	switch {
	case p.Key == "" || len(p.Key) > dompush.MaxReactionKeyBytes:
		return fmt.Errorf("reaction key must be 1..%d bytes", dompush.MaxReactionKeyBytes)
	case !dompush.ReactionType(p.Type):
		return fmt.Errorf("reaction type %q must be a code-like name of at most %d bytes", p.Type, dompush.MaxReactionTypeBytes)
	case p.Version <= 0:
		return errors.New("reaction version must be positive")
	case p.MaxAttempts < 0 || p.MaxAttempts > 100:
		return errors.New("reaction maxAttempts must be 1..100")
	case len(p.Payload) > dompush.MaxReactionPayloadBytes || !json.Valid(p.Payload):
		return errors.New("reaction payload must be JSON of at most 64 KiB")
	case jsonDepth(p.Payload) > dompush.MaxReactionPayloadDepth:
		return fmt.Errorf("reaction payload deeper than %d levels", dompush.MaxReactionPayloadDepth)
	}
	return nil
}

func jsonDepth(b []byte) int {
	depth, deepest, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func stableJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
