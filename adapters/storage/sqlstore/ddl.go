package sqlstore

import (
	"strings"
)

// coreDDL is the core sync_* schema with engine types as {TOKENS}. It
// follows the reference's table set; SPEC-MAP §E.1/§E.2.
const coreDDL = `
CREATE TABLE IF NOT EXISTS sync_partitions(
  partition TEXT PRIMARY KEY,
  max_commit_seq {SEQ} NOT NULL DEFAULT 0,
  horizon_seq {SEQ} NOT NULL DEFAULT 0
){KEYED};
CREATE TABLE IF NOT EXISTS sync_partition_registry(
  partition TEXT PRIMARY KEY,
  log_epoch TEXT NOT NULL,
  epoch_required {BOOL} NOT NULL DEFAULT {FALSE},
  last_authenticated_at_ms {SEQ} NOT NULL
){KEYED};
CREATE TABLE IF NOT EXISTS sync_row_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, row_id {KEY} NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, row_id)
){KEYED};
CREATE INDEX IF NOT EXISTS sync_row_scopes_by_row
  ON sync_row_scopes(partition, tbl, row_id);
CREATE TABLE IF NOT EXISTS sync_commits(
  partition TEXT NOT NULL, commit_seq {SEQ} NOT NULL,
  client_id TEXT NOT NULL, client_commit_id TEXT NOT NULL,
  actor_id TEXT NOT NULL, created_at_ms {SEQ} NOT NULL,
  writer_version {SEQ},
  PRIMARY KEY(partition, commit_seq)
){KEYED};
CREATE INDEX IF NOT EXISTS sync_commits_by_time
  ON sync_commits(partition, created_at_ms);
CREATE TABLE IF NOT EXISTS sync_changes(
  partition TEXT NOT NULL, commit_seq {SEQ} NOT NULL, idx {INT} NOT NULL,
  tbl TEXT NOT NULL, row_id {KEY} NOT NULL, op {OP} NOT NULL,
  row_version {SEQ}, scopes {JSON} NOT NULL, payload {BLOB},
  PRIMARY KEY(partition, commit_seq, idx)
){KEYED};
CREATE INDEX IF NOT EXISTS sync_changes_by_table
  ON sync_changes(partition, commit_seq, tbl, idx);
CREATE TABLE IF NOT EXISTS sync_change_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, commit_seq {SEQ} NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, commit_seq)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_push_results(
  partition TEXT NOT NULL, client_id TEXT NOT NULL,
  client_commit_id TEXT NOT NULL, result {DOC} NOT NULL,
  actor_id TEXT,
  PRIMARY KEY(partition, client_id, client_commit_id)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_reactions(
  partition TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  type TEXT NOT NULL, version {INT} NOT NULL, payload {DOC} NOT NULL,
  source_client_id TEXT NOT NULL, source_client_commit_id TEXT NOT NULL,
  source_commit_seq {SEQ} NOT NULL, created_at_ms {SEQ} NOT NULL,
  available_at_ms {SEQ} NOT NULL, status TEXT NOT NULL,
  attempts {INT} NOT NULL, max_attempts {INT} NOT NULL,
  lease_owner TEXT, lease_expires_at_ms {SEQ}, completed_at_ms {SEQ},
  last_failure {DOC},
  PRIMARY KEY(partition, idempotency_key),
  CHECK(status IN ('pending', 'leased', 'completed', 'dead-letter'))
){KEYED};
CREATE INDEX IF NOT EXISTS sync_reactions_due
  ON sync_reactions(partition, status, available_at_ms, created_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_lease
  ON sync_reactions(partition, status, lease_expires_at_ms);
CREATE INDEX IF NOT EXISTS sync_reactions_completed
  ON sync_reactions(partition, status, completed_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_dead_letter
  ON sync_reactions(partition, status, available_at_ms, idempotency_key);
CREATE TABLE IF NOT EXISTS sync_clients(
  partition TEXT NOT NULL, client_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  wire_version {INT} NOT NULL DEFAULT 1,
  cursor {SEQ} NOT NULL, subscriptions {DOC} NOT NULL,
  updated_at_ms {SEQ} NOT NULL,
  PRIMARY KEY(partition, client_id)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_client_bindings(
  partition TEXT NOT NULL, client_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  PRIMARY KEY(partition, client_id)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_blob_refs(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id {KEY} NOT NULL,
  blob_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, row_id, blob_id)
){KEYED};
CREATE INDEX IF NOT EXISTS sync_blob_refs_by_blob
  ON sync_blob_refs(partition, blob_id);
CREATE TABLE IF NOT EXISTS sync_blob_claims(
  partition TEXT NOT NULL, blob_id TEXT NOT NULL,
  claimed_at_ms {SEQ} NOT NULL,
  PRIMARY KEY(partition, blob_id)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_tombstones(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id {KEY} NOT NULL,
  commit_seq {SEQ} NOT NULL,
  PRIMARY KEY(partition, tbl, row_id)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_backfill_checkpoints(
  partition TEXT NOT NULL, name TEXT NOT NULL,
  schema_version {INT} NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('declared','backfilling','activated')),
  watermark {SEQ} NOT NULL DEFAULT 0,
  owner_epoch {SEQ} NOT NULL DEFAULT 0,
  observed_rows {SEQ} NOT NULL DEFAULT 0,
  updated_at_ms {SEQ} NOT NULL,
  backfill_cursor TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(partition, name)
){KEYED};
CREATE TABLE IF NOT EXISTS sync_writer_fence(
  partition TEXT PRIMARY KEY,
  required_writer_version {SEQ} NOT NULL
){KEYED};
CREATE TABLE IF NOT EXISTS sync_schema_meta(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version {SEQ} NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}'
)`

