package sqlstore

import (
	"database/sql"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/syncd-dev/syncd/domain/schema"
)

var sqlErrNoRows = sql.ErrNoRows

// indexPrefix marks Syncular-owned app-table indexes.
const indexPrefix = "sync_ix_"

// physicalIndexName is the declared index's database name: the ownership
// prefix plus the name, or the FNV-1a-64 hash of the name when that would
// exceed 63 bytes (PostgreSQL's identifier limit).
func physicalIndexName(declared string) string {
	n := indexPrefix + declared
	if len(n) <= 63 {
		return n
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(declared))
	return fmt.Sprintf("%s%016x", indexPrefix, h.Sum64())
}

// tableSQL is one app table's prepared statement texts (already rebound).
type tableSQL struct {
	t      *schema.Table
	name   string
	quoted string
	types  []schema.ColumnType // app column types in order (materialized only)

	upsert       string
	upsertRaw    string // upsert before rebinding, for composed statements
	delCombined  string
	get          string
	del          string
	rowScopesDel string
	tombDel      string
	blobDel      string
	tombGet      string
	// getTomb is get with the row's tombstone, for a push that reads an
	// absent row and then asks whether it was deleted.
	getTomb    string
	selectCols string // r.version, r.scopes, r.payload, r.column_versions
}

func (s *Store) buildTableSQL(t *schema.Table) *tableSQL {
	ts := &tableSQL{t: t, name: t.Name, quoted: quoteIdent(t.Name)}
	cols := []string{colPartition, colRowID}
	if t.Materialize {
		for _, c := range t.Columns {
			cols = append(cols, c.Name)
			ts.types = append(ts.types, c.Type)
		}
	}
	cols = append(cols, colVersion, colScopes, colPayload, colColumnVersions)
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = quoteIdent(c)
	}
	var set []string
	for _, c := range quoted[2:] {
		set = append(set, c+"=excluded."+c)
	}
	ts.upsertRaw = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s, %s) DO UPDATE SET %s",
		ts.quoted, strings.Join(quoted, ", "), placeholders(len(cols)),
		quoteIdent(colPartition), quoteIdent(colRowID), strings.Join(set, ", "))
	ts.upsert = s.q(ts.upsertRaw)
	ts.selectCols = fmt.Sprintf("r.%s, r.%s, r.%s, r.%s",
		quoteIdent(colVersion), quoteIdent(colScopes), quoteIdent(colPayload), quoteIdent(colColumnVersions))
	ts.get = s.q(fmt.Sprintf("SELECT %s FROM %s r WHERE r.%s=? AND r.%s=?",
		ts.selectCols, ts.quoted, quoteIdent(colPartition), quoteIdent(colRowID)))
	ts.del = s.q(fmt.Sprintf("DELETE FROM %s WHERE %s=? AND %s=?",
		ts.quoted, quoteIdent(colPartition), quoteIdent(colRowID)))
	ts.delCombined = s.q(fmt.Sprintf("WITH d AS (DELETE FROM %s WHERE %s=? AND %s=?), "+
		"s AS (DELETE FROM sync_row_scopes WHERE partition=? AND tbl=? AND row_id=?), "+
		"b AS (DELETE FROM sync_blob_refs WHERE partition=? AND tbl=? AND row_id=?) SELECT 1",
		ts.quoted, quoteIdent(colPartition), quoteIdent(colRowID)))
	ts.rowScopesDel = s.q("DELETE FROM sync_row_scopes WHERE partition=? AND tbl=? AND row_id=?")
	ts.tombDel = s.q("DELETE FROM sync_tombstones WHERE partition=? AND tbl=? AND row_id=?")
	ts.blobDel = s.q("DELETE FROM sync_blob_refs WHERE partition=? AND tbl=? AND row_id=?")
	ts.tombGet = s.q("SELECT commit_seq FROM sync_tombstones WHERE partition=? AND tbl=? AND row_id=?")
	ts.getTomb = s.q(fmt.Sprintf(`SELECT %s, t.commit_seq FROM (SELECT 1 AS one) AS base
LEFT JOIN %s r ON r.%s=? AND r.%s=?
LEFT JOIN sync_tombstones t ON t.partition=? AND t.tbl=? AND t.row_id=?`,
		ts.selectCols, ts.quoted, quoteIdent(colPartition), quoteIdent(colRowID)))
	return ts
}

// createTableDDL is CREATE TABLE IF NOT EXISTS for one app table.
func createTableDDL(t *schema.Table, ty Types) string {
	meta := metaColumns(ty)
	def := func(m metaColumn) string {
		typ := m.typ
		if m.name == colRowID {
			typ = ty.Key
		}
		if m.notNull {
			return quoteIdent(m.name) + " " + typ + " NOT NULL"
		}
		return quoteIdent(m.name) + " " + typ
	}
	defs := []string{def(meta[0]), def(meta[1])}
	if t.Materialize {
		for _, c := range t.Columns {
			d := quoteIdent(c.Name) + " " + ty.Column(c.Type)
			if !c.Nullable {
				d += " NOT NULL"
			}
			defs = append(defs, d)
		}
	}
	for _, m := range meta[2:] {
		defs = append(defs, def(m))
	}
	defs = append(defs, fmt.Sprintf("PRIMARY KEY (%s, %s)", quoteIdent(colPartition), quoteIdent(colRowID)))
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)%s", quoteIdent(t.Name), strings.Join(defs, ", "), ty.Keyed)
}

// createIndexDDL creates the table's declared indexes on (_sync_partition, cols…).
func createIndexDDL(t *schema.Table) []string {
	if !t.Materialize {
		return nil
	}
	var out []string
	for _, ix := range t.Indexes {
		cols := []string{quoteIdent(colPartition)}
		for _, c := range ix.Columns {
			cols = append(cols, quoteIdent(c))
		}
		unique := ""
		if ix.Unique {
			unique = "UNIQUE "
		}
		out = append(out, fmt.Sprintf("CREATE %sINDEX IF NOT EXISTS %s ON %s (%s)",
			unique, quoteIdent(physicalIndexName(ix.Name)), quoteIdent(t.Name), strings.Join(cols, ", ")))
	}
	return out
}

// expectedColumnNames lists the physical columns a table must have.
func expectedColumnNames(t *schema.Table) []string {
	out := []string{colPartition, colRowID}
	if t.Materialize {
		for _, c := range t.Columns {
			out = append(out, c.Name)
		}
	}
	return append(out, colVersion, colScopes, colPayload, colColumnVersions)
}
