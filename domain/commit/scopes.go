package commit

import "slices"

// ScopeFilter is an effective scope filter: variable → allowed values
// (SPEC §3.2). Variables are independent dimensions.
type ScopeFilter = map[string][]string

// MatchScopes reports whether stored scopes pass filter: for every
// variable of the filter the stored value is one of its values. A variable
// the row does not store, or an empty value list, never matches; an empty
// filter matches everything (storage refuses empty filters before asking).
func MatchScopes(stored map[string]string, filter ScopeFilter) bool {
	for k, vals := range filter {
		v, ok := stored[k]
		if !ok || !slices.Contains(vals, v) {
			return false
		}
	}
	return true
}

// IndexVariable is the variable whose (table, variable, value) index
// entries select candidates for a filtered read: the first in sorted order,
// so every engine picks the same one. The other variables are checked
// against each candidate's stored scopes (MatchScopes). "" for an empty
// filter.
func IndexVariable(filter ScopeFilter) string {
	keys := make([]string, 0, len(filter))
	for k := range filter {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return ""
	}
	return slices.Min(keys)
}
