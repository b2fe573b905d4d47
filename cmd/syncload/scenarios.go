package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/syncd-dev/syncd/domain/ssp2"
)

// scenarios is the registry, in help order.
func scenarios() []*scenario {
	return []*scenario{pushPull(), bootstrapStorm(), catchUp(), mixedSoak(), maintenanceChurn()}
}

func findScenario(name string) *scenario {
	for _, s := range scenarios() {
		if s.name == name {
			return s
		}
	}
	return nil
}

// project is the scope value of virtual client i in this run.
func (e *env) project(i int) string { return fmt.Sprintf("%s%s-%d", e.o.projectPrefix, e.runID, i) }

// newSub returns a never-synced subscription to one scope value.
func (e *env) newSub(id, value string) *sub {
	sl, js := e.fx.scopes(value)
	return &sub{id: id, table: e.fx.table.Name, scopes: sl, scopeJSON: js, cursor: -1}
}

func (e *env) pullOpts() pullOptions {
	return pullOptions{limitCommits: int32(e.o.limitCommits), limitRows: int32(e.o.limitRows),
		maxPages: int32(e.o.maxPages), accept: e.o.accept}
}

// pullRound is one timed pull request.
func (e *env) pullRound(ctx context.Context, v *vu, subs []*sub, o pullOptions) (pullStats, error) {
	var st pullStats
	err := e.timed(ctx, "pull", func() (int, int, error) {
		var err error
		st, err = v.s.pull(ctx, subs, o)
		return st.bytes, st.changes + st.rows, err
	})
	return st, err
}

// bootstrap pulls subs from cursor -1 until no bootstrap is in progress,
// timed as one "bootstrap" operation; it returns the rows received.
func (e *env) bootstrap(ctx context.Context, v *vu, subs []*sub, o pullOptions) (int, error) {
	rows := 0
	err := e.timed(ctx, "bootstrap", func() (int, int, error) {
		bytes := 0
		for _, sb := range subs {
			sb.cursor, sb.state = -1, ssp2.Optional[string]{}
		}
		for range 100_000 {
			st, err := e.pullRound(ctx, v, subs, o)
			if err != nil {
				return bytes, rows, err
			}
			bytes += st.bytes
			rows += st.rows
			if !st.more {
				return bytes, rows, nil
			}
		}
		return bytes, rows, protoErr("loader.bootstrap_stuck", "bootstrap did not finish in 100000 pulls")
	})
	return rows, err
}

// push sends one commit of e.o.ops upserts to the client's own project.
func (e *env) pushRound(ctx context.Context, v *vu, project string, rows int) error {
	return e.timed(ctx, "push", func() (int, int, error) {
		ops := make([]ssp2.PushOperation, e.o.ops)
		for j := range ops {
			k := (v.n*int64(e.o.ops) + int64(j)) % int64(rows)
			id := project + "-r" + strconv.FormatInt(k, 10)
			v.vals = e.fx.row(v.vals, id, project, v.n)
			start := len(v.pay)
			var err error
			v.pay, err = e.fx.payload(v.pay, uint16(e.o.wire), v.vals)
			if err != nil {
				return 0, 0, err
			}
			ops[j] = ssp2.PushOperation{Table: e.fx.table.Name, RowID: id, Op: ssp2.OpUpsert, Payload: v.pay[start:]}
		}
		v.n++
		c := &ssp2.PushCommit{ClientCommitID: v.s.clientID + "-" + strconv.FormatInt(v.n, 10), Operations: ops}
		n, err := v.s.push(ctx, []*ssp2.PushCommit{c})
		v.pay = v.pay[:0]
		return n, len(ops), err
	})
}

// initOwn acquires the epoch and bootstraps the client's own project.
func initOwn(ctx context.Context, e *env, v *vu) error {
	if err := e.timed(ctx, "pull", func() (int, int, error) { return 0, 0, v.s.acquireEpoch(ctx) }); err != nil {
		return err
	}
	v.subs = []*sub{e.newSub("own", e.project(v.idx))}
	_, err := e.bootstrap(ctx, v, v.subs, e.pullOpts())
	return err
}

