//go:build !race

package testenv

// Race is true when the binary was built with -race.
const Race = false
