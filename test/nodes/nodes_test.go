// Package nodes runs several "syncd serve" processes on one database, the
// way an orchestrator starts, restarts and rolls out a fleet.
package nodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, "syncd-nodes-", &binary)) }

// nodeCount is how many processes start at the same instant.
const nodeCount = 4

// Four nodes released by one barrier on one database, fresh or already
// migrated, all become ready and none exits: the schema work (core
// tables, app tables, segment tables) is serialized across processes.
func TestNodesStartTogether(t *testing.T) {
	proctest.WatchSources(t)
	engines := []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	}
	for _, e := range engines {
		for _, existing := range []bool{false, true} {
			name := e.name + "/fresh"
			if existing {
				name = e.name + "/existing"
			}
			t.Run(name, func(t *testing.T) {
				db := e.database(t)
				if existing {
					n := start(t, db, nil)
					waitReady(t, n)
					if err := n.Stop(30 * time.Second); err != nil {
						t.Fatalf("first node: %v\n%s", err, n.Tail())
					}
				}
				startTogether(t, db)
			})
		}
	}
}

func start(t *testing.T, db string, barrier *syncdproc.Barrier) *syncdproc.Node {
	t.Helper()
	// The startup line, which names the addresses, is logged at info.
	o := syncdproc.Options{Binary: binary, Args: []string{"--database", db, "--auth", "dev", "--log-level", "info"}}
	if barrier != nil {
		o.Stdin, o.Wrap = barrier.Reader(), true
	}
	n, err := syncdproc.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	return n
}

func waitReady(t *testing.T, n *syncdproc.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.WaitReady(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func startTogether(t *testing.T, db string) {
	barrier, err := syncdproc.NewBarrier()
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*syncdproc.Node, nodeCount)
	for i := range nodes {
		nodes[i] = start(t, db, barrier)
	}
	barrier.Release()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			errs[i] = n.WaitReady(ctx, 20*time.Millisecond)
		})
	}
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("node %d: %v", i, err))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d nodes did not become ready:\n%s", len(failed), len(nodes), strings.Join(failed, "\n\n"))
	}
	for i, n := range nodes {
		if err := n.Stop(30 * time.Second); err != nil {
			t.Errorf("node %d: %v\n%s", i, err, n.Tail())
		}
	}
}
