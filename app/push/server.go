package push

import (
	"context"
	"fmt"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// ServerCommit is a commit the server writes on its own behalf, such as
// a backfill batch. Its operations run through the same pipeline as a
// client's (SPEC §6: validators, references, CRDT merges, reactions, the
// idempotency record, the commit listeners that wake realtime clients),
// as ActorID with every scope granted, so clients pull it like any other
// commit (and the event catalog hears it as any other commit).
type ServerCommit struct {
	Partition string
	ActorID   string
	// ClientID and ClientCommitID are the commit's idempotency key: the
	// same pair applied twice replays the first result (cached).
	ClientID       string
	ClientCommitID string
	// Operations carry wire-3 (sparse) payloads.
	Operations []ssp2.PushOperation
	// AfterAppend runs in the commit's transaction once the commit is
	// appended at seq (not for a replay or a rejection): a backfill
	// advances its checkpoint here, so the advance, the rows, the log
	// append and the idempotency record commit together. An error rolls
	// all of it back and is returned unchanged.
	AfterAppend func(ctx context.Context, tx ports.PushTx, seq int64) error
}

// ServerCommitResult is an applied or replayed server commit.
type ServerCommitResult struct {
	// Status is applied, or cached for a replayed idempotency key.
	Status ssp2.PushStatus
	// CommitSeq is the applied commit's seq (0 for a replay).
	CommitSeq int64
}

// RejectedError is a server commit the pipeline rejected (or found in
// conflict): nothing was written but the rejected result.
type RejectedError struct {
	ClientCommitID string
	OpIndex        int32
	Code           string
	Message        string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("server commit %s rejected at operation %d: %s: %s", e.ClientCommitID, e.OpIndex, e.Code, e.Message)
}

// Unwrap exposes the catalog error of the rejection's code.
func (e *RejectedError) Unwrap() error { return syncerr.New(syncerr.Code(e.Code)) }

// ApplyServerCommit applies c. A stored schema newer than the running
// one refuses with sync.schema_not_ready; pending checkpoints do not (a
// server write serves no client, and the writer fence guards the log). A
// writer fence above the running version (SPEC §2.4) refuses the append
// with sync.storage.writer_fence_rejected on every engine, whether the
// store refuses it at once or from Push for an append it held back.
func (p *Pipeline) ApplyServerCommit(ctx context.Context, c ServerCommit) (ServerCommitResult, error) {
	sch := p.o.Schema()
	if sch == nil {
		return ServerCommitResult{}, syncerr.Newf(syncerr.SchemaNotReady, "schema not compiled yet")
	}
	if c.Partition == "" || c.ActorID == "" || c.ClientID == "" || c.ClientCommitID == "" {
		return ServerCommitResult{}, syncerr.Newf(syncerr.InvalidRequest, "server commit needs a partition, an actor, a client id and a client commit id")
	}
	grant := scopes.Allowed{}
	for _, t := range sch.Tables {
		for _, v := range t.ScopeVariables() {
			grant[v] = []string{scopes.Wildcard}
		}
	}
	pc := &ssp2.PushCommit{ClientCommitID: c.ClientCommitID, Operations: c.Operations}
	b := &Batch{Identity: ports.Identity{ActorID: c.ActorID, Partition: c.Partition}, ClientID: c.ClientID,
		WireVersion: ssp2.WireVersion, Schema: sch, Now: p.o.Now(), Commits: []*ssp2.PushCommit{pc},
		Scopes: scopes.Granted(grant)}
	var out outcome
	var applied *commit.Commit
	err := p.o.Store.Push(ctx, c.Partition, ports.PushOptions{WriterVersion: sch.Version, ActorID: c.ActorID,
		ClientID: c.ClientID, ClientCommitID: c.ClientCommitID}, func(tx ports.PushTx) error {
		gate, err := tx.ReadServeGate(ctx)
		if err != nil {
			return fmt.Errorf("read serve gate: %w", err)
		}
		if r := checkpoint.GateRefusal(gate, sch.Version, nil); r != nil && r.Kind == checkpoint.RefuseSchema {
			return r.Err()
		}
		if boundTo, err := tx.BindClient(ctx, c.ClientID); err != nil {
			return fmt.Errorf("bind client id: %w", err)
		} else if boundTo != c.ActorID {
			return syncerr.Newf(syncerr.InvalidClientID, "server commit client id %q is bound to another actor", c.ClientID)
		}
		if r, ok, err := tx.GetPushResult(ctx, c.ClientID, c.ClientCommitID); err != nil {
			return fmt.Errorf("locked idempotency lookup: %w", err)
		} else if ok {
			out = replay(r.Result, c.ClientCommitID)
			return nil
		}
		a := &applier{p: p, b: b, tx: tx, pc: pc, afterAppend: c.AfterAppend}
		a.reader = &txReader{tx: tx, b: b}
		o, err := a.run(ctx)
		out, applied = o, a.applied
		return err
	})
	if err != nil {
		return ServerCommitResult{}, err
	}
	if applied != nil {
		out.changes = len(applied.Changes)
	}
	p.o.Metrics.observe(out, len(pc.Operations))
	if p.o.Events != nil {
		p.o.Events.Emit(commitEvent(b, pc, out))
	}
	if applied != nil && len(applied.Changes) > 0 {
		for _, l := range p.o.Listeners {
			if l != nil {
				l.CommitApplied(ctx, c.Partition, *applied)
			}
		}
	}
	switch res := out.result; res.Status {
	case ssp2.PushApplied:
		return ServerCommitResult{Status: res.Status, CommitSeq: res.CommitSeq}, nil
	case ssp2.PushCached:
		return ServerCommitResult{Status: res.Status}, nil
	default:
		rej := &RejectedError{ClientCommitID: c.ClientCommitID, Code: string(syncerr.InternalError)}
		if len(res.Results) > 0 {
			rej.OpIndex, rej.Code, rej.Message = res.Results[0].OpIndex, res.Results[0].Code, res.Results[0].Message
		}
		return ServerCommitResult{}, rej
	}
}
