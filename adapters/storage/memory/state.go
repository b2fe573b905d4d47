package memory

import (
	"maps"
	"slices"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// rowKey names one row of one table within a partition.
type rowKey struct{ table, rowID string }

// resultKey is an idempotency key within a partition.
type resultKey struct{ clientID, clientCommitID string }

// storedRow is a current row plus its materialized cells. Stored rows are
// immutable once published; writes replace the pointer.
type storedRow struct {
	row    commit.Row
	values []any
}

// rowTable holds one app table's current rows in one partition.
type rowTable struct {
	rows map[string]*storedRow
	// unique maps a unique index name to its value key → row id.
	unique map[string]map[string]string
	// sorted caches the row ids in byte order; nil when stale.
	sorted []string
}

func (t *rowTable) clone() *rowTable {
	c := &rowTable{rows: maps.Clone(t.rows), unique: make(map[string]map[string]string, len(t.unique)), sorted: t.sorted}
	for k, m := range t.unique {
		c.unique[k] = maps.Clone(m)
	}
	return c
}

// sortedIDs returns the row ids in byte order, caching the result. The
// returned slice is never mutated afterwards (writes drop the cache).
func (t *rowTable) sortedIDs() []string {
	if t.sorted == nil {
		ids := make([]string, 0, len(t.rows))
		for id := range t.rows {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		t.sorted = ids
	}
	return t.sorted
}

// commitRec is one stored commit.
type commitRec struct {
	c             commit.Commit
	writerVersion int32
}

// data is the part of a partition's state a push transaction may change.
// A transaction works on a private clone and publishes it on commit.
type data struct {
	maxSeq      int64
	tables      map[string]*rowTable
	commits     []*commitRec // ascending seq, retained (above the horizon)
	tombstones  map[rowKey]int64
	blobRefs    map[rowKey][]string // sorted, distinct
	blobClaims  map[string]int64    // blob GC claims: blob id → claimed at
	reactions   map[string]*ports.StoredReaction
	results     map[resultKey]ports.PushRecord
	checkpoints map[string]*checkpoint.Checkpoint
	fence       int32
	hasFence    bool
}

func newData() *data {
	return &data{
		tables:      map[string]*rowTable{},
		tombstones:  map[rowKey]int64{},
		blobRefs:    map[rowKey][]string{},
		blobClaims:  map[string]int64{},
		reactions:   map[string]*ports.StoredReaction{},
		results:     map[resultKey]ports.PushRecord{},
		checkpoints: map[string]*checkpoint.Checkpoint{},
	}
}

// clone copies the containers; stored values are immutable and shared.
func (d *data) clone() *data {
	c := &data{
		maxSeq:      d.maxSeq,
		tables:      make(map[string]*rowTable, len(d.tables)),
		commits:     slices.Clone(d.commits),
		tombstones:  maps.Clone(d.tombstones),
		blobRefs:    maps.Clone(d.blobRefs),
		blobClaims:  maps.Clone(d.blobClaims),
		reactions:   maps.Clone(d.reactions),
		results:     maps.Clone(d.results),
		checkpoints: maps.Clone(d.checkpoints),
		fence:       d.fence,
		hasFence:    d.hasFence,
	}
	for k, t := range d.tables {
		c.tables[k] = t.clone()
	}
	return c
}

// partition is everything stored for one partition.
type partition struct {
	// registry (sync_partition_registry)
	registered    bool
	logEpoch      string
	epochRequired bool
	lastAuthMs    int64

	// logged: a push transaction committed here, so the engines hold the
	// partition's sync_partitions row (the rows a migration fences).
	logged  bool
	horizon int64
	d       *data
	clients map[string]*ports.ClientRecord
	// bindings maps client ids to their actors (SPEC §1.5); written only
	// under the partition's write lock, never changed or removed.
	bindings map[string]string
}

// physTable is an app table as the "catalog" holds it.
type physTable struct {
	materialize bool
	// notNull lists app columns created NOT NULL; migration-added columns
	// are nullable, as in the SQL engines.
	notNull map[string]bool
	columns map[string]bool
}