func pushPull() *scenario {
	return &scenario{
		name:  "push-pull",
		about: "each client owns one scope value (project) and alternates a push of --ops upserts and an incremental pull that must bring them back",
		kinds: []string{"push", "pull", "bootstrap"},
		init:  initOwn,
		step: func(ctx context.Context, e *env, v *vu) error {
			if err := e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient); err != nil {
				return err
			}
			var st pullStats
			err := e.timed(ctx, "pull", func() (int, int, error) {
				var err error
				st, err = v.s.pull(ctx, v.subs, e.pullOpts())
				if err == nil && st.changes < e.o.ops {
					err = protoErr("loader.missing_changes", "pull after a push of %d upserts brought %d changes", e.o.ops, st.changes)
				}
				return st.bytes, st.changes, err
			})
			return err
		},
	}
}

func bootstrapStorm() *scenario {
	return &scenario{
		name: "bootstrap-storm",
		about: "every client bootstraps the shared --storm-project (seed it first: syncd seed), over and over; " +
			"pages, inline and downloaded segments included; --dataset checks the row count",
		kinds: []string{"bootstrap", "pull", "segment"},
		init: func(ctx context.Context, e *env, v *vu) error {
			return e.timed(ctx, "pull", func() (int, int, error) { return 0, 0, v.s.acquireEpoch(ctx) })
		},
		step: func(ctx context.Context, e *env, v *vu) error {
			subs := []*sub{e.newSub("storm", e.o.stormProject)}
			o := e.pullOpts()
			rows, err := e.bootstrap(ctx, v, subs, o)
			if err != nil {
				return err
			}
			if e.o.dataset > 0 && rows != e.o.dataset {
				err := protoErr("loader.row_count", "bootstrap of %s brought %d rows, want %d", e.o.stormProject, rows, e.o.dataset)
				e.fail("bootstrap", err)
				return err
			}
			return nil
		},
	}
}

// catchUpState is the log the catch-up clients read.
type catchUpState struct {
	project         string
	fromSeq, maxSeq int64
	commits         int
}

