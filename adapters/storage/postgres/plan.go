package postgres

import (
	"context"
	"strings"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/ports"
)

// Plans returns the EXPLAIN lines of the statements that serve a
// commit-window read and a row scan, planned with enable_seqscan off so a
// sequential scan appears only where no index can serve the statement.
func Plans(ctx context.Context, s *sqlstore.Store, partition string, w ports.CommitWindow, q ports.RowScan) ([]string, error) {
	stmts, err := s.PlanTargets(partition, w, q)
	if err != nil {
		return nil, err
	}
	tx, err := s.DB().DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		return nil, err
	}
	return s.Explain(ctx, tx, "EXPLAIN ", stmts, func(scan func(...any) error) (string, error) {
		var line string
		err := scan(&line)
		return line, err
	})
}

// FullScan reports whether an EXPLAIN line is a sequential scan of a table.
func FullScan(line string) bool { return strings.Contains(line, "Seq Scan on ") }
