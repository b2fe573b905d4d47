package sqlite

import (
	"context"
	"regexp"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/ports"
)

// Plans returns the EXPLAIN QUERY PLAN detail lines of the statements that
// serve a commit-window read and a row scan.
func Plans(ctx context.Context, s *sqlstore.Store, partition string, w ports.CommitWindow, q ports.RowScan) ([]string, error) {
	stmts, err := s.PlanTargets(partition, w, q)
	if err != nil {
		return nil, err
	}
	return s.Explain(ctx, s.DB().DB, "EXPLAIN QUERY PLAN ", stmts, func(scan func(...any) error) (string, error) {
		var id, parent, unused int
		var detail string
		err := scan(&id, &parent, &unused, &detail)
		return detail, err
	})
}

// fullScan matches a plan step that reads a whole table (SCAN without an
// index) rather than a subquery result or an index range.
var fullScan = regexp.MustCompile(`^SCAN (\S+)( AS \S+)?$`)

// FullScan reports whether an EXPLAIN QUERY PLAN line scans a whole table.
func FullScan(line string) bool {
	m := fullScan.FindStringSubmatch(line)
	return m != nil && !subquery.MatchString(m[1])
}

// subquery names the engine's own subquery aliases (c, s0, s1, …).
var subquery = regexp.MustCompile(`^(c|s\d+)$`)
