package push

import (
	"context"
	"errors"

	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Command is one server-authoritative command commit (REMOTE.md §3).
type Command struct {
	Identity ports.Identity
	// ClientID and ClientCommitID are the command's idempotency identity
	// (the caller builds them: JSON ["remote-command", actor, client] and
	// JSON [operation, request]).
	ClientID, ClientCommitID string
	// Scopes is the caller's one scope resolution: the ordinary write
	// authorization of every operation the plan returns.
	Scopes scopes.Resolution
	// Plan returns the commit's operations. It runs inside the push
	// transaction, after the partition lock and the locked idempotency
	// re-check, and never for a replay; an error fails the command (the
	// transaction rolls back, nothing is stored).
	Plan func(ctx context.Context, r ports.TxReader) ([]ssp2.PushOperation, error)
}

// PushCommand runs a command's commit through the ordinary push pipeline:
// serve gate, client-id binding, idempotency, scope authorization, row
// and commit validators, relational constraints, the log, the stored
// result and the commit listeners. An applied retry is answered cached
// without planning again; a rejection is stored and replays as rejected.
func (p *Pipeline) PushCommand(ctx context.Context, c Command) (*ssp2.PushResult, error) {
	sch := p.o.Schema()
	if sch == nil {
		return nil, syncerr.Newf(syncerr.SchemaNotReady, "schema not compiled yet")
	}
	if c.Plan == nil || c.ClientID == "" || c.ClientCommitID == "" {
		return nil, errors.New("push: Command.Plan, ClientID and ClientCommitID are required")
	}
	pc := &ssp2.PushCommit{ClientCommitID: c.ClientCommitID}
	b := &Batch{Identity: c.Identity, ClientID: c.ClientID, WireVersion: ssp2.WireVersion, Schema: sch,
		Now: p.o.Now(), Scopes: c.Scopes, Commits: []*ssp2.PushCommit{pc}}
	b.plan = func(ctx context.Context, r ports.TxReader) ([]ssp2.PushOperation, error) {
		ops, err := c.Plan(ctx, r)
		if err != nil {
			return nil, err
		}
		if err := dompush.CheckOperationCap([]int{len(ops)}, p.o.MaxOperations); err != nil {
			return nil, err
		}
		return ops, nil
	}
	if _, err := p.o.Store.TouchPartition(ctx, c.Identity.Partition, b.Now.UnixMilli()); err != nil {
		return nil, err
	}
	o, err := p.pushCommit(ctx, b, pc)
	if err != nil {
		return nil, err
	}
	return o.result, nil
}
