package sqlstore

import "testing"

func TestStatementTarget(t *testing.T) {
	for _, c := range []struct{ q, op, table string }{
		{"SELECT max_commit_seq FROM sync_partitions WHERE partition=?", "SELECT", "sync_partitions"},
		{"  insert into x VALUES (?)", "INSERT", ""},
		{"INSERT INTO sync_commits(partition, commit_seq) VALUES (?, ?)", "INSERT", "sync_commits"},
		{`INSERT INTO "items" (a) VALUES ($1)`, "INSERT", "items"},
		{"UPDATE sync_partitions SET max_commit_seq=? WHERE partition=?", "UPDATE", "sync_partitions"},
		{"DELETE FROM sync_row_scopes WHERE partition=?", "DELETE", "sync_row_scopes"},
		{"WITH up AS (INSERT INTO items(a) VALUES ($1) RETURNING 1) SELECT 1", "WITH", "items"},
		{"WITH r AS (SELECT 1) SELECT * FROM r", "WITH", ""},
		{"SELECT 1", "SELECT", ""},
		{"SAVEPOINT sync_push_apply", "SAVEPOINT", ""},
		{"(SELECT a FROM t1) UNION (SELECT a FROM t2)", "SELECT", "t1"},
		{"", "", ""},
	} {
		op, table := statementTarget(c.q)
		if op != c.op || table != c.table {
			t.Errorf("statementTarget(%q) = %q, %q; want %q, %q", c.q, op, table, c.op, c.table)
		}
	}
}
