package sqlstore

import "database/sql"

// Pools returns the store's connection pools by role ("write", and "read"
// when reads have a pool of their own), for pool statistics.
func (s *Store) Pools() map[string]*sql.DB {
	m := map[string]*sql.DB{"write": s.db.DB}
	if s.rdb != nil && s.rdb.DB != s.db.DB {
		m["read"] = s.rdb.DB
	}
	return m
}
