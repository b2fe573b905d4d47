package callout

// CachedScopes is how many grants the resolver keeps.
func (r *ScopeResolver) CachedScopes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cache)
}
