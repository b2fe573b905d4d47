package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// EnsureSchema installs or verifies the schema. See ports.SchemaStore.
func (s *Store) EnsureSchema(ctx context.Context, sc *schema.Schema, decls []checkpoint.Declaration) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if sc == nil {
		return syncerr.Newf(syncerr.SchemaInvalid, "no schema")
	}
	s.mu.Lock()
	memo := s.schema
	s.mu.Unlock()
	if memo != nil && memo.Version == sc.Version {
		return nil
	}

	s.db.mu.Lock()
	done, err := s.db.verify(sc, decls)
	s.db.mu.Unlock()
	if err != nil {
		return err
	}
	if !done {
		// A bump: exclusive against every partition writer, then re-check
		// under the barrier (another handle may have migrated meanwhile).
		s.db.schemaLock.Lock()
		s.db.mu.Lock()
		done, err = s.db.verify(sc, decls)
		if err == nil && !done {
			err = s.db.migrate(sc, decls, s.now().UnixMilli())
		}
		s.db.mu.Unlock()
		s.db.schemaLock.Unlock()
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.schema = sc
	s.mu.Unlock()
	return nil
}

// verify runs the checks that precede any write. done reports that the
// database is at the running version and passed; false means a bump is
// due. Callers hold d.mu.
func (d *db) verify(sc *schema.Schema, decls []checkpoint.Declaration) (done bool, err error) {
	if p, ok := checkpoint.FirstUndeclared(d.pendingAt(sc.Version, "", nil), decls); ok {
		return false, checkpoint.IncompleteError(p)
	}
	if !d.markerSet || d.markerVersion < sc.Version {
		return false, nil
	}
	if d.markerVersion > sc.Version {
		return false, syncerr.Newf(syncerr.StorageSchemaTooNew,
			"stored schema version %d is newer than the running schema version %d", d.markerVersion, sc.Version).
			WithDetails(map[string]int32{"storedSchemaVersion": d.markerVersion, "runningSchemaVersion": sc.Version})
	}
	if err := sc.CheckStoredLayouts(d.layouts); err != nil {
		return false, err
	}
	for _, t := range sc.Tables {
		phys := d.tables[t.Name]
		if phys == nil {
			return false, physicalMismatch(t.Name, "", "missing_table")
		}
		if t.Materialize {
			for _, c := range t.Columns {
				if !phys.columns[c.Name] {
					return false, physicalMismatch(t.Name, c.Name, "missing_column")
				}
			}
		}
	}
	return true, nil
}

func physicalMismatch(table, column, reason string) error {
	det := map[string]string{"table": table, "reason": reason}
	if column != "" {
		det["column"] = column
	}
	return syncerr.Newf(syncerr.StoragePhysicalLayoutMismatch, "table %q: %s %s", table, reason, column).WithDetails(det)
}

