package sim_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/sim"
	"github.com/syncd-dev/syncd/test/testenv"
)

// EnvSeeds scales the seed counts of this package's tests (a factor,
// e.g. SYNCD_SIM_SEEDS=10 for a longer run).
const EnvSeeds = "SYNCD_SIM_SEEDS"

// seeds is n, or underRace with the race detector on, times EnvSeeds.
func seeds(n, underRace int) int {
	if testenv.Race {
		n = underRace
	}
	if f, err := strconv.Atoi(os.Getenv(EnvSeeds)); err == nil && f > 0 {
		n *= f
	}
	return n
}

// steps is a history's length: half of n under the race detector, which
// makes every step several times slower.
func steps(n int) int { return testenv.Scale(n, 2) }

// runSeeds runs seeds first..first+n-1 of base, on every CPU at once, and
// fails the test with each failing seed's replay command and, for the
// first, its shrunk history.
func runSeeds(t *testing.T, base sim.Options, first int64, n int, each func(o *sim.Options)) sim.Stats {
	t.Helper()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		total    sim.Stats
		failures []*sim.Report
		errs     []error
		wg       sync.WaitGroup
		next     = first
	)
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seed := next
				next++
				mu.Unlock()
				if seed >= first+int64(n) {
					return
				}
				o := base
				o.Seed = seed
				if each != nil {
					each(&o)
				}
				rep, err := sim.Run(ctx, o)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("seed %d: %w", seed, err))
				} else {
					total.Add(rep.Stats)
					if rep.Failure != nil {
						failures = append(failures, rep)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(failures) == 0 {
		return total
	}
	for _, rep := range failures {
		o := base
		o.Seed = rep.Seed
		if each != nil {
			each(&o)
		}
		t.Errorf("seed %d fails: %v\n  replay: %s", rep.Seed, rep.Failure, sim.ReplayCommand(o))
	}
	rep := failures[0]
	o := base
	o.Seed = rep.Seed
	if each != nil {
		each(&o)
	}
	best, keep, err := sim.Shrink(ctx, o, rep.Failure, sim.ShrinkOptions{MaxRuns: 150})
	if err != nil {
		t.Errorf("shrink: %v", err)
		return total
	}
	o.Keep = keep
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d shrunk to %d steps:\n%s", rep.Seed, len(keep), sim.Describe(o, keep))
	if best != nil {
		fmt.Fprintf(&b, "fails with: %v\nlast events:\n  %s\n", best.Failure, strings.Join(best.Tail, "\n  "))
	}
	fmt.Fprintf(&b, "replay: %s", sim.ReplayCommand(o))
	t.Error(b.String())
	return total
}

// TestSameSeedSameHistory: one seed is one history. Two runs of a seed
// log the same events (the same hash), whatever else runs beside them;
// another seed is another history.
func TestSameSeedSameHistory(t *testing.T) {
	engines := []string{"memory", "sqlite"}
	if os.Getenv(pgtest.EnvURL) != "" {
		engines = append(engines, "postgres")
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			o := sim.Options{Seed: 7, Steps: steps(200), Engine: engine, Images: true, Dir: t.TempDir(), PostgresURL: os.Getenv(pgtest.EnvURL)}
			var hashes []string
			for range 2 {
				rep, err := sim.Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Failure != nil {
					t.Fatalf("seed 7 fails: %v", rep.Failure)
				}
				if rep.Stats.Commits == 0 || rep.Stats.Requests == 0 {
					t.Fatalf("seed 7 did nothing: %+v", rep.Stats)
				}
				hashes = append(hashes, rep.Hash)
			}
			o.Seed = 8
			other, err := sim.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if hashes[0] != hashes[1] || other.Hash == hashes[0] {
				t.Fatalf("seed 7 hashed %s then %s; seed 8 %s", hashes[0], hashes[1], other.Hash)
			}
		})
	}
}

// TestSeedsMemory runs a few hundred histories on the in-memory store,
// every other one with clients taking SQLite-image segments, and checks
// they exercised what the harness claims to: every fault kind,
// cursor_expired and the re-bootstrap after it, conflicts, revocations,
// deletes beating unversioned upserts, segments by reference.
func TestSeedsMemory(t *testing.T) {
	n := seeds(300, 200)
	s := runSeeds(t, sim.Options{Steps: steps(300), Dir: t.TempDir()}, 1, n, func(o *sim.Options) { o.Images = o.Seed%2 == 0 })
	t.Logf("%d seeds: %+v", n, s)
	if t.Failed() || n < 60 {
		return
	}
	for _, f := range []struct {
		what string
		n    int
	}{
		{"cursor_expired resets", s.CursorExpired}, {"conflicts", s.Conflicts}, {"revocations", s.Revoked},
		{"replays answered cached", s.Replays}, {"crash restarts", s.Restarts}, {"prunes", s.PrunedCommits},
		{"notices", s.Notices}, {"row_deleted rejections", s.Codes["sync.row_deleted"]},
		{"reference violations", s.Codes["sync.reference_violation"]}, {"segment downloads", s.SegmentDownloads},
		{"images", s.Images},
	} {
		if f.n == 0 {
			t.Errorf("no %s in %d seeds", f.what, n)
		}
	}
	for _, k := range []sim.FaultKind{sim.FaultStatement, sim.FaultRead, sim.FaultAfterCommit, sim.FaultCrash, sim.FaultRecordWrite, sim.FaultPrune} {
		if s.Faults[k.String()] == 0 {
			t.Errorf("the %s fault never fired in %d seeds", k, n)
		}
	}
}

