package sim

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// settleRounds bounds a checkpoint's rounds over every online client;
// settlePulls one client's pulls in a round.
const (
	settleRounds = 8
	settlePulls  = 60
)

// checkpoint brings every online client to idle with no fault armed, then
// checks the server's log and rows against the model and every online
// replica against the server's rows of its subscriptions.
func (r *runner) checkpoint(ctx context.Context) {
	r.event("checkpoint")
	if !r.settle(ctx) {
		return
	}
	r.checkServer(ctx)
	for _, sc := range r.clients {
		if sc.online && r.failure == nil {
			r.checkConverged(sc)
		}
	}
}

// settle syncs every online client until a whole round pushed nothing and
// every client ended idle: each then pulled after the last push.
func (r *runner) settle(ctx context.Context) bool {
	r.fault = nil
	for round := 0; round < settleRounds; round++ {
		pushed := false
		for _, sc := range r.clients {
			if !sc.online {
				continue
			}
			for pull := 0; ; pull++ {
				if r.failure != nil {
					return false
				}
				if pull == settlePulls {
					r.failf("no-convergence", "%s not idle after %d pulls", sc.id, settlePulls)
					return false
				}
				pending := len(sc.c.Pending())
				pushed = pushed || pending > 0
				res, err := r.sync(ctx, sc, false)
				if err != nil {
					continue
				}
				if pending == 0 && len(sc.c.Pending()) == 0 && idle(sc.c, res) {
					break
				}
			}
		}
		if !pushed {
			return true
		}
	}
	r.failf("no-convergence", "clients still pushing after %d rounds", settleRounds)
	return false
}

func idle(c *client.Client, res *client.Result) bool {
	for _, sec := range res.Sections {
		if sec.Err != nil || sec.Commits > 0 || sec.InlineSegments > 0 || len(sec.SegmentRefs) > 0 || sec.BootstrapState != "" || sec.Status == ssp2.SubReset {
			return false
		}
	}
	return c.Settled()
}

// checkServer compares the server's log bounds, every retained commit and
// every current row with the model: each applied commit exactly once at
// its seq with its changes, rows value for value, version for version,
// column version for column version (§2.1, §2.2).
func (r *runner) checkServer(ctx context.Context) {
	st := r.srv.inner
	b, err := st.LogBounds(ctx, partition)
	if err != nil {
		r.failf("infra", "log bounds: %v", err)
		return
	}
	m := r.model
	if b.MaxSeq != m.seq || b.HorizonSeq != m.horizon {
		r.failf("log-mismatch", "server log (%d, %d], model (%d, %d]", b.HorizonSeq, b.MaxSeq, m.horizon, m.seq)
		return
	}
	for after := b.HorizonSeq; after < b.MaxSeq; {
		span, err := st.ReadCommitRange(ctx, partition, ports.CommitRange{AfterSeq: after, ThroughSeq: b.MaxSeq, LimitChanges: 1000})
		if err != nil {
			r.failf("infra", "read commit range: %v", err)
			return
		}
		if len(span.Commits) == 0 {
			r.failf("log-mismatch", "no commit after %d of a log through %d", after, b.MaxSeq)
			return
		}
		for _, c := range span.Commits {
			if c.Seq != after+1 {
				r.failf("log-mismatch", "log holds seq %d after %d: not dense", c.Seq, after)
				return
			}
			after = c.Seq
			w := m.log[c.Seq-1]
			if c.ClientID != w.client || c.ClientCommitID != w.ccid || c.ActorID != w.actr || len(c.Changes) != len(w.changes) {
				r.failf("log-mismatch", "seq %d is %s/%s by %s with %d changes, model %s/%s by %s with %d", c.Seq, c.ClientID, c.ClientCommitID, c.ActorID,
					len(c.Changes), w.client, w.ccid, w.actr, len(w.changes))
				return
			}
			for j, ch := range c.Changes {
				if msg := r.sameLogChange(ch, w.changes[j]); msg != "" {
					r.failf("log-mismatch", "seq %d change %d: %s", c.Seq, j, msg)
					return
				}
			}
		}
	}
	scan := st.(ports.TableScanner)
	for _, table := range tableNames {
		t := r.sch.Table(table)
		got := map[string]commit.Row{}
		for after := ""; ; {
			rows, err := scan.ScanTable(ctx, partition, ports.TableScan{Table: table, AfterRowID: after, Limit: 100})
			if err != nil {
				r.failf("infra", "scan %s: %v", table, err)
				return
			}
			for _, row := range rows {
				got[row.RowID] = row
			}
			if len(rows) < 100 {
				break
			}
			after = rows[len(rows)-1].RowID
		}
		want := m.rows[table]
		for _, id := range sortedIDs(want) {
			w := want[id]
			g, ok := got[id]
			if !ok {
				r.failf("rows-mismatch", "server lacks %s/%s v%d %s", table, id, w.version, render(t, w.vals))
				return
			}
			vals, err := r.codecs[table].DecodeRow(g.Payload, nil)
			if err != nil || g.Version != w.version || !sameVals(vals, w.vals) {
				r.failf("rows-mismatch", "server %s/%s v%d %s, model v%d %s", table, id, g.Version, render(t, vals), w.version, render(t, w.vals))
				return
			}
			cv, err := commit.ExpandColumnVersions(g.ColumnVersions, len(t.Columns), g.Version)
			if err != nil || fmt.Sprint(cv) != fmt.Sprint(w.cv) {
				r.failf("column-versions-mismatch", "server %s/%s column versions %v, model %v (%v)", table, id, cv, w.cv, err)
				return
			}
		}
		for _, id := range sortedIDs(got) {
			if _, ok := want[id]; !ok {
				r.failf("rows-mismatch", "server holds %s/%s v%d, the model does not", table, id, got[id].Version)
				return
			}
		}
	}
}

