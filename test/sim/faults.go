package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// FaultKind is one kind of storage fault the runner injects at a seeded
// point.
type FaultKind int

// Storage faults. Each is armed by a step with a countdown of matching
// points and fires once, at the countdown's end, within that step.
const (
	// FaultStatement: a statement inside a push transaction fails; the
	// transaction rolls back and the request fails.
	FaultStatement FaultKind = iota + 1
	// FaultRead: a read outside a transaction fails (request head, log
	// bounds, commit window, row scan, client record).
	FaultRead
	// FaultAfterCommit: the push transaction committed, then the call
	// fails (the engine applied it; the client never hears).
	FaultAfterCommit
	// FaultCrash: the push transaction committed and the process dies
	// before the response: the response is lost and the server restarts
	// over the reopened database.
	FaultCrash
	// FaultRecordWrite: the pull's client record write fails (the request
	// fails after its pushes committed).
	FaultRecordWrite
	// FaultPrune: a retention pass down to the active clients' floors runs
	// in the middle of a request: after a commit window or row scan was
	// read, before the horizon is checked again (prune under traffic).
	FaultPrune
)

var faultNames = map[FaultKind]string{
	FaultStatement: "statement", FaultRead: "read", FaultAfterCommit: "after-commit", FaultCrash: "crash",
	FaultRecordWrite: "record-write", FaultPrune: "prune",
}

func (k FaultKind) String() string { return faultNames[k] }

// Breakage is a deliberately broken server, for proving the harness can
// fail: a test-only injection no real build carries.
type Breakage string

// Breakages the harness must catch.
const (
	// BreakTombstones: the store forgets tombstones (TombstoneSeq finds
	// none), so an unversioned upsert resurrects a deleted row.
	BreakTombstones Breakage = "tombstones-ignored"
	// BreakClientRecord: the client record write is lost and the request
	// answered as if it was stored, so retention no longer sees the client.
	BreakClientRecord Breakage = "client-record-lost"
	// BreakColumnVersions: an empty column-version blob is stored as NULL,
	// which reads as every column at the row's version (the first bug the
	// harness found: a versioned write after an upsert of the primary key
	// alone conflicted on columns nobody wrote).
	BreakColumnVersions Breakage = "column-versions-null"
	// BreakEvictAfterReset: a client forgets the last active effective
	// scopes on a reset, so an unsubscription after sync.cursor_expired
	// evicts nothing (the second bug the harness found, in the Go client).
	BreakEvictAfterReset Breakage = "evict-after-reset-lost"
)

// Breakages lists every breakage.
var Breakages = []Breakage{BreakTombstones, BreakClientRecord, BreakColumnVersions, BreakEvictAfterReset}

// errInjected is what an injected statement or read failure returns.
var errInjected = errors.New("sim: injected storage failure")

// point is where a fault may fire.
type point int

const (
	ptTx point = iota + 1
	ptRead
	ptCommitted
	ptRecord
	ptWindowRead
)

func (k FaultKind) at(p point) bool {
	switch k {
	case FaultStatement:
		return p == ptTx
	case FaultRead:
		return p == ptRead
	case FaultAfterCommit, FaultCrash:
		return p == ptCommitted
	case FaultRecordWrite:
		return p == ptRecord
	case FaultPrune:
		return p == ptWindowRead
	}
	return false
}

// armed is the fault of the current step.
type armed struct {
	kind      FaultKind
	countdown int
	fired     bool
}

// faultStore decorates the run's storage: it tells the runner of every
// push transaction that committed (the order the model applies commits
// in), fires the armed fault, and carries a breakage. It forwards the
// optional fast paths every engine has; sqlFaultStore adds the SQL ones.
type faultStore struct {
	ports.Storage
	r *runner
}

// storeFor wraps inner, keeping the optional interfaces it implements.
func storeFor(inner ports.Storage, r *runner) (ports.Storage, error) {
	for _, need := range []struct {
		ok   bool
		name string
	}{
		{isA[ports.RequestHeadStore](inner), "RequestHeadStore"}, {isA[ports.BoundsGateReader](inner), "BoundsGateReader"},
		{isA[ports.WindowChangeCounter](inner), "WindowChangeCounter"}, {isA[ports.TableScanner](inner), "TableScanner"},
	} {
		if !need.ok {
			return nil, fmt.Errorf("sim: storage %T lacks %s", inner, need.name)
		}
	}
	f := &faultStore{Storage: inner, r: r}
	_, gated := inner.(ports.GatedPushStore)
	_, recent := inner.(ports.RecentWindowReader)
	if gated && recent {
		return &sqlFaultStore{faultStore: f}, nil
	}
	return f, nil
}

func isA[T any](v any) bool { _, ok := v.(T); return ok }

func (f *faultStore) fire(p point) bool { return f.r.fire(p) }

func (f *faultStore) read(err error) error {
	if err == nil && f.fire(ptRead) {
		return errInjected
	}
	return err
}

func (f *faultStore) wrap(fn func(ports.PushTx) error) func(ports.PushTx) error {
	return func(tx ports.PushTx) error { return fn(&faultTx{PushTx: tx, f: f}) }
}

// afterPush reports a committed push and fires the post-commit faults.
func (f *faultStore) afterPush(o ports.PushOptions, err error) error {
	if err != nil {
		return err
	}
	f.r.committed(o.ClientID, o.ClientCommitID)
	if f.fire(ptCommitted) {
		return errInjected
	}
	return nil
}

func (f *faultStore) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	return f.afterPush(o, f.Storage.Push(ctx, partition, o, f.wrap(fn)))
}

func (f *faultStore) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	h, err := f.Storage.(ports.RequestHeadStore).TouchPartitionHead(ctx, q)
	return h, f.read(err)
}

