package sqlite

// SetCommitHook makes every COMMIT on the writer run h first and fail with
// its error (nil h removes the hook).
func SetCommitHook(s *Store, h func() error) {
	if h == nil {
		s.w.commitHook.Store(nil)
		return
	}
	s.w.commitHook.Store(&h)
}

// Commits counts the COMMITs that succeeded on the writer.
func Commits(s *Store) int64 { return s.w.commits.Load() }
