// Package testenv tells tests about the build they run in, so data-heavy
// cases can shrink under the race detector (pure-Go SQLite is about ten
// times slower there).
package testenv

// Scale returns n, or n/div (at least 1) when the race detector is on.
func Scale(n, div int) int {
	if !Race || div <= 1 {
		return n
	}
	return max(n/div, 1)
}
