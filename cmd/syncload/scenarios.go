package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// scenarios is the registry, in help order.
func scenarios() []*scenario {
	return []*scenario{pushPull(), bootstrapStorm(), catchUp(), mixedSoak(), maintenanceChurn(), slowBodies(), reconnectStorm(), propagation(), engineCommit(), engineHTTP(), blobsScenario(), operationsScenario()}
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

// pullRound is one timed pull request; it checks the sections and
// returns the response and the client's counters for it.
func (e *env) pullRound(ctx context.Context, v *vu, allowReset bool) (*client.Result, client.Stats, int, error) {
	var res *client.Result
	var d client.Stats
	resets := 0
	err := e.timed(ctx, "pull", func() (int, int, error) {
		var err error
		res, err = v.c.Pull(ctx)
		d = v.delta()
		e.segments.Add(int64(d.SegmentDownloads))
		e.segmentBytes.Add(d.SegmentBytes)
		e.images.Add(int64(d.Images))
		if err == nil {
			resets, err = checkSections(res, allowReset)
		}
		return int(d.ResponseBodyBytes + d.SegmentBytes), d.Commits + int(d.BootstrapRows), err
	})
	return res, d, resets, err
}

// bootstrap (re)subscribes id to value from cursor -1 and pulls until no
// bootstrap is in progress, timed as one "bootstrap" operation; it returns
// the rows received.
func (e *env) bootstrap(ctx context.Context, v *vu, id, value string) (int, error) {
	rows := 0
	err := e.timed(ctx, "bootstrap", func() (int, int, error) {
		bytes := 0
		v.c.Subscribe(id, e.fx.table.Name, e.fx.scopes(value))
		for range 100_000 {
			_, d, _, err := e.pullRound(ctx, v, false)
			bytes += int(d.ResponseBodyBytes + d.SegmentBytes)
			rows += int(d.BootstrapRows)
			if err != nil {
				return bytes, rows, err
			}
			if v.c.Settled() {
				return bytes, rows, nil
			}
		}
		return bytes, rows, protoErr("loader.bootstrap_stuck", "bootstrap did not finish in 100000 pulls")
	})
	return rows, err
}

// pushRound pushes one commit of e.o.ops upserts to a project, cycling
// over rows row ids (blind writes: last writer wins).
func (e *env) pushRound(ctx context.Context, v *vu, project string, rows int) error {
	return e.timed(ctx, "push", func() (int, int, error) {
		ops := make([]ssp2.PushOperation, e.o.ops)
		for j := range ops {
			k := (v.n*int64(e.o.ops) + int64(j)) % int64(rows)
			id := project + "-r" + strconv.FormatInt(k, 10)
			op, err := v.c.Upsert(e.fx.table.Name, id, e.fx.row(id, project, v.n), -1)
			if err != nil {
				return 0, 0, err
			}
			ops[j] = op
		}
		v.n++
		v.c.Queue(ops...)
		res, err := v.c.Push(ctx)
		d := v.delta()
		if err == nil {
			var seqs []int64
			if seqs, err = checkPushes(res, 1); err == nil {
				v.lastSeq = seqs[0]
			}
		}
		return int(d.ResponseBodyBytes), len(ops), err
	})
}

// initOwn acquires the epoch and bootstraps the client's own project.
func initOwn(ctx context.Context, e *env, v *vu) error {
	if err := e.timed(ctx, "pull", func() (int, int, error) { return 0, 0, v.c.AcquireEpoch(ctx) }); err != nil {
		return err
	}
	_, err := e.bootstrap(ctx, v, "own", e.project(v.idx))
	return err
}

func initEpoch(ctx context.Context, e *env, v *vu) error {
	return e.timed(ctx, "pull", func() (int, int, error) { return 0, 0, v.c.AcquireEpoch(ctx) })
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
			res, _, _, err := e.pullRound(ctx, v, false)
			if err == nil && res.Sections["own"].Commits < 1 {
				err = protoErr("loader.missing_changes", "the pull after a push brought no commit")
				e.fail("pull", err)
			}
			return err
		},
	}
}

