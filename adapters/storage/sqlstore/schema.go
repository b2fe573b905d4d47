package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// errSameVersion aborts a migration transaction that found the marker
// already at the running version (another process migrated first).
var errSameVersion = errors.New("schema already at the running version")

// EnsureSchema implements ports.SchemaStore. Once a store has ensured a
// schema, a call with the same version and layouts only re-runs the
// checkpoint coverage check.
func (s *Store) EnsureSchema(ctx context.Context, sc *schema.Schema, decls []checkpoint.Declaration) error {
	if sc == nil {
		return syncerr.Newf(syncerr.SchemaInvalid, "storage: nil schema")
	}
	for _, t := range sc.Tables {
		if err := validateTable(t); err != nil {
			return err
		}
	}
	layoutsJSON, err := sc.MarshalLayouts()
	if err != nil {
		return syncerr.Wrap(syncerr.SchemaInvalid, err)
	}
	if st := s.cur.Load(); st == nil || st.version != sc.Version || !sameTables(st, sc, layoutsJSON) {
		if err := s.ensureSchema(ctx, sc, decls); err != nil {
			return err
		}
		s.install(sc, layoutsJSON)
	}
	return s.checkCoverage(ctx, sc.Version, decls)
}

// ensureSchema holds the schema lock for the whole of its work, so nodes
// starting together on one database take turns: the first creates or
// migrates, the others then only check what it wrote.
func (s *Store) ensureSchema(ctx context.Context, sc *schema.Schema, decls []checkpoint.Declaration) error {
	unlock, err := s.d.LockSchemaWork(ctx)
	if err != nil {
		return internal("take the schema lock", err)
	}
	defer unlock()
	if !s.coreDone.Load() {
		if err := s.ensureCore(ctx); err != nil {
			return err
		}
		s.coreDone.Store(true)
	}
	stored, layouts, ok, err := s.readMarker(ctx, s.rd)
	if err != nil {
		return internal("read schema marker", err)
	}
	if ok && stored > sc.Version {
		return tooNew(stored, sc.Version)
	}
	if ok && stored == sc.Version {
		return s.checkSameVersion(ctx, sc, layouts)
	}
	err = s.migrate(ctx, sc, decls)
	if !errors.Is(err, errSameVersion) {
		return err
	}
	// Another process migrated first: check what it wrote.
	if _, layouts, _, err = s.readMarker(ctx, s.rd); err != nil {
		return internal("read schema marker", err)
	}
	return s.checkSameVersion(ctx, sc, layouts)
}

func sameTables(st *schemaState, sc *schema.Schema, layoutsJSON []byte) bool {
	if len(st.tables) != len(sc.Tables) || string(st.layouts) != string(layoutsJSON) {
		return false
	}
	for _, t := range sc.Tables {
		ts, ok := st.tables[t.Name]
		if !ok || ts.t.Materialize != t.Materialize || !sameIndexes(ts.t.Indexes, t.Indexes) {
			return false
		}
	}
	return true
}

func sameIndexes(a, b []schema.Index) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Unique != b[i].Unique || strings.Join(a[i].Columns, "\x00") != strings.Join(b[i].Columns, "\x00") {
			return false
		}
	}
	return true
}

func (s *Store) install(sc *schema.Schema, layoutsJSON []byte) {
	st := &schemaState{version: sc.Version, layouts: layoutsJSON, tables: make(map[string]*tableSQL, len(sc.Tables))}
	for _, t := range sc.Tables {
		st.tables[t.Name] = s.buildTableSQL(t)
	}
	s.cur.Store(st)
}

func tooNew(stored, running int32) error {
	return syncerr.Newf(syncerr.StorageSchemaTooNew,
		"stored schema version %d is newer than the running schema version %d", stored, running).
		WithDetails(map[string]int32{"storedSchemaVersion": stored, "runningSchemaVersion": running})
}

// ensureCore applies the core DDL, added columns and the fence trigger.
func (s *Store) ensureCore(ctx context.Context) error {
	return s.writeTx(ctx, "ensure core schema", "", func(tx WriteTx) error {
		bindings, err := s.d.TableColumns(ctx, tx, bindingsTable)
		if err != nil {
			return err
		}
		for _, stmt := range CoreStatements(s.d) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("core ddl: %w", err)
			}
		}
		if len(bindings) == 0 {
			for _, stmt := range bindingBackfill {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("backfill client bindings: %w", err)
				}
			}
		}
		for _, add := range addedCoreColumns {
			cols, err := s.d.TableColumns(ctx, tx, add.table)
			if err != nil {
				return err
			}
			if hasColumn(cols, add.column) {
				continue
			}
			stmt := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", add.table, add.column, expandTypes(add.decl, s.types))
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("core add column: %w", err)
			}
		}
		for _, stmt := range s.d.FenceDDL() {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("fence ddl: %w", err)
			}
		}
		return nil
	})
}

