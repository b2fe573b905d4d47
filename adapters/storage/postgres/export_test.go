package postgres

// Abandon ends the set as a crash would: its lock goes with its session,
// its schemas stay.
func (s *SchemaSet) Abandon() {
	discardConn(s.lock)
	_ = s.db.Close()
}