func bootstrapStorm() *scenario {
	return &scenario{
		name: "bootstrap-storm",
		about: "every client bootstraps the shared --storm-project (seed it first: syncd seed), over and over; " +
			"pages, inline and downloaded segments included; --dataset checks the row count",
		kinds: []string{"bootstrap", "pull"},
		init:  initEpoch,
		step: func(ctx context.Context, e *env, v *vu) error {
			rows, err := e.bootstrap(ctx, v, "storm", e.o.stormProject)
			if err != nil {
				return err
			}
			if n := len(v.c.Rows(e.fx.table.Name)); e.o.dataset > 0 && (rows != e.o.dataset || n != e.o.dataset) {
				err := protoErr("loader.row_count", "bootstrap of %s brought %d rows (replica %d), want %d", e.o.stormProject, rows, n, e.o.dataset)
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
			c, err := e.t.NewClient("load-"+e.runID+"-writer", e.baseURL(0), e.identity(0))
			if err != nil {
				return err
			}
			cs := &catchUpState{project: e.o.projectPrefix + e.runID + "-catchup", commits: n}
			per := max(1, min(100, e.o.maxOps))
			for done := 0; done < n; {
				batch := min(per, n-done)
				for j := range batch {
					i := int64(done + j)
					id := cs.project + "-r" + strconv.FormatInt(i%1000, 10)
					op, err := c.Upsert(e.fx.table.Name, id, e.fx.row(id, cs.project, i), -1)
					if err != nil {
						return err
					}
					c.Queue(op)
				}
				res, err := c.Push(ctx)
				if err != nil {
					return err
				}
				seqs, err := checkPushes(res, batch)
				if err != nil {
					return err
				}
				if done == 0 {
					// The cursor before the first commit (0 on a fresh log).
					cs.fromSeq = seqs[0] - 1
				}
				cs.maxSeq = seqs[len(seqs)-1]
				done += batch
			}
			e.data["catchUpCommits"] = n
			e.data["catchUpSeqs"] = fmt.Sprintf("%d..%d", cs.fromSeq+1, cs.maxSeq)
			e.catchup = cs
			return nil
		},
		init: initEpoch,
		step: func(ctx context.Context, e *env, v *vu) error {
			cs := e.catchup
			sub := v.c.Subscribe("catchup", e.fx.table.Name, e.fx.scopes(cs.project))
			sub.Cursor = cs.fromSeq
			return e.timed(ctx, "catch-up", func() (int, int, error) {
				bytes, commits := 0, 0
				for sub.Cursor < cs.maxSeq {
					res, d, _, err := e.pullRound(ctx, v, false)
					bytes += int(d.ResponseBodyBytes)
					if err != nil {
						return bytes, commits, err
					}
					sec := res.Sections["catchup"]
					commits += sec.Commits
					if sec.Bootstrap || sec.Status != ssp2.SubActive {
						return bytes, commits, protoErr("loader.unexpected_bootstrap", "catch-up answered with a bootstrap or a %v section", sec.Status)
					}
					if sec.Commits == 0 && sub.Cursor < cs.maxSeq {
						return bytes, commits, protoErr("loader.catchup_stalled", "no commits at cursor %d below %d", sub.Cursor, cs.maxSeq)
					}
				}
				if commits < cs.commits {
					return bytes, commits, protoErr("loader.missing_changes", "caught up with %d commits, want %d", commits, cs.commits)
				}
				return bytes, commits, nil
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
				_, _, _, err := e.pullRound(ctx, v, false)
				return err
			default:
				_, err := e.bootstrap(ctx, v, "own", e.project(v.idx))
				return err
			}
		},
	}
}

func maintenanceChurn() *scenario {
	return &scenario{
		name: "maintenance-churn",
		about: "pruning racing pushes: every client pushes to its own project; even clients pull incrementally, odd " +
			"clients re-read from cursor 0 and accept sync.cursor_expired resets (then re-bootstrap); run the server " +
			"with a short --prune-interval, --prune-to-active-floors-UNSAFE-for-tests and --client-record-refresh 0 (the normative floors keep " +
			"the newest 1000 commits and 14 days of active clients, so a short run prunes nothing), or run syncd prune " +
			"with that flag meanwhile",
		kinds: []string{"push", "pull", "bootstrap", "reset"},
		init:  initOwn,
		step: func(ctx context.Context, e *env, v *vu) error {
			if err := e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient); err != nil {
				return err
			}
			if v.idx%2 == 0 {
				_, _, _, err := e.pullRound(ctx, v, false)
				return err
			}
			// A laggard: read its project from the start of the log, which
			// pruning may have passed.
			sub := v.c.Subscribe("own", e.fx.table.Name, e.fx.scopes(e.project(v.idx)))
			sub.Cursor = 0
			_, _, resets, err := e.pullRound(ctx, v, true)
			if err != nil {
				return err
			}
			if resets > 0 {
				_ = e.timed(ctx, "reset", func() (int, int, error) { return 0, resets, nil })
				_, err = e.bootstrap(ctx, v, "own", e.project(v.idx))
			}
			return err
		},
	}
}