func hasColumn(cols []PhysicalColumn, name string) bool {
	for _, c := range cols {
		if c.Name == name {
			return true
		}
	}
	return false
}

func (s *Store) readMarker(ctx context.Context, q Querier) (version int32, layouts map[string]schema.Layout, ok bool, err error) {
	var raw string
	found, err := scanOne(q.QueryRowContext(ctx, "SELECT schema_version, layouts FROM sync_schema_meta WHERE id=1"), &version, &raw)
	if err != nil || !found {
		return 0, nil, false, err
	}
	layouts, err = schema.ParseLayouts([]byte(raw))
	if err != nil {
		return 0, nil, false, fmt.Errorf("parse stored layouts: %w", err)
	}
	return version, layouts, true, nil
}

// checkSameVersion refuses, writing nothing, a same-version database whose
// stored layouts or physical tables differ from the running schema.
func (s *Store) checkSameVersion(ctx context.Context, sc *schema.Schema, layouts map[string]schema.Layout) error {
	if err := sc.CheckStoredLayouts(layouts); err != nil {
		return err
	}
	for _, t := range sc.Tables {
		cols, err := s.d.TableColumns(ctx, s.rd, t.Name)
		if err != nil {
			return internal("read table catalog", err)
		}
		if err := CheckPhysical(t, cols, s.types); err != nil {
			return err
		}
	}
	return nil
}

// CheckPhysical compares a table's catalog columns with what the row store
// reads and writes (SPEC-MAP §C.4).
func CheckPhysical(t *schema.Table, cols []PhysicalColumn, ty Types) error {
	refuse := func(d map[string]string) error {
		d["table"] = t.Name
		return syncerr.Newf(syncerr.StoragePhysicalLayoutMismatch, "table %q: %s %s", t.Name, d["column"], d["reason"]).
			WithDetails(d)
	}
	if len(cols) == 0 {
		return refuse(map[string]string{"reason": "missing_table"})
	}
	byName := make(map[string]PhysicalColumn, len(cols))
	for _, c := range cols {
		byName[c.Name] = c
	}
	for _, n := range expectedColumnNames(t) {
		if _, ok := byName[n]; !ok {
			return refuse(map[string]string{"column": n, "reason": "missing_column"})
		}
	}
	for _, m := range metaColumns(ty) {
		c := byName[m.name]
		if !strings.EqualFold(c.Type, m.typ) {
			return refuse(map[string]string{"column": m.name, "reason": "type", "expected": m.typ, "actual": c.Type})
		}
		if c.NotNull != m.notNull {
			return refuse(map[string]string{"column": m.name, "reason": "nullability",
				"expected": nullability(m.notNull), "actual": nullability(c.NotNull)})
		}
	}
	for _, c := range cols {
		want := 0
		switch c.Name {
		case colPartition:
			want = 1
		case colRowID:
			want = 2
		}
		if c.PrimaryKeyPosition != want {
			return refuse(map[string]string{"column": c.Name, "reason": "primary_key"})
		}
	}
	return nil
}

func nullability(notNull bool) string {
	if notNull {
		return "not_null"
	}
	return "nullable"
}

// checkCoverage refuses when a checkpoint at the running version is pending
// and not among the declarations (whole server, every partition).
func (s *Store) checkCoverage(ctx context.Context, running int32, decls []checkpoint.Declaration) error {
	rows, err := s.rd.QueryContext(ctx, s.q(
		"SELECT partition, name FROM sync_backfill_checkpoints WHERE schema_version=? AND state<>'activated' ORDER BY partition, name"), running)
	if err != nil {
		return internal("read pending checkpoints", err)
	}
	defer func() { _ = rows.Close() }()
	declared := map[[2]string]bool{}
	for _, d := range decls {
		declared[[2]string{d.Partition, d.Name}] = true
	}
	for rows.Next() {
		var p, n string
		if err := rows.Scan(&p, &n); err != nil {
			return internal("read pending checkpoints", err)
		}
		if !declared[[2]string{p, n}] {
			return syncerr.Newf(syncerr.StorageCheckpointIncomplete,
				"checkpoint %q of partition %q at schema version %d is pending and not declared", n, p, running).
				WithDetails(map[string]string{"partition": p, "name": n})
		}
	}
	return internal("read pending checkpoints", rows.Err())
}

