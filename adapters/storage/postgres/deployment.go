package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Deployment names the deployment whose tables dsn selects: the cluster
// (its system identifier, when the role may read it), the database and
// the schema (the first of the search_path that exists, else the
// search_path). Every node of a deployment gets the same name however it
// reaches the server (host names, proxies, poolers), so a fanout outside
// the database can tell deployments apart by it.
func Deployment(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("postgres: deployment: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	simple := pgx.QueryExecModeSimpleProtocol // poolers in transaction mode
	var db, schema string
	if err := conn.QueryRow(ctx, "select current_database(), coalesce(current_schema(), current_setting('search_path'))", simple).Scan(&db, &schema); err != nil {
		return "", fmt.Errorf("postgres: deployment: %w", err)
	}
	var system string
	err = conn.QueryRow(ctx, "select system_identifier::text from pg_control_system()", simple).Scan(&system)
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && pe.Code == "42501") { // insufficient_privilege: the name still holds
		return "", fmt.Errorf("postgres: deployment: %w", err)
	}
	return system + "/" + db + "/" + schema, nil
}
