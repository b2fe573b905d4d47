package sim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// ShrinkOptions bound a shrink.
type ShrinkOptions struct {
	// MaxRuns caps the runs a shrink makes (default 400).
	MaxRuns int
	// Progress, when set, hears every run's outcome.
	Progress func(kept int, failed bool)
}

// Shrink looks for a shorter history of o.Seed that still fails as f did
// (same invariant): it drops chunks of steps, halving the chunk size down
// to single steps, and keeps every removal after which the run still
// fails so (delta debugging). It returns the smallest failing report and
// the steps it kept.
func Shrink(ctx context.Context, o Options, f *Failure, so ShrinkOptions) (*Report, []int, error) {
	o = o.withDefaults()
	if so.MaxRuns <= 0 {
		so.MaxRuns = 400
	}
	keep := o.Keep
	if keep == nil {
		// Nothing after the failing step matters.
		for i := 0; i <= f.Step && i < o.Steps; i++ {
			keep = append(keep, i)
		}
	}
	runs := 0
	var best *Report
	try := func(cand []int) (bool, error) {
		runs++
		c := o
		c.Keep = cand
		if c.Keep == nil {
			c.Keep = []int{}
		}
		rep, err := Run(ctx, c)
		if err != nil {
			return false, err
		}
		failed := rep.Failure != nil && rep.Failure.Kind == f.Kind
		if so.Progress != nil {
			so.Progress(len(cand), failed)
		}
		if failed {
			best = rep
		}
		return failed, nil
	}
	if ok, err := try(keep); err != nil {
		return nil, nil, err
	} else if !ok {
		// The prefix alone does not fail (a final check found it): keep all.
		keep = nil
		for i := range o.Steps {
			keep = append(keep, i)
		}
		if ok, err := try(keep); err != nil || !ok {
			return best, keep, err
		}
	}
	for chunk := max(len(keep)/2, 1); chunk >= 1 && runs < so.MaxRuns; chunk /= 2 {
		for start := 0; start < len(keep) && runs < so.MaxRuns; {
			end := min(start+chunk, len(keep))
			cand := append(append([]int(nil), keep[:start]...), keep[end:]...)
			ok, err := try(cand)
			if err != nil {
				return best, keep, err
			}
			if ok {
				keep = cand
				continue // the same start now names the next chunk
			}
			start = end
		}
		if chunk == 1 {
			break
		}
	}
	return best, keep, nil
}

// FormatKeep renders step indexes as ranges ("0-4,9,12-13"), the form
// ParseKeep and syncsim's -keep read.
func FormatKeep(keep []int) string {
	var parts []string
	for i := 0; i < len(keep); {
		j := i
		for j+1 < len(keep) && keep[j+1] == keep[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(keep[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", keep[i], keep[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseKeep reads FormatKeep's form.
func ParseKeep(s string) ([]int, error) {
	out := []int{}
	if s == "" {
		return out, nil
	}
	for _, p := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(p, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("keep %q: %w", p, err)
		}
		b := a
		if ok {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("keep %q: %w", p, err)
			}
		}
		if b < a {
			return nil, fmt.Errorf("keep %q: a range runs upwards", p)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// ReplayCommand is the syncsim command line that runs o's history again.
func ReplayCommand(o Options) string {
	o = o.withDefaults()
	cmd := fmt.Sprintf("go run ./cmd/syncsim -engine %s -seed %d -steps %d -clients %d -workspaces %d", o.Engine, o.Seed, o.Steps, o.Clients, o.Workspaces)
	if o.CheckpointEvery != 60 {
		cmd += fmt.Sprintf(" -checkpoint-every %d", o.CheckpointEvery)
	}
	if o.Images {
		cmd += " -images"
	}
	if o.Break != "" {
		cmd += " -break " + string(o.Break)
	}
	if o.Keep != nil {
		cmd += " -keep " + FormatKeep(o.Keep)
	}
	return cmd + " -v"
}

// Describe lists the kept steps of o's history, one a line.
func Describe(o Options, keep []int) string {
	steps := Generate(o)
	var b strings.Builder
	for _, i := range keep {
		if i < len(steps) {
			fmt.Fprintf(&b, "  %4d  %s\n", i, steps[i])
		}
	}
	return b.String()
}