func catchUp() *scenario {
	return &scenario{
		name: "catch-up",
		about: "a writer first pushes --dataset one-upsert commits to one project; then every client pulls them all " +
			"from the cursor before the first, page by page (--limit-commits changes per pull)",
		kinds: []string{"catch-up", "pull"},
		prepare: func(ctx context.Context, e *env) error {
			n := e.o.dataset
			if n <= 0 {
				n = 5000
			}
			w := &vu{idx: -1}
			w.s = &session{t: e.t, id: e.identity(0), wire: uint16(e.o.wire), clientID: "load-" + e.runID + "-writer", fx: e.fx}
			if err := w.s.acquireEpoch(ctx); err != nil {
				return err
			}
			cs := &catchUpState{project: e.o.projectPrefix + e.runID + "-catchup", commits: n}
			per := max(1, min(100, e.o.maxOps))
			for done := 0; done < n; {
				batch := min(per, n-done)
				commits := make([]*ssp2.PushCommit, batch)
				for j := range commits {
					i := int64(done + j)
					id := cs.project + "-r" + strconv.FormatInt(i%1000, 10)
					w.vals = e.fx.row(w.vals, id, cs.project, i)
					pay, err := e.fx.payload(nil, uint16(e.o.wire), w.vals)
					if err != nil {
						return err
					}
					commits[j] = &ssp2.PushCommit{ClientCommitID: "c" + strconv.FormatInt(i, 10),
						Operations: []ssp2.PushOperation{{Table: e.fx.table.Name, RowID: id, Op: ssp2.OpUpsert, Payload: pay}}}
				}
				m, err := w.s.pushSeqs(ctx, commits)
				if err != nil {
					return err
				}
				if cs.fromSeq == 0 {
					cs.fromSeq = m[0] - 1
				}
				cs.maxSeq = m[len(m)-1]
				done += batch
			}
			e.data["catchUpCommits"] = n
			e.data["catchUpSeqs"] = fmt.Sprintf("%d..%d", cs.fromSeq+1, cs.maxSeq)
			e.catchup = cs
			return nil
		},
		init: func(ctx context.Context, e *env, v *vu) error {
			return e.timed(ctx, "pull", func() (int, int, error) { return 0, 0, v.s.acquireEpoch(ctx) })
		},
		step: func(ctx context.Context, e *env, v *vu) error {
			cs := e.catchup
			sb := e.newSub("catchup", cs.project)
			sb.cursor = cs.fromSeq
			return e.timed(ctx, "catch-up", func() (int, int, error) {
				bytes, changes := 0, 0
				for sb.cursor < cs.maxSeq {
					st, err := e.pullRound(ctx, v, []*sub{sb}, e.pullOpts())
					if err != nil {
						return bytes, changes, err
					}
					bytes += st.bytes
					changes += st.changes
					if st.bootstrap || st.resets > 0 {
						return bytes, changes, protoErr("loader.unexpected_bootstrap", "catch-up answered with a bootstrap or reset")
					}
					if st.commits == 0 && sb.cursor < cs.maxSeq {
						return bytes, changes, protoErr("loader.catchup_stalled", "no commits at cursor %d below %d", sb.cursor, cs.maxSeq)
					}
				}
				if changes < cs.commits {
					return bytes, changes, protoErr("loader.missing_changes", "caught up with %d changes, want %d", changes, cs.commits)
				}
				return bytes, changes, nil
			})
		},
	}
}

func mixedSoak() *scenario {
	return &scenario{
		name: "mixed-soak",
		about: "reads and writes together for a long --duration: per step 25 % push, 70 % incremental pull, " +
			"5 % re-bootstrap of the client's project; watch serverMemory (--server-pid or --admin-url)",
		kinds: []string{"push", "pull", "bootstrap"},
		init:  initOwn,
		step: func(ctx context.Context, e *env, v *vu) error {
			switch r := v.rnd.IntN(100); {
			case r < 25:
				return e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient)
			case r < 95:
				_, err := e.pullRound(ctx, v, v.subs, e.pullOpts())
				return err
			default:
				_, err := e.bootstrap(ctx, v, v.subs, e.pullOpts())
				return err
			}
		},
	}
}

func maintenanceChurn() *scenario {
	return &scenario{
		name: "maintenance-churn",
		about: "pruning racing pushes: even clients push and pull their own project, odd clients re-read theirs " +
			"from cursor 0 and accept sync.cursor_expired resets (then re-bootstrap); run the server with a short " +
			"--prune-interval (the log is pruned past the newest --retention-keep-commits)",
		kinds: []string{"push", "pull", "bootstrap", "reset"},
		init:  initOwn,
		step: func(ctx context.Context, e *env, v *vu) error {
			if v.idx%2 == 0 {
				if err := e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient); err != nil {
					return err
				}
				_, err := e.pullRound(ctx, v, v.subs, e.pullOpts())
				return err
			}
			// A laggard: push to its own project, then read it from the
			// start of the log, which pruning may have passed.
			if err := e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient); err != nil {
				return err
			}
			v.subs[0].cursor, v.subs[0].state = 0, ssp2.Optional[string]{}
			o := e.pullOpts()
			o.allowReset = true
			st, err := e.pullRound(ctx, v, v.subs, o)
			if err != nil {
				return err
			}
			if st.resets > 0 {
				_ = e.timed(ctx, "reset", func() (int, int, error) { return 0, st.resets, nil })
				_, err = e.bootstrap(ctx, v, v.subs, e.pullOpts())
			}
			return err
		},
	}
}
