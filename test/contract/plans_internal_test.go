package contract

import (
	"strings"
	"testing"
)

func TestPlanProblems(t *testing.T) {
	tests := []struct {
		name    string
		dialect string
		plan    string
		bad     bool
	}{
		{"sqlite keyed", "sqlite", `CO-ROUTINE c
SEARCH sync_row_scopes USING COVERING INDEX sqlite_autoindex_sync_row_scopes_1 (partition=? AND tbl=? AND var=? AND value=? AND row_id>?)
SCAN c
SEARCH r USING INDEX sqlite_autoindex_tasks_1 (_sync_partition=? AND _sync_row_id=?) LEFT-JOIN`, false},
		{"sqlite app table scan", "sqlite", `CO-ROUTINE c
SEARCH sync_row_scopes USING COVERING INDEX sqlite_autoindex_sync_row_scopes_1 (partition=? AND tbl=? AND var=? AND value=? AND row_id>?)
SCAN c
SCAN r LEFT-JOIN`, true},
		{"sqlite log scan", "sqlite", `SCAN sync_changes`, true},
		{"sqlite scope index without value", "sqlite", `SEARCH sync_row_scopes USING INDEX sync_row_scopes_by_row (partition=? AND tbl=? AND row_id>?)`, true},
		{"postgres keyed", "postgres", `Nested Loop Left Join
  ->  Index Only Scan using sync_row_scopes_pkey on sync_row_scopes  (cost=0.28..10.08 rows=2 width=11)
        Index Cond: ((partition = 'p1'::text) AND (tbl = 'tasks'::text) AND (var = 'project'::text) AND (value = 'p1'::text))
  ->  Index Scan using tasks_pkey on tasks r  (cost=0.28..8.30 rows=1 width=146)
        Index Cond: ((_sync_partition = 'p1'::text) AND (_sync_row_id = sync_row_scopes.row_id))`, false},
		{"postgres bitmap keyed", "postgres", `->  Bitmap Heap Scan on sync_change_scopes  (cost=4.51..6.81 rows=12 width=8)
      Recheck Cond: ((partition = 'p1'::text) AND (value = 'o1'::text))
      ->  Bitmap Index Scan on sync_change_scopes_pkey  (cost=0.00..4.51 rows=12 width=0)
            Index Cond: ((partition = 'p1'::text) AND (value = 'o1'::text))`, false},
		{"postgres seq scan", "postgres", `->  Seq Scan on sync_changes ch  (cost=0.00..1.00 rows=1 width=8)`, true},
		{"postgres scope index filtered", "postgres", `->  Index Scan using sync_row_scopes_by_row on sync_row_scopes  (cost=0.28..8.31 rows=1 width=11)
      Index Cond: ((partition = 'p1'::text) AND (tbl = 'notes'::text) AND (row_id > ''::text))
      Filter: ((value = 'p1'::text) AND (var = 'project'::text))`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planProblems(tt.dialect, strings.Split(tt.plan, "\n"))
			if (len(got) > 0) != tt.bad {
				t.Fatalf("planProblems = %v, want problems %v", got, tt.bad)
			}
		})
	}
}