// TestSeedsSQLite and TestSeedsPostgres run a few dozen shorter
// histories on each SQL engine.
func TestSeedsSQLite(t *testing.T) {
	n := seeds(30, 15)
	s := runSeeds(t, sim.Options{Engine: "sqlite", Steps: steps(200), Dir: t.TempDir()}, 1, n, func(o *sim.Options) { o.Images = o.Seed%2 == 0 })
	t.Logf("%d seeds: %+v", n, s)
}

func TestSeedsPostgres(t *testing.T) {
	url := pgtest.BaseURL(t)
	n := seeds(20, 10)
	s := runSeeds(t, sim.Options{Engine: "postgres", Steps: steps(120), PostgresURL: url, Dir: t.TempDir()}, 1, n, nil)
	t.Logf("%d seeds: %+v", n, s)
}

// TestBreakagesAreCaught proves the harness can fail: a server with a
// deliberate breakage fails within the documented number of seeds
// (docs/correctness.md), on each engine.
func TestBreakagesAreCaught(t *testing.T) {
	within := map[sim.Breakage]int{
		sim.BreakTombstones:      10,
		sim.BreakClientRecord:    3,
		sim.BreakColumnVersions:  10,
		sim.BreakEvictAfterReset: 30,
	}
	engines := []string{"memory"}
	if !testenv.Race {
		engines = append(engines, "sqlite") // ten times slower under the race detector
	}
	for _, b := range sim.Breakages {
		for _, engine := range engines {
			t.Run(string(b)+"/"+engine, func(t *testing.T) {
				t.Parallel()
				limit := within[b]
				for seed := int64(1); seed <= int64(limit); seed++ {
					rep, err := sim.Run(context.Background(), sim.Options{Seed: seed, Engine: engine, Break: b, Dir: t.TempDir()})
					if err != nil {
						t.Fatal(err)
					}
					if rep.Failure != nil {
						t.Logf("caught at seed %d: %v", seed, rep.Failure)
						return
					}
				}
				t.Fatalf("%s went unnoticed for %d seeds", b, limit)
			})
		}
	}
}

// TestRegressionSeeds replays the seeds that found real bugs: each holds
// on the fixed build, and where the bug can be re-introduced as a
// breakage, that seed still catches it (so a change of the generator
// that stops exercising the bug fails here, not silently).
func TestRegressionSeeds(t *testing.T) {
	for _, rs := range []struct {
		name  string
		seed  int64
		brk   sim.Breakage
		kinds string
	}{
		// An upsert of the primary key alone stored its all-1 column
		// versions as NULL, read back as every column at the row's
		// version (fixed in push and sqlstore; see docs/correctness.md).
		{"column versions of a primary-key upsert", 4, sim.BreakColumnVersions, "column-versions-mismatch"},
		// The Go client overwrote the last active effective scopes with a
		// reset's empty echo, so an unsubscription after cursor_expired
		// evicted nothing (fixed in client; client.TestResetKeepsEffectiveForEviction).
		{"eviction after a cursor_expired reset", 22, sim.BreakEvictAfterReset, "eviction-incomplete row-outside-grant replica-diverged"},
	} {
		for _, engine := range []string{"memory", "sqlite"} {
			t.Run(rs.name+"/"+engine, func(t *testing.T) {
				o := sim.Options{Seed: rs.seed, Engine: engine, Dir: t.TempDir()}
				rep, err := sim.Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Failure != nil {
					t.Fatalf("regression: %v\n  replay: %s", rep.Failure, sim.ReplayCommand(o))
				}
				if rs.brk == "" {
					return
				}
				o.Break = rs.brk
				if rep, err = sim.Run(context.Background(), o); err != nil {
					t.Fatal(err)
				}
				if rep.Failure == nil || !strings.Contains(rs.kinds, rep.Failure.Kind) {
					t.Fatalf("seed %d no longer catches %s (%v): pick a seed that does", rs.seed, rs.brk, rep.Failure)
				}
			})
		}
	}
}

// TestShrinkFindsAShortHistory: a failing history shrinks to a few steps
// that still fail the same way, and the replay command names them.
func TestShrinkFindsAShortHistory(t *testing.T) {
	o := sim.Options{Seed: 2, Break: sim.BreakClientRecord}
	rep, err := sim.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failure == nil {
		t.Fatal("the broken server held")
	}
	best, keep, err := sim.Shrink(context.Background(), o, rep.Failure, sim.ShrinkOptions{MaxRuns: 200})
	if err != nil {
		t.Fatal(err)
	}
	if best == nil || best.Failure.Kind != rep.Failure.Kind || len(keep) == 0 || len(keep) >= rep.Failure.Step/2 {
		t.Fatalf("shrunk to %d steps (failing at step %d): %v", len(keep), rep.Failure.Step, best)
	}
	o.Keep = keep
	again, err := sim.Run(context.Background(), o)
	if err != nil || again.Failure == nil || again.Failure.Kind != rep.Failure.Kind {
		t.Fatalf("the shrunk history does not fail again: %v %v", again, err)
	}
	if cmd := sim.ReplayCommand(o); !strings.Contains(cmd, "-keep "+sim.FormatKeep(keep)) || !strings.Contains(cmd, "-break client-record-lost") {
		t.Fatalf("replay command %q", cmd)
	}
	t.Logf("%d steps: %s\n%s", len(keep), sim.ReplayCommand(o), sim.Describe(o, keep))
}

func TestKeepRoundTrip(t *testing.T) {
	for _, s := range []string{"", "3", "0-4,9,12-13"} {
		k, err := sim.ParseKeep(s)
		if err != nil || sim.FormatKeep(k) != s {
			t.Errorf("%q: %v %v -> %q", s, k, err, sim.FormatKeep(k))
		}
	}
	for _, bad := range []string{"x", "4-2", "1-"} {
		if _, err := sim.ParseKeep(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
