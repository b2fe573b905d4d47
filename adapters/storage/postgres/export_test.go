package postgres

import "context"

// Abandon ends the set as a crash would: its lock goes with its session,
// its schemas stay. It returns the session's backend pid: the server
// releases the lock only once that backend has gone, a moment after the
// connection closes.
func (s *SchemaSet) Abandon() int {
	var pid int
	_ = s.lock.QueryRowContext(context.Background(), "SELECT pg_backend_pid()").Scan(&pid)
	discardConn(s.lock)
	_ = s.db.Close()
	return pid
}