// addedCoreColumns are columns later releases added to existing core
// tables; construction adds them when missing (never with a default for
// writer_version, which must stay NULL for old writers).
var addedCoreColumns = []struct{ table, column, decl string }{
	{"sync_clients", "wire_version", "{INT} NOT NULL DEFAULT 1"},
	{"sync_commits", "writer_version", "{SEQ}"},
	// NULL on records stored before results carried their actor.
	{"sync_push_results", "actor_id", "TEXT"},
	// A backfill's resume position (app/checkpoint), beside the reference columns.
	{"sync_backfill_checkpoints", "backfill_cursor", "TEXT NOT NULL DEFAULT ''"},
}

// bindingsTable holds the client-id bindings (SPEC §1.5), added after the
// reference layout: a database that predates it gets it filled once, in
// the transaction that creates it, with bindingBackfill.
const bindingsTable = "sync_client_bindings"

// bindingBackfill binds the client ids an older database already knows:
// first each pulled client to its record's actor, then each client id
// still unbound to the actor of its commits (the smallest, should the log
// hold several). Push results stored without an actor are then replayed
// only to that actor.
var bindingBackfill = []string{
	`INSERT INTO sync_client_bindings(partition, client_id, actor_id)
SELECT partition, client_id, actor_id FROM sync_clients WHERE true
ON CONFLICT (partition, client_id) DO NOTHING`,
	`INSERT INTO sync_client_bindings(partition, client_id, actor_id)
SELECT partition, client_id, MIN(actor_id) FROM sync_commits WHERE true GROUP BY partition, client_id
ON CONFLICT (partition, client_id) DO NOTHING`,
}

func expandTypes(ddl string, t Types) string {
	return strings.NewReplacer(
		"{SEQ}", t.Seq, "{INT}", t.Int, "{OP}", t.SmallOp, "{JSON}", t.JSON,
		"{DOC}", t.Doc, "{BLOB}", t.Blob, "{BOOL}", t.Bool, "{FALSE}", t.False, "{KEY}", t.Key, "{KEYED}", t.Keyed,
	).Replace(ddl)
}

// CoreStatements returns the dialect's core DDL, one statement each.
func CoreStatements(d Dialect) []string {
	var out []string
	for _, s := range strings.Split(expandTypes(coreDDL, d.Types()), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// quoteIdent quotes an identifier for both engines.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Meta columns of every app table (SPEC-MAP §E.3).
const (
	colPartition      = "_sync_partition"
	colRowID          = "_sync_row_id"
	colVersion        = "_sync_server_version"
	colScopes         = "_sync_scopes"
	colPayload        = "_sync_payload"
	colColumnVersions = "_sync_column_versions"
)

// metaColumn is one storage-internal column of an app table.
type metaColumn struct {
	name    string
	typ     string
	notNull bool
}

// metaColumns lists the meta columns in DDL order; app columns sit between
// the row id and the version.
func metaColumns(t Types) []metaColumn {
	return []metaColumn{
		{colPartition, "TEXT", true},
		{colRowID, "TEXT", true},
		{colVersion, t.Seq, true},
		{colScopes, t.JSON, true},
		{colPayload, t.Blob, true},
		{colColumnVersions, t.Blob, false},
	}
}