// migrate brings the app tables to sc in one transaction with the marker,
// the layouts, every partition's writer fence and the checkpoint
// declarations (raising their fences).
func (s *Store) migrate(ctx context.Context, sc *schema.Schema, decls []checkpoint.Declaration) error {
	layoutsJSON, err := sc.MarshalLayouts()
	if err != nil {
		return syncerr.Wrap(syncerr.SchemaInvalid, err)
	}
	nowMs := s.now().UnixMilli()
	return s.writeTx(ctx, "migrate schema", "", func(tx WriteTx) error {
		if err := s.d.LockSchema(ctx, tx); err != nil {
			return err
		}
		stored, layouts, ok, err := s.readMarker(ctx, tx)
		if err != nil {
			return err
		}
		if ok && stored > sc.Version {
			return tooNew(stored, sc.Version)
		}
		if ok && stored == sc.Version {
			return errSameVersion
		}
		if layouts == nil {
			layouts = map[string]schema.Layout{}
		}
		if err := s.migrateTables(ctx, tx, sc, layouts); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO sync_schema_meta(id, schema_version, layouts) VALUES (1, ?, ?)
ON CONFLICT (id) DO UPDATE SET schema_version=excluded.schema_version, layouts=excluded.layouts`),
			sc.Version, string(layoutsJSON)); err != nil {
			return fmt.Errorf("write schema marker: %w", err)
		}
		if err := s.raiseFences(ctx, tx, sc.Version); err != nil {
			return err
		}
		for _, d := range decls {
			if err := s.installCheckpoint(ctx, tx, d, nowMs); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) migrateTables(ctx context.Context, tx WriteTx, sc *schema.Schema, layouts map[string]schema.Layout) error {
	type existing struct {
		cols    []PhysicalColumn
		indexes []string
	}
	have := map[string]existing{}
	for _, t := range sc.Tables {
		cols, err := s.d.TableColumns(ctx, tx, t.Name)
		if err != nil {
			return err
		}
		if len(cols) == 0 {
			continue
		}
		ix, err := s.d.TableIndexes(ctx, tx, t.Name)
		if err != nil {
			return err
		}
		have[t.Name] = existing{cols, ix}
	}
	// Validate every append-only change before any DDL.
	for _, t := range sc.Tables {
		if old, ok := layouts[t.Name]; ok {
			if _, exists := have[t.Name]; exists {
				if err := appendOnly(t, old); err != nil {
					return err
				}
			}
		}
	}
	for name := range layouts {
		if sc.Table(name) != nil || tableIn(sc, name) {
			continue
		}
		for _, stmt := range []string{
			"DELETE FROM sync_row_scopes WHERE tbl=?",
			"DELETE FROM sync_blob_refs WHERE tbl=?",
			"DELETE FROM sync_tombstones WHERE tbl=?",
		} {
			if _, err := tx.ExecContext(ctx, s.q(stmt), name); err != nil {
				return fmt.Errorf("retire table %q: %w", name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoteIdent(name)); err != nil {
			return fmt.Errorf("retire table %q: %w", name, err)
		}
	}
	var drops, creates []string
	for _, t := range sc.Tables {
		ex, exists := have[t.Name]
		if !exists {
			creates = append(creates, createTableDDL(t, s.types))
		} else {
			declared := map[string]bool{}
			for _, ix := range t.Indexes {
				declared[ix.Name] = true
			}
			for _, n := range ex.indexes {
				if strings.HasPrefix(n, indexPrefix) || declared[n] {
					drops = append(drops, "DROP INDEX IF EXISTS "+quoteIdent(n))
				}
			}
			if t.Materialize {
				for _, c := range t.Columns {
					if !hasColumn(ex.cols, c.Name) {
						creates = append(creates, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s",
							quoteIdent(t.Name), quoteIdent(c.Name), s.types.Column(c.Type)))
					}
				}
			}
		}
		creates = append(creates, createIndexDDL(t)...)
	}
	for _, stmt := range append(drops, creates...) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate app tables: %w", err)
		}
	}
	for _, t := range sc.Tables {
		old, ok := layouts[t.Name]
		if _, exists := have[t.Name]; ok && exists && len(old) < len(t.Columns) {
			if err := s.rewritePayloads(ctx, tx, t, len(old)); err != nil {
				return err
			}
			if err := s.rewriteChanges(ctx, tx, t, len(old)); err != nil {
				return err
			}
		}
	}
	return nil
}

func tableIn(sc *schema.Schema, name string) bool {
	for _, t := range sc.Tables {
		if t.Name == name {
			return true
		}
	}
	return false
}

// appendOnly accepts a bump that keeps the stored columns and appends
// nullable ones — the only change stored payloads survive.
func appendOnly(t *schema.Table, old schema.Layout) error {
	now := t.Layout()
	if len(old) > len(now) {
		return syncerr.Newf(syncerr.SchemaInvalid, "table %q: the schema removed columns; only appending nullable columns is supported", t.Name)
	}
	for i := range old {
		if old[i] != now[i] {
			return syncerr.Newf(syncerr.SchemaInvalid, "table %q: column %d changed; only appending nullable columns is supported", t.Name, i)
		}
	}
	for _, c := range now[len(old):] {
		if !c.Nullable {
			return syncerr.Newf(syncerr.SchemaInvalid, "table %q: added column %q must be nullable", t.Name, c.Name)
		}
	}
	return nil
}

// rewritePayloads re-encodes stored full-row payloads written under a
// layout of oldN columns for the current layout: the appended columns are
// NULL, so only the null bitmap grows.
func (s *Store) rewritePayloads(ctx context.Context, tx WriteTx, t *schema.Table, oldN int) error {
	newN := len(t.Columns)
	sel := s.q(fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE (%s, %s) > (?, ?) ORDER BY %s, %s LIMIT 500",
		quoteIdent(colPartition), quoteIdent(colRowID), quoteIdent(colPayload), quoteIdent(t.Name),
		quoteIdent(colPartition), quoteIdent(colRowID), quoteIdent(colPartition), quoteIdent(colRowID)))
	upd := s.q(fmt.Sprintf("UPDATE %s SET %s=? WHERE %s=? AND %s=?",
		quoteIdent(t.Name), quoteIdent(colPayload), quoteIdent(colPartition), quoteIdent(colRowID)))
	type item struct {
		p, id   string
		payload []byte
	}
	afterP, afterID := "", ""
	for {
		rows, err := tx.QueryContext(ctx, sel, afterP, afterID)
		if err != nil {
			return fmt.Errorf("rewrite payloads: %w", err)
		}
		var batch []item
		for rows.Next() {
			var it item
			if err := rows.Scan(&it.p, &it.id, &it.payload); err != nil {
				_ = rows.Close()
				return fmt.Errorf("rewrite payloads: %w", err)
			}
			batch = append(batch, it)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("rewrite payloads: %w", err)
		}
		for _, it := range batch {
			np, err := AppendNullColumns(it.payload, oldN, newN)
			if err != nil {
				return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("table %q row %q: %w", t.Name, it.id, err))
			}
			if _, err := tx.ExecContext(ctx, upd, np, it.p, it.id); err != nil {
				return fmt.Errorf("rewrite payloads: %w", err)
			}
		}
		if len(batch) < 500 {
			return nil
		}
		afterP, afterID = batch[len(batch)-1].p, batch[len(batch)-1].id
	}
}

// rewriteChanges re-encodes the log's change payloads of t written under
// a layout of oldN columns, as rewritePayloads does the rows: every
// stored payload, row or change, is then in the current layout, which a
// served schema window projects onto older versions (SPEC §9).
func (s *Store) rewriteChanges(ctx context.Context, tx WriteTx, t *schema.Table, oldN int) error {
	newN := len(t.Columns)
	sel := s.q(`SELECT partition, commit_seq, idx, payload FROM sync_changes
WHERE tbl = ? AND payload IS NOT NULL AND (partition, commit_seq, idx) > (?, ?, ?)
ORDER BY partition, commit_seq, idx LIMIT 500`)
	upd := s.q(`UPDATE sync_changes SET payload = ? WHERE partition = ? AND commit_seq = ? AND idx = ?`)
	type item struct {
		p       string
		seq     int64
		idx     int64
		payload []byte
	}
	after := item{idx: -1}
	for {
		rows, err := tx.QueryContext(ctx, sel, t.Name, after.p, after.seq, after.idx)
		if err != nil {
			return fmt.Errorf("rewrite change payloads: %w", err)
		}
		var batch []item
		for rows.Next() {
			var it item
			if err := rows.Scan(&it.p, &it.seq, &it.idx, &it.payload); err != nil {
				_ = rows.Close()
				return fmt.Errorf("rewrite change payloads: %w", err)
			}
			batch = append(batch, it)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("rewrite change payloads: %w", err)
		}
		for _, it := range batch {
			np, err := rowcodec.AppendNullColumns(nil, it.payload, oldN, newN)
			if err != nil {
				return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("table %q change %d/%d: %w", t.Name, it.seq, it.idx, err))
			}
			if _, err := tx.ExecContext(ctx, upd, np, it.p, it.seq, it.idx); err != nil {
				return fmt.Errorf("rewrite change payloads: %w", err)
			}
		}
		if len(batch) < 500 {
			return nil
		}
		after = batch[len(batch)-1]
	}
}

// AppendNullColumns re-encodes a full-row payload of oldN columns as one
// of newN columns whose appended columns are NULL (rowcodec.AppendNullColumns).
func AppendNullColumns(payload []byte, oldN, newN int) ([]byte, error) {
	return rowcodec.AppendNullColumns(nil, payload, oldN, newN)
}
