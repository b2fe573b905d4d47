package main

import (
	"fmt"
	"io"
)

// runInspect is replaced by the SSP2 inspector; until the codec lands it
// refuses honestly.
func runInspect(_ []string, _ io.Reader, _, stderr io.Writer) int {
	_, _ = fmt.Fprintln(stderr, "syncd inspect: not implemented yet")
	return 2
}