// migrate applies a version bump in one step: retire dropped tables,
// create tables and add nullable columns, rebuild unique indexes, re-map
// materialized cells, write the marker and layouts, raise every
// partition's writer fence, install declarations and raise their fences.
// It computes everything before changing anything, so a failure leaves
// the database as it was. Callers hold the barrier and d.mu.
func (d *db) migrate(sc *schema.Schema, decls []checkpoint.Declaration, nowMs int64) error {
	oldLayouts := d.layouts
	var retired []string
	for name := range oldLayouts {
		if sc.Table(name) == nil {
			retired = append(retired, name)
		}
	}
	for name := range d.tables {
		if sc.Table(name) == nil && !slices.Contains(retired, name) {
			retired = append(retired, name)
		}
	}

	newPhys := map[string]*physTable{}
	for _, t := range sc.Tables {
		old := d.tables[t.Name]
		p := &physTable{materialize: t.Materialize, notNull: map[string]bool{}, columns: map[string]bool{}}
		if old != nil {
			for c := range old.columns {
				p.columns[c] = true
			}
			for c, nn := range old.notNull {
				p.notNull[c] = nn
			}
		}
		if t.Materialize {
			for _, c := range t.Columns {
				if !p.columns[c.Name] {
					p.columns[c.Name] = true
					// Only a fresh table carries NOT NULL; added columns are nullable.
					if old == nil && !c.Nullable {
						p.notNull[c.Name] = true
					}
				}
			}
		}
		newPhys[t.Name] = p
	}

	// Re-map cells per partition and rebuild unique indexes.
	type staged struct {
		part  *partition
		table string
		rt    *rowTable
	}
	var out []staged
	for _, p := range d.parts {
		for _, t := range sc.Tables {
			rt := p.d.tables[t.Name]
			if rt == nil {
				continue
			}
			oldLayout := oldLayouts[t.Name]
			nrt := &rowTable{rows: make(map[string]*storedRow, len(rt.rows)), unique: map[string]map[string]string{}, sorted: rt.sorted}
			for id, r := range rt.rows {
				nr := &storedRow{row: r.row, values: remapValues(oldLayout, t, r.values)}
				if grown(oldLayout, t) && r.row.Payload != nil {
					// Appended columns are NULL: only the null bitmap grows.
					pl, err := rowcodec.AppendNullColumns(nil, r.row.Payload, len(oldLayout), len(t.Columns))
					if err != nil {
						return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("table %q row %q: %w", t.Name, id, err))
					}
					nr.row.Payload = pl
				}
				nrt.rows[id] = nr
				if !t.Materialize {
					continue
				}
				for _, ix := range t.Indexes {
					if !ix.Unique {
						continue
					}
					if k, ok := uniqueKey(t, ix, nr.values); ok {
						if nrt.unique[ix.Name] == nil {
							nrt.unique[ix.Name] = map[string]string{}
						}
						if _, dup := nrt.unique[ix.Name][k]; dup {
							return syncerr.Newf(syncerr.InternalError, "unique index %q of %q cannot be built over existing rows", ix.Name, t.Name)
						}
						nrt.unique[ix.Name][k] = id
					}
				}
			}
			out = append(out, staged{p, t.Name, nrt})
		}
	}

	// Apply.
	for _, p := range d.parts {
		for _, name := range retired {
			delete(p.d.tables, name)
			for k := range p.d.blobRefs {
				if k.table == name {
					delete(p.d.blobRefs, k)
				}
			}
		}
	}
	for _, st := range out {
		st.part.d.tables[st.table] = st.rt
	}
	for _, p := range d.parts {
		if err := widenChanges(p.d, sc, oldLayouts); err != nil {
			return err
		}
	}
	d.tables = newPhys
	d.markerSet, d.markerVersion, d.layouts = true, sc.Version, sc.Layouts()
	// SPEC §2.4: every partition's writer fence rises to the new version
	// (never lowered), so a handle still at the previous one cannot append.
	for _, p := range d.parts {
		if p.logged {
			p.d.fence, p.d.hasFence = checkpoint.RaiseFence(p.d.fence, p.d.hasFence, sc.Version), true
		}
	}
	for _, dc := range decls {
		installCheckpoint(d.part(dc.Partition).d, dc, nowMs)
	}
	return nil
}

// grown reports whether a table kept its stored layout and appended columns.
func grown(old schema.Layout, t *schema.Table) bool {
	return old != nil && len(old) < len(t.Columns)
}

// widenChanges re-encodes the log's change payloads of the tables that
// appended columns, as the rows are, so every stored payload is in the
// running layout. Commits are replaced, never changed in place: readers
// may hold them.
func widenChanges(d *data, sc *schema.Schema, old map[string]schema.Layout) error {
	commits, copied := d.commits, false
	for i, rec := range commits {
		var changes []commit.Change
		for j := range rec.c.Changes {
			ch := &rec.c.Changes[j]
			t := sc.Table(ch.Table)
			if t == nil || ch.Row == nil || !grown(old[ch.Table], t) {
				continue
			}
			if changes == nil {
				changes = append([]commit.Change(nil), rec.c.Changes...)
			}
			pl, err := rowcodec.AppendNullColumns(nil, ch.Row, len(old[ch.Table]), len(t.Columns))
			if err != nil {
				return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("table %q change %d/%d: %w", t.Name, rec.c.Seq, j, err))
			}
			changes[j].Row = pl
		}
		if changes == nil {
			continue
		}
		if !copied {
			commits, copied = append([]*commitRec(nil), d.commits...), true
		}
		nc := *rec
		nc.c.Changes = changes
		commits[i] = &nc
	}
	d.commits = commits
	return nil
}

