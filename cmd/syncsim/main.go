// Command syncsim runs the deterministic simulation harness (test/sim)
// over many seeds: each seed is one generated history of simulated
// clients (the Go client, each with its own replica) writing, syncing,
// going offline, losing responses and changing subscriptions and grants,
// against syncd's use cases in process on a virtual clock, over a storage
// decorator that injects faults at seeded points; every history is
// checked against an oracle model of the spec. A failing seed is printed
// with the command that replays it and, unless -no-shrink, the shortest
// history found that still fails.
//
//	syncsim [-seeds N] [-seed FIRST] [-engine memory|sqlite|postgres] [flags]
//	syncsim -seed S -keep 3,7,12-15 -v      # replay a (shrunk) history
//
// Exit status: 0 when every seed held, 1 on a failing seed or an error,
// 2 on usage errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/syncd-dev/syncd/test/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type flags struct {
	o        sim.Options
	seeds    int
	workers  int
	keep     string
	verbose  bool
	noShrink bool
	progress time.Duration
	brk      string
}

func parse(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("syncsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&f.o.Seed, "seed", 1, "first seed")
	fs.IntVar(&f.seeds, "seeds", 1, "seeds to run, from -seed on")
	fs.IntVar(&f.o.Steps, "steps", 300, "steps of each history")
	fs.IntVar(&f.o.Clients, "clients", 4, "simulated clients (two per actor)")
	fs.IntVar(&f.o.Workspaces, "workspaces", 3, "workspaces (scope values)")
	fs.IntVar(&f.o.CheckpointEvery, "checkpoint-every", 60, "a checkpoint every so many steps (negative: only the final check)")
	fs.StringVar(&f.o.Engine, "engine", "memory", "storage engine: memory, sqlite or postgres")
	fs.StringVar(&f.o.PostgresURL, "postgres", os.Getenv("SYNCD_TEST_POSTGRES_URL"), "PostgreSQL URL for -engine postgres (each run in a schema of its own)")
	fs.StringVar(&f.o.Dir, "dir", "", "directory of SQLite files and image scratch files (default: the system temporary directory)")
	fs.BoolVar(&f.o.Images, "images", false, "clients take SQLite-image bootstrap segments")
	fs.StringVar(&f.keep, "keep", "", "run only these steps (a shrunk history: 0-4,9,12-13)")
	fs.StringVar(&f.brk, "break", "", "run a deliberately broken server: "+breakNames())
	fs.BoolVar(&f.verbose, "v", false, "print every event of a single seed")
	fs.BoolVar(&f.noShrink, "no-shrink", false, "do not shrink a failing history")
	fs.IntVar(&f.workers, "workers", 1, "seeds run at once")
	fs.DurationVar(&f.progress, "progress", 10*time.Second, "progress line interval")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.seeds < 1 || f.workers < 1 {
		return f, errors.New("-seeds and -workers must be at least 1")
	}
	if f.brk != "" {
		f.o.Break = sim.Breakage(f.brk)
		known := false
		for _, b := range sim.Breakages {
			known = known || b == f.o.Break
		}
		if !known {
			return f, fmt.Errorf("-break %q: want one of %s", f.brk, breakNames())
		}
	}
	if f.keep != "" {
		k, err := sim.ParseKeep(f.keep)
		if err != nil {
			return f, err
		}
		f.o.Keep = k
	}
	if f.verbose && f.seeds > 1 {
		return f, errors.New("-v prints one seed's events: use it with -seeds 1")
	}
	return f, nil
}

func breakNames() string {
	var n []string
	for _, b := range sim.Breakages {
		n = append(n, string(b))
	}
	return strings.Join(n, ", ")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "syncsim: %v\n", err)
		return 2
	}
	if f.verbose {
		f.o.Trace = stdout
	}
	start := time.Now()
	var (
		next        atomic.Int64
		done, steps atomic.Int64
		mu          sync.Mutex
		total       sim.Stats
		failures    []*sim.Report
		setupErr    error
	)
	next.Store(f.o.Seed)
	last := f.o.Seed + int64(f.seeds)
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Add(1)
	go func() {
		defer ticker.Done()
		t := time.NewTicker(f.progress)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				fmt.Fprintf(stdout, "progress: %d/%d seeds, %d steps, %d requests, %d commits, %d failing, %s\n",
					done.Load(), f.seeds, steps.Load(), total.Requests, total.Commits, len(failures), time.Since(start).Round(time.Second))
				mu.Unlock()
			}
		}
	}()
	var wg sync.WaitGroup
	for range f.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1) - 1
				if seed >= last || ctx.Err() != nil {
					return
				}
				o := f.o
				o.Seed = seed
				rep, err := sim.Run(ctx, o)
				mu.Lock()
				if err != nil {
					if setupErr == nil && ctx.Err() == nil {
						setupErr = fmt.Errorf("seed %d: %w", seed, err)
					}
					mu.Unlock()
					return
				}
				total.Add(rep.Stats)
				if rep.Failure != nil {
					failures = append(failures, rep)
				}
				mu.Unlock()
				done.Add(1)
				steps.Add(int64(rep.Executed))
			}
		}()
	}
	wg.Wait()
	close(stop)
	ticker.Wait()
	fmt.Fprintf(stdout, "ran %d seeds (%d..%d) on %s: %d steps, %d operations, %d requests, %d commits (%d applied, %d rejected, %d conflicts), %d replays, %d cursor_expired, %d revocations, %d prunes, %d restarts, %d bootstraps (%d segment downloads, %d images), faults %v, in %s\n",
		done.Load(), f.o.Seed, f.o.Seed+done.Load()-1, f.o.Engine, steps.Load(), total.Operations, total.Requests, total.Commits, total.Applied, total.Rejected,
		total.Conflicts, total.Replays, total.CursorExpired, total.Revoked, total.Prunes, total.Restarts, total.Bootstraps, total.SegmentDownloads,
		total.Images, total.Faults, time.Since(start).Round(time.Millisecond))
	if setupErr != nil {
		fmt.Fprintf(stderr, "syncsim: %v\n", setupErr)
		return 1
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "syncsim: interrupted")
		return 1
	}
	if len(failures) == 0 {
		fmt.Fprintln(stdout, "every seed held")
		return 0
	}
	sort.Slice(failures, func(i, j int) bool { return failures[i].Seed < failures[j].Seed })
	for _, rep := range failures {
		fmt.Fprintf(stdout, "FAIL seed %d: %v\n", rep.Seed, rep.Failure)
	}
	report(ctx, f, failures[0], stdout)
	return 1
}

// report prints the first failing seed: its last events, the replay
// command and, shrunk, the shortest history found that still fails.
func report(ctx context.Context, f flags, rep *sim.Report, w io.Writer) {
	o := f.o
	o.Seed, o.Trace = rep.Seed, nil
	fmt.Fprintf(w, "\nseed %d fails: %v\nlast events:\n", rep.Seed, rep.Failure)
	for _, l := range rep.Tail {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "replay: %s\n", sim.ReplayCommand(o))
	if f.noShrink {
		return
	}
	fmt.Fprintln(w, "shrinking...")
	best, keep, err := sim.Shrink(ctx, o, rep.Failure, sim.ShrinkOptions{})
	if err != nil {
		fmt.Fprintf(w, "shrink: %v\n", err)
		return
	}
	o.Keep = keep
	fmt.Fprintf(w, "shortest failing history: %d steps\n%s", len(keep), sim.Describe(o, keep))
	if best != nil {
		fmt.Fprintf(w, "fails with: %v\n", best.Failure)
	}
	fmt.Fprintf(w, "replay: %s\n", sim.ReplayCommand(o))
}