func (f *faultStore) ReadBoundsAndGate(ctx context.Context, partition string, running int32) (ports.LogBounds, checkpoint.ServeGate, bool, error) {
	b, g, ok, err := f.Storage.(ports.BoundsGateReader).ReadBoundsAndGate(ctx, partition, running)
	return b, g, ok, f.read(err)
}

func (f *faultStore) CountWindowChanges(ctx context.Context, partition string, p ports.WindowProbe) (int, error) {
	return f.Storage.(ports.WindowChangeCounter).CountWindowChanges(ctx, partition, p)
}

func (f *faultStore) ScanTable(ctx context.Context, partition string, q ports.TableScan) ([]commit.Row, error) {
	return f.Storage.(ports.TableScanner).ScanTable(ctx, partition, q)
}

func (f *faultStore) LogBounds(ctx context.Context, partition string) (ports.LogBounds, error) {
	b, err := f.Storage.LogBounds(ctx, partition)
	return b, f.read(err)
}

func (f *faultStore) ReadCommitWindow(ctx context.Context, partition string, w ports.CommitWindow) ([]commit.Commit, error) {
	cs, err := f.Storage.ReadCommitWindow(ctx, partition, w)
	if err = f.read(err); err == nil && f.fire(ptWindowRead) {
		f.r.pruneNow(ctx, "after a commit window read")
	}
	return cs, err
}

func (f *faultStore) ScanRows(ctx context.Context, partition string, q ports.RowScan) ([]commit.Row, error) {
	rows, err := f.Storage.ScanRows(ctx, partition, q)
	if err = f.read(err); err == nil && f.fire(ptWindowRead) {
		f.r.pruneNow(ctx, "after a row scan")
	}
	return rows, err
}

func (f *faultStore) GetClient(ctx context.Context, partition, clientID string) (*ports.ClientRecord, error) {
	c, err := f.Storage.GetClient(ctx, partition, clientID)
	return c, f.read(err)
}

func (f *faultStore) PutClient(ctx context.Context, rec ports.ClientRecord) error {
	if f.fire(ptRecord) {
		return errInjected
	}
	if f.r.o.Break == BreakClientRecord {
		return nil // the breakage: lost, and answered as stored
	}
	return f.Storage.PutClient(ctx, rec)
}

// sqlFaultStore adds the SQL engines' group-commit gate read and recent
// log, so a run on them takes the paths the server takes.
type sqlFaultStore struct{ *faultStore }

func (f *sqlFaultStore) PushThenReadGate(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) (checkpoint.ServeGate, bool, error) {
	g, ok, err := f.Storage.(ports.GatedPushStore).PushThenReadGate(ctx, partition, o, f.wrap(fn))
	return g, ok, f.afterPush(o, err)
}

func (f *sqlFaultStore) ReadRecentWindow(partition, logEpoch string, w ports.CommitWindow) ([]commit.Commit, bool) {
	cs, ok := f.Storage.(ports.RecentWindowReader).ReadRecentWindow(partition, logEpoch, w)
	if ok && f.fire(ptWindowRead) {
		f.r.pruneNow(context.Background(), "after a recent-log window read")
	}
	return cs, ok
}

// faultTx is a push transaction whose statements may fail.
type faultTx struct {
	ports.PushTx
	f *faultStore
}

func (t *faultTx) failed() error {
	if t.f.fire(ptTx) {
		return errInjected
	}
	return nil
}

func (t *faultTx) GetPushResult(ctx context.Context, clientID, ccid string) (ports.PushRecord, bool, error) {
	if err := t.failed(); err != nil {
		return ports.PushRecord{}, false, err
	}
	return t.PushTx.GetPushResult(ctx, clientID, ccid)
}

func (t *faultTx) GetRow(ctx context.Context, table, rowID string) (*commit.Row, error) {
	if err := t.failed(); err != nil {
		return nil, err
	}
	return t.PushTx.GetRow(ctx, table, rowID)
}

func (t *faultTx) TombstoneSeq(ctx context.Context, table, rowID string) (int64, bool, error) {
	if err := t.failed(); err != nil {
		return 0, false, err
	}
	if t.f.r.o.Break == BreakTombstones {
		return 0, false, nil
	}
	return t.PushTx.TombstoneSeq(ctx, table, rowID)
}

func (t *faultTx) UpsertRow(ctx context.Context, table string, w ports.RowWrite) error {
	if err := t.failed(); err != nil {
		return err
	}
	if t.f.r.o.Break == BreakColumnVersions && len(w.ColumnVersions) == 0 {
		w.ColumnVersions = nil
	}
	return t.PushTx.UpsertRow(ctx, table, w)
}

func (t *faultTx) DeleteRow(ctx context.Context, table, rowID string, opIndex int) error {
	if err := t.failed(); err != nil {
		return err
	}
	return t.PushTx.DeleteRow(ctx, table, rowID, opIndex)
}

func (t *faultTx) Lookup(ctx context.Context, q ports.RowLookup) ([]commit.Row, error) {
	if err := t.failed(); err != nil {
		return nil, err
	}
	return t.PushTx.Lookup(ctx, q)
}

func (t *faultTx) AppendCommit(ctx context.Context, c ports.NewCommit) (int64, error) {
	if err := t.failed(); err != nil {
		return 0, err
	}
	return t.PushTx.AppendCommit(ctx, c)
}

func (t *faultTx) PutPushResult(ctx context.Context, clientID, ccid string, result []byte) ([]byte, error) {
	if err := t.failed(); err != nil {
		return nil, err
	}
	return t.PushTx.PutPushResult(ctx, clientID, ccid, result)
}