func (r *runner) sameLogChange(ch commit.Change, w mchange) string {
	if ch.Table != w.table || ch.RowID != w.rowID || (ch.Op == commit.OpDelete) != w.del || ch.Scopes["ws"] != w.ws {
		return fmt.Sprintf("%s/%s op %v ws %q, model %s/%s delete=%v ws %q", ch.Table, ch.RowID, ch.Op, ch.Scopes["ws"], w.table, w.rowID, w.del, w.ws)
	}
	if w.del {
		return ""
	}
	vals, err := r.codecs[ch.Table].DecodeRow(ch.Row, nil)
	if err != nil || ch.RowVersion != w.version || !sameVals(vals, w.vals) {
		t := r.sch.Table(ch.Table)
		return fmt.Sprintf("%s/%s v%d %s, model v%d %s", ch.Table, ch.RowID, ch.RowVersion, render(t, vals), w.version, render(t, w.vals))
	}
	return ""
}

// checkConverged: an idle replica holds exactly the model's rows of the
// workspaces it subscribes to, value for value, version for version, and
// no commit of its outbox is left without an outcome.
func (r *runner) checkConverged(sc *simClient) {
	if p := sc.c.Pending(); len(p) > 0 {
		r.failf("outbox-not-drained", "%s idle with pending %v", sc.id, p)
		return
	}
	subs := map[string]map[string]bool{}
	for _, k := range sc.subs {
		if subs[k.table] == nil {
			subs[k.table] = map[string]bool{}
		}
		subs[k.table][k.ws] = true
	}
	for _, table := range tableNames {
		want := map[string]*mrow{}
		if len(subs[table]) > 0 {
			want = r.modelRows(table, subs[table])
		}
		if msg := r.sameReplica(sc.c, table, want); msg != "" {
			r.failf("replica-diverged", "%s: %s", sc.id, msg)
			return
		}
	}
}

func (r *runner) sameReplica(c *client.Client, table string, want map[string]*mrow) string {
	t := r.sch.Table(table)
	got := c.Rows(table)
	for _, id := range sortedIDs(want) {
		w := want[id]
		g, ok := got[id]
		if !ok {
			return fmt.Sprintf("lacks %s/%s v%d %s", table, id, w.version, render(t, w.vals))
		}
		vals, err := r.codecs[table].DecodeRow(g.Payload, nil)
		if err != nil || g.Version != w.version || !sameVals(vals, w.vals) {
			return fmt.Sprintf("%s/%s v%d %s, server v%d %s", table, id, g.Version, render(t, vals), w.version, render(t, w.vals))
		}
	}
	for _, id := range sortedIDs(got) {
		if _, ok := want[id]; !ok {
			return fmt.Sprintf("holds %s/%s v%d, which is not the server's", table, id, got[id].Version)
		}
	}
	return ""
}

// final brings every client online and checks the end state, then has a
// fresh replica of every actor bootstrap everything it is granted and
// compares it with the model.
func (r *runner) final(ctx context.Context) {
	r.event("final check")
	for _, sc := range r.clients {
		sc.online = true
	}
	r.checkpoint(ctx)
	if r.failure != nil {
		return
	}
	for _, sc := range r.clients {
		for ccid := range sc.intents {
			if r.model.results[ckey{sc.id, ccid}] == nil {
				r.failf("commit-without-outcome", "%s/%s never reached an outcome", sc.id, ccid)
				return
			}
		}
	}
	for i, actor := range r.actors {
		fresh := &simClient{idx: len(r.clients) + i, id: "fresh-" + actor, actor: actor, online: true, handed: -1,
			subs: map[string]subKey{}, intents: map[string][]mop{}, acked: map[string]int64{}}
		c, err := client.New(client.Options{BaseURL: "http://sim", Schema: r.sch, ClientID: fresh.id,
			Header: http.Header{"X-Actor": []string{actor}}, HTTP: &http.Client{Transport: &transport{r: r, sc: fresh}},
			AcceptEncoding: "identity", LimitCommits: 8, LimitSnapshotRows: int32(3 + i)})
		if err != nil {
			r.failf("infra", "client: %v", err)
			return
		}
		fresh.c = c
		for _, w := range sortedKeys(r.grants[actor]) {
			for _, t := range tableNames {
				r.subscribe(fresh, t, w)
			}
		}
		r.event("fresh replica of %s", actor)
		for pull := 0; ; pull++ {
			if pull == settlePulls {
				r.failf("no-convergence", "fresh replica of %s not idle after %d pulls", actor, settlePulls)
				return
			}
			res, err := r.sync(ctx, fresh, false)
			if r.failure != nil {
				return
			}
			if err == nil && idle(c, res) {
				break
			}
		}
		r.checkConverged(fresh)
		if r.failure != nil {
			r.failure.Message = "fresh replica: " + r.failure.Message
			return
		}
	}
	r.event("done: seq %d horizon %d, %s", r.model.seq, r.model.horizon, strconv.Itoa(r.stats.Commits)+" commits")
}