// remapValues re-positions materialized cells from the old layout to the
// table's columns by name; new columns read NULL.
func remapValues(old schema.Layout, t *schema.Table, values []any) []any {
	if values == nil {
		return nil
	}
	if old == nil {
		out := make([]any, len(t.Columns))
		copy(out, values)
		return out
	}
	byName := make(map[string]any, len(old))
	for i, c := range old {
		if i < len(values) {
			byName[c.Name] = values[i]
		}
	}
	out := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = byName[c.Name]
	}
	return out
}

// installCheckpoint inserts a declared row if absent and raises the fence.
func installCheckpoint(d *data, dc checkpoint.Declaration, nowMs int64) checkpoint.Checkpoint {
	cp, created := checkpoint.Install(d.checkpoints[dc.Name], dc, nowMs)
	if created {
		d.checkpoints[dc.Name] = &cp
	}
	d.fence = checkpoint.RaiseFence(d.fence, d.hasFence, dc.SchemaVersion)
	d.hasFence = true
	return cp
}

// pendingAt lists every not-activated checkpoint at version across all
// partitions, ordered by (partition, name); own, when set, replaces the
// stored data of partition ownName. Callers hold d.mu.
func (d *db) pendingAt(version int32, ownName string, own *data) []checkpoint.PendingRef {
	names := make([]string, 0, len(d.parts))
	for n := range d.parts {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []checkpoint.PendingRef
	for _, n := range names {
		pd := d.parts[n].d
		if own != nil && n == ownName {
			pd = own
		}
		cps := make([]string, 0, len(pd.checkpoints))
		for name, cp := range pd.checkpoints {
			if cp.SchemaVersion == version && cp.State != checkpoint.StateActivated {
				cps = append(cps, name)
			}
		}
		sort.Strings(cps)
		for _, name := range cps {
			out = append(out, checkpoint.PendingRef{Partition: n, Name: name})
		}
	}
	return out
}

// gate reads the serve gate; callers hold d.mu.
func (d *db) gate(name string, running int32, own *data) checkpoint.ServeGate {
	g := checkpoint.ServeGate{Pending: d.pendingAt(running, name, own)}
	if d.markerSet {
		g.StoredSchemaVersion = d.markerVersion
	}
	if p := d.peek(name); p != nil && p.registered {
		g.LogEpoch = p.logEpoch
	}
	return g
}

// ---- checkpoints ----

// DeclareCheckpoint installs a declared row and raises the fence.
func (s *Store) DeclareCheckpoint(ctx context.Context, dc checkpoint.Declaration, nowMs int64) (checkpoint.Checkpoint, error) {
	var cp checkpoint.Checkpoint
	err := s.withPartition(ctx, dc.Partition, func(p *partition) error {
		cp = installCheckpoint(p.d, dc, nowMs)
		return nil
	})
	return cp, err
}

// ClaimCheckpoint takes ownership of a declared or backfilling checkpoint.
func (s *Store) ClaimCheckpoint(ctx context.Context, dc checkpoint.Declaration, nowMs int64) (checkpoint.Checkpoint, error) {
	var cp checkpoint.Checkpoint
	err := s.withPartition(ctx, dc.Partition, func(p *partition) error {
		claimed, err := checkpoint.Claim(p.d.checkpoints[dc.Name], dc.SchemaVersion, nowMs)
		if err != nil {
			return err
		}
		cp = claimed
		p.d.checkpoints[dc.Name] = &claimed
		return nil
	})
	return cp, err
}

// AdvanceCheckpoint is the owner-epoch CAS outside a push.
func (s *Store) AdvanceCheckpoint(ctx context.Context, a ports.CheckpointAdvance) (bool, error) {
	var ok bool
	err := s.withPartition(ctx, a.Partition, func(p *partition) error {
		var cp checkpoint.Checkpoint
		cp, ok = checkpoint.Advance(p.d.checkpoints[a.Name], a.OwnerEpoch, a.Watermark, a.ObservedRows, a.Cursor, a.NowMs)
		if ok {
			p.d.checkpoints[a.Name] = &cp
		}
		return nil
	})
	return ok, err
}

// ActivateCheckpoint activates under the partition write lock.
func (s *Store) ActivateCheckpoint(ctx context.Context, a ports.CheckpointActivation) (checkpoint.Activation, error) {
	var res checkpoint.Activation
	err := s.withPartition(ctx, a.Partition, func(p *partition) error {
		d := p.d
		var err error
		res, err = checkpoint.Decide(checkpoint.ActivationInput{
			Checkpoint:   d.checkpoints[a.Name],
			FenceVersion: d.fence,
			HasFence:     d.hasFence,
			Sources:      sourceState(p, a.Sources, a.Watermark),
			OwnerEpoch:   a.OwnerEpoch,
		})
		if err != nil || res != checkpoint.Activated {
			return err
		}
		cp := *d.checkpoints[a.Name]
		cp.State, cp.Watermark, cp.UpdatedAtMs = checkpoint.StateActivated, a.Watermark, a.NowMs
		d.checkpoints[a.Name] = &cp
		return nil
	})
	return res, err
}

func sourceState(p *partition, tables []string, seq int64) checkpoint.SourceState {
	if len(tables) == 0 {
		return checkpoint.SourceClean
	}
	changed := false
	for i := len(p.d.commits) - 1; i >= 0 && !changed; i-- {
		c := p.d.commits[i].c
		if c.Seq <= seq {
			break
		}
		for _, ch := range c.Changes {
			if slices.Contains(tables, ch.Table) {
				changed = true
				break
			}
		}
	}
	return checkpoint.ClassifySources(changed, p.horizon, seq)
}

// ReadCheckpoints lists the partition's checkpoints ordered by name.
func (s *Store) ReadCheckpoints(ctx context.Context, name string) ([]checkpoint.Checkpoint, error) {
	return peekPartition(ctx, s, name, func(p *partition) ([]checkpoint.Checkpoint, error) {
		out := make([]checkpoint.Checkpoint, 0, len(p.d.checkpoints))
		for _, cp := range p.d.checkpoints {
			out = append(out, *cp)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	})
}

// SourceCoverageSeq returns the highest retained seq changing one of tables.
func (s *Store) SourceCoverageSeq(ctx context.Context, name string, tables []string) (int64, error) {
	return peekPartition(ctx, s, name, func(p *partition) (int64, error) {
		for i := len(p.d.commits) - 1; i >= 0; i-- {
			for _, ch := range p.d.commits[i].c.Changes {
				if slices.Contains(tables, ch.Table) {
					return p.d.commits[i].c.Seq, nil
				}
			}
		}
		return 0, nil
	})
}

// HasSourceChangesAbove classifies the source tables above seq.
func (s *Store) HasSourceChangesAbove(ctx context.Context, name string, tables []string, seq int64) (checkpoint.SourceState, error) {
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return checkpoint.SourceClean, nil
	}
	return sourceState(p, tables, seq), nil
}

// ReadServeGate reads the gate in one snapshot.
func (s *Store) ReadServeGate(ctx context.Context, name string, running int32) (checkpoint.ServeGate, error) {
	if err := s.ready(ctx); err != nil {
		return checkpoint.ServeGate{}, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return s.db.gate(name, running, nil), nil
}
