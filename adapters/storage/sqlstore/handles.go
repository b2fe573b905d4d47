package sqlstore

import "github.com/uptrace/bun"

// ReadDB returns the bun handle reads use outside write transactions (the
// SQLite read pool; the pool itself on PostgreSQL), for side stores that
// live in the same database.
func (s *Store) ReadDB() *bun.DB { return s.rdb }
