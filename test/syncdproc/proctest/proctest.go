// Package proctest is the TestMain of the suites that run the built
// server as a process: it builds the binary once for the whole package.
package proctest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/test/syncdproc"
)

// Main builds the server binary into a temporary directory named after
// prefix, stores its path in *binary, runs the tests, removes the
// directory and returns the exit code for os.Exit.
func Main(m *testing.M, prefix string, binary *string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, remove, err := syncdproc.BuildTemp(ctx, prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	*binary = bin
	return m.Run()
}

// WatchSources makes the calling package's cached test result depend on
// the module's sources (syncdproc.WatchSources). Call it first in each
// test that runs the binary: go test records the files a test reads
// only while tests run, not in TestMain.
func WatchSources(t testing.TB) {
	t.Helper()
	if err := syncdproc.WatchSources(t.Context()); err != nil {
		t.Fatal(err)
	}
}
