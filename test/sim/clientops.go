package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// rowsPerTable is the row id pool of one table in one workspace: small,
// so clients collide (conflicts, deletes racing updates, recreations).
const rowsPerTable = 6

func rowID(ws, table string, n int) string { return ws + "." + table[:1] + strconv.Itoa(n) }

// write queues a commit of one to three operations in the client's outbox.
func (r *runner) write(sc *simClient) {
	n := 1
	switch x := r.rng.IntN(20); {
	case x >= 17:
		n = 3
	case x >= 12:
		n = 2
	}
	var ops []mop
	var wire []ssp2.PushOperation
	for range n {
		op := r.genOp(sc)
		pop, err := r.wireOp(sc, op)
		if err != nil {
			r.failf("infra", "encode operation: %v", err)
			return
		}
		ops = append(ops, op)
		wire = append(wire, pop)
	}
	r.queue(sc, ops, wire)
}

func (r *runner) queue(sc *simClient, ops []mop, wire []ssp2.PushOperation) {
	sc.next++
	ccid := sc.id + "-" + strconv.Itoa(sc.next)
	sc.intents[ccid] = ops
	r.stats.Operations += len(ops)
	sc.c.QueueWithID(ccid, wire...)
	r.event("%s queues %s: %s", sc.id, ccid, describeOps(r.sch, ops))
}

func describeOps(sch *schema.Schema, ops []mop) string {
	out := ""
	for i, op := range ops {
		if i > 0 {
			out += "; "
		}
		if op.del {
			out += "delete " + op.table + "/" + op.rowID
			continue
		}
		base := "-"
		if op.hasBase {
			base = strconv.FormatInt(op.base, 10)
		}
		out += fmt.Sprintf("upsert %s/%s base=%s %s", op.table, op.rowID, base, render(sch.Table(op.table), op.vals))
	}
	return out
}

func (r *runner) wireOp(sc *simClient, op mop) (ssp2.PushOperation, error) {
	base := int64(-1)
	if op.hasBase {
		base = op.base
	}
	if op.del {
		return sc.c.Delete(op.table, op.rowID, base), nil
	}
	t := r.sch.Table(op.table)
	cols := map[string]rowcodec.Value{}
	for i, v := range op.vals {
		if !v.IsAbsent() {
			cols[t.Columns[i].Name] = v
		}
	}
	return sc.c.Upsert(op.table, op.rowID, cols, base)
}

// genOp makes one operation the way an app would: mostly on rows of its
// granted workspaces as its replica shows them, sometimes stale, blind,
// out of its grant, or moving a row across workspaces.
func (r *runner) genOp(sc *simClient) mop {
	rng := r.rng
	ws := r.ws[rng.IntN(len(r.ws))]
	if g := sortedKeys(r.grants[sc.actor]); len(g) > 0 && rng.IntN(10) < 9 {
		ws = g[rng.IntN(len(g))]
	}
	var table string
	switch x := rng.IntN(20); {
	case x < 5:
		table = "folders"
	case x < 13:
		table = "docs"
	case x < 17:
		table = "notes"
	default:
		table = "pins"
	}
	t := r.sch.Table(table)
	kind := rng.IntN(20)
	id := rowID(ws, table, rng.IntN(rowsPerTable))
	if held := sc.c.RowIDs(table); kind >= 6 && len(held) > 0 && rng.IntN(10) < 7 {
		id = held[rng.IntN(len(held))] // most updates and deletes target a row the replica shows
		if v, _, ok := sc.c.Get(table, id); ok {
			if s, ok := rowcodec.ScopeString(v["ws"]); ok {
				ws = s
			}
		}
	}
	local, version, held := sc.c.Get(table, id)
	if !held && kind >= 6 && kind < 14 && rng.IntN(10) < 7 {
		kind = 0 // a row the replica lacks is mostly inserted, not updated
	}
	op := mop{table: table, rowID: id, vals: make([]rowcodec.Value, len(t.Columns))}
	switch x := kind; {
	case x < 6: // a full row: an insert, or a blind overwrite
		for i, col := range t.Columns {
			op.vals[i] = r.genValue(sc, col, ws, id)
		}
		switch {
		case rng.IntN(4) == 0:
			op.hasBase, op.base = true, 0 // explicit recreate (§6.2)
		case held && rng.IntN(2) == 0:
			op.hasBase, op.base = true, version
		}
	case x < 14: // a sparse update
		op.vals[t.PKIndex] = rowcodec.String(id)
		for i, col := range t.Columns {
			if i == t.PKIndex || col.Name == "ws" {
				continue
			}
			if rng.IntN(3) == 0 {
				op.vals[i] = r.genValue(sc, col, ws, id)
			}
		}
		if table == "docs" && rng.IntN(3) == 0 {
			op.vals[t.ColumnIndex("tags")] = r.genValue(sc, t.Columns[t.ColumnIndex("tags")], ws, id)
		}
		if rng.IntN(4) == 0 { // the scope column, unchanged: a no-op (§3.4 rule 5)
			op.vals[t.ColumnIndex("ws")] = rowcodec.String(ws)
			if held {
				if s, ok := rowcodec.ScopeString(local["ws"]); ok {
					op.vals[t.ColumnIndex("ws")] = rowcodec.String(s)
				}
			}
		}
		switch y := rng.IntN(20); {
		case held && y < 10:
			op.hasBase, op.base = true, version
		case held && y < 14:
			op.hasBase, op.base = true, max(version-1-int64(rng.IntN(2)), 1) // stale
		case y == 14:
			op.hasBase, op.base = true, version+3 // a version the server never issued
		case y < 18:
		default:
			op.hasBase, op.base = true, 1+int64(rng.IntN(3))
		}
	case x < 17:
		op.del = true
		op.vals = nil
		if held && rng.IntN(2) == 0 {
			op.hasBase, op.base = true, version
		}
	case x < 18: // moving the row to another workspace (refused on update)
		op.vals[t.PKIndex] = rowcodec.String(id)
		op.vals[t.ColumnIndex("ws")] = rowcodec.String(r.ws[(indexOf(r.ws, ws)+1)%len(r.ws)])
		if held {
			op.hasBase, op.base = true, version
		}
	default: // only the reference column, when the table has one
		op.vals[t.PKIndex] = rowcodec.String(id)
		for _, ref := range t.References {
			i := t.ColumnIndex(ref.Column)
			op.vals[i] = r.genValue(sc, t.Columns[i], ws, id)
		}
		if held && rng.IntN(2) == 0 {
			op.hasBase, op.base = true, version
		}
	}
	return op
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

var tokens = []string{"x", "y", "z", "q"}

func (r *runner) genValue(sc *simClient, col schema.Column, ws, id string) rowcodec.Value {
	rng := r.rng
	if col.Nullable && rng.IntN(5) == 0 {
		return rowcodec.Null()
	}
	switch col.Name {
	case "id":
		return rowcodec.String(id)
	case "ws":
		return rowcodec.String(ws)
	case "folder_id":
		return rowcodec.String(r.parentID(sc, "folders", ws))
	case "doc_id":
		return rowcodec.String(r.parentID(sc, "docs", ws))
	}
	switch col.Type {
	case schema.TypeInteger:
		return rowcodec.Int(int64(rng.IntN(100)))
	case schema.TypeCRDT:
		n := 1 + rng.IntN(2)
		var set []string
		for range n {
			set = append(set, tokens[rng.IntN(len(tokens))])
		}
		return rowcodec.CRDT([]byte(formatSet(unionSet(nil, set))))
	}
	return rowcodec.String(col.Name[:1] + strconv.Itoa(rng.IntN(1000)))
}

// parentID names a row to reference: mostly one of the workspace the
// replica shows, else any of the pool (perhaps missing).
func (r *runner) parentID(sc *simClient, table, ws string) string {
	var held []string
	for _, id := range sc.c.RowIDs(table) {
		if v, _, ok := sc.c.Get(table, id); ok {
			if s, _ := rowcodec.ScopeString(v["ws"]); s == ws {
				held = append(held, id)
			}
		}
	}
	if len(held) > 0 && r.rng.IntN(10) < 8 {
		return held[r.rng.IntN(len(held))]
	}
	return rowID(ws, table, r.rng.IntN(rowsPerTable))
}

// reqSub is a subscription as a request carried it.
type reqSub struct {
	cursor  int64
	resumed bool
}

// sync runs one request of an online client (push-only or push and
// pull) and checks what came back.
func (r *runner) sync(ctx context.Context, sc *simClient, pushOnly bool) (*client.Result, error) {
	if pushOnly && len(sc.c.Pending()) == 0 {
		r.setNet(netOK)
		return nil, nil
	}
	before := map[string]reqSub{}
	for id := range sc.subs {
		if s := sc.c.Subscription(id); s != nil {
			before[id] = reqSub{cursor: s.Cursor, resumed: s.BootstrapState != ""}
		}
	}
	r.reqNo++
	r.stats.Requests++
	var res *client.Result
	var err error
	if pushOnly {
		res, err = sc.c.Push(ctx)
	} else {
		res, err = sc.c.Sync(ctx)
	}
	r.setNet(netOK)
	what := "sync"
	if pushOnly {
		what = "push"
	}
	r.event("%s %s: %s", sc.id, what, errString(err))
	if err != nil {
		r.stats.LostRequests++
	}
	if res != nil {
		r.checkPushes(sc, res)
	}
	if err == nil && res != nil && !pushOnly {
		r.checkSections(sc, res, before)
		r.checkHeld(sc)
	}
	return res, err
}

// checkPushes compares every PUSH_RESULT with the model's outcome of the
// commit (§6.3): applied in the request that committed it, cached with
// the same seq in any later one; a rejection replays as itself.
func (r *runner) checkPushes(sc *simClient, res *client.Result) {
	for _, pr := range res.Pushes {
		ccid := pr.ClientCommitID
		out := r.model.results[ckey{sc.id, ccid}]
		if out == nil {
			r.failf("result-without-commit", "%s/%s answered %v, but no transaction committed it", sc.id, ccid, pr.Status)
			continue
		}
		if out.decidedAt != r.reqNo {
			r.stats.Replays++
		}
		r.event("%s result %s: status %d seq %d", sc.id, ccid, pr.Status, pr.CommitSeq)
		if out.applied {
			want := ssp2.PushApplied
			if out.decidedAt != r.reqNo {
				want = ssp2.PushCached
			}
			if pr.Status != want || pr.CommitSeq != out.seq || len(pr.Results) != len(sc.intents[ccid]) {
				r.failf("result-mismatch", "%s/%s: status %d seq %d (%d records), model %s (want status %d)", sc.id, ccid, pr.Status, pr.CommitSeq, len(pr.Results), out, want)
				continue
			}
			if prev, ok := sc.acked[ccid]; ok && prev != pr.CommitSeq {
				r.failf("acked-twice", "%s/%s acknowledged at seq %d, then at %d", sc.id, ccid, prev, pr.CommitSeq)
			}
			sc.acked[ccid] = pr.CommitSeq
			continue
		}
		if pr.Status != ssp2.PushRejected || len(pr.Results) != 1 {
			r.failf("result-mismatch", "%s/%s: status %d with %d records, model %s", sc.id, ccid, pr.Status, len(pr.Results), out)
			continue
		}
		rec := pr.Results[0]
		if int(rec.OpIndex) != out.opIndex || rec.Code != out.code || (rec.Status == ssp2.OpConflict) != out.conflict {
			r.failf("result-mismatch", "%s/%s: op %d %s (status %d), model %s", sc.id, ccid, rec.OpIndex, rec.Code, rec.Status, out)
			continue
		}
		if out.conflict {
			r.checkConflict(sc, ccid, rec, out)
		}
	}
}

// checkConflict compares a conflict record with §6.2's column evidence and
// applies the app's policy: keep the server's row, or keep its own write
// with the conflict's version as base (§6.5).
func (r *runner) checkConflict(sc *simClient, ccid string, rec ssp2.OpResult, out *outcome) {
	op := sc.intents[ccid][out.opIndex]
	t := r.sch.Table(op.table)
	want := make([]byte, (len(t.Columns)+7)/8)
	for _, c := range out.conflictCols {
		want[c/8] |= 1 << (c % 8)
	}
	if rec.ServerVersion != out.serverVersion || string(rec.ConflictColumns) != string(want) {
		r.failf("conflict-mismatch", "%s/%s: conflict at v%d columns %08b, model v%d columns %v", sc.id, ccid, rec.ServerVersion, rec.ConflictColumns, out.serverVersion, out.conflictCols)
		return
	}
	vals, err := r.codecs[op.table].DecodeRow(rec.ServerRow, nil)
	if err != nil || !sameVals(vals, out.serverRow) {
		r.failf("conflict-mismatch", "%s/%s: conflict row %s, model %s (%v)", sc.id, ccid, render(t, vals), render(t, out.serverRow), err)
		return
	}
	if r.rng.IntN(2) == 0 {
		return // keep the server's row
	}
	again := op
	again.hasBase, again.base = true, rec.ServerVersion
	pop, err := r.wireOp(sc, again)
	if err != nil {
		r.failf("infra", "encode operation: %v", err)
		return
	}
	r.queue(sc, []mop{again}, []ssp2.PushOperation{pop})
}

func sameVals(a, b []rowcodec.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// section is one subscription section of a response, as sent.
type section struct {
	start   *ssp2.SubStart
	commits []*ssp2.Commit
	end     *ssp2.SubEnd
	pages   int
}

func sections(m *ssp2.Message) []*section {
	var out []*section
	var cur *section
	for _, f := range m.Frames {
		switch f := f.(type) {
		case *ssp2.SubStart:
			cur = &section{start: f}
		case *ssp2.Commit:
			if cur != nil {
				cur.commits = append(cur.commits, f)
			}
		case *ssp2.SegmentInline, *ssp2.SegmentRef:
			if cur != nil {
				cur.pages++
			}
		case *ssp2.SubEnd:
			if cur != nil {
				cur.end = f
				out = append(out, cur)
				cur = nil
			}
		}
	}
	return out
}

// checkSections checks every section of a pull: a revocation only without
// the grant (§3.2), a reset only past the horizon or for a far-behind
// window with a delete (§4.6, §8.4), an active section only with the
// grant and exactly its effective scope, and an incremental one holding
// exactly the model's commits of its window, its cursor never moving back.
func (r *runner) checkSections(sc *simClient, res *client.Result, before map[string]reqSub) {
	var revoked []string
	for _, s := range sections(res.Message) {
		id := s.start.ID
		key, ok := sc.subs[id]
		if !ok {
			r.failf("unknown-section", "section for %q, not subscribed", id)
			continue
		}
		rq := before[id]
		granted := r.granted(sc.actor, key.ws)
		switch s.start.Status {
		case ssp2.SubRevoked:
			r.stats.Revoked++
			if granted {
				r.failf("revoked-while-granted", "%s: %s revoked while %s holds %s", sc.id, id, sc.actor, key.ws)
			}
			revoked = append(revoked, id)
		case ssp2.SubReset:
			r.stats.Resets++
			if s.start.ReasonCode == "sync.cursor_expired" {
				r.stats.CursorExpired++
			}
			if rq.cursor < 0 || rq.resumed || !(rq.cursor < r.model.horizon || r.catchUpReset(key, rq.cursor)) {
				r.failf("reset-without-cause", "%s: %s reset (%s) at cursor %d (resumed %v), horizon %d", sc.id, id, s.start.ReasonCode, rq.cursor, rq.resumed, r.model.horizon)
			}
			r.event("%s %s reset at %d", sc.id, id, rq.cursor)
		case ssp2.SubActive:
			eff := s.start.EffectiveScopes.Map()
			if !granted {
				r.failf("active-without-grant", "%s: %s active but %s does not hold %s", sc.id, id, sc.actor, key.ws)
			}
			if len(eff) != 1 || len(eff["ws"]) != 1 || eff["ws"][0] != key.ws {
				r.failf("effective-mismatch", "%s: %s effective %v", sc.id, id, eff)
			}
			if s.start.Bootstrap {
				r.stats.Bootstraps++
				continue
			}
			if rq.cursor < 0 || rq.resumed {
				r.failf("incremental-without-cursor", "%s: %s incremental from cursor %d (resumed %v)", sc.id, id, rq.cursor, rq.resumed)
				continue
			}
			if s.end.NextCursor < rq.cursor {
				r.failf("cursor-backwards", "%s: %s cursor %d -> %d", sc.id, id, rq.cursor, s.end.NextCursor)
			}
			r.checkWindow(sc, id, key, rq.cursor, s)
		}
	}
	for _, id := range revoked {
		r.unsubscribe(sc, id) // §3.3: stop pulling it
	}
}

// catchUpReset: §8.4 may answer a far-behind window holding a matching
// delete with a reset.
func (r *runner) catchUpReset(key subKey, cursor int64) bool {
	n, del := 0, false
	for _, c := range r.model.window(key.table, map[string]bool{key.ws: true}, cursor, r.model.seq) {
		for _, ch := range c.changes {
			n++
			del = del || ch.del
		}
	}
	return n > catchUpChanges && del
}

// checkWindow compares an incremental section with the model's window
// (cursor, nextCursor]: the same commits, the same changes (§4.5).
func (r *runner) checkWindow(sc *simClient, id string, key subKey, cursor int64, s *section) {
	want := r.model.window(key.table, map[string]bool{key.ws: true}, cursor, s.end.NextCursor)
	got := s.commits
	if len(got) != len(want) {
		r.failf("window-mismatch", "%s: %s window (%d, %d]: %d commits %v, model %d %v", sc.id, id, cursor, s.end.NextCursor, len(got), seqsOf(got), len(want), mseqs(want))
		return
	}
	for i, c := range got {
		w := want[i]
		if c.CommitSeq != w.seq || len(c.Changes) != len(w.changes) {
			r.failf("window-mismatch", "%s: %s commit %d (%d changes), model %d (%d changes)", sc.id, id, c.CommitSeq, len(c.Changes), w.seq, len(w.changes))
			return
		}
		for j, ch := range c.Changes {
			if msg := r.sameChange(c.Tables[ch.TableIndex], ch, w.changes[j]); msg != "" {
				r.failf("window-mismatch", "%s: %s commit %d change %d: %s", sc.id, id, c.CommitSeq, j, msg)
				return
			}
		}
	}
}

func (r *runner) sameChange(table string, ch ssp2.Change, w mchange) string {
	if table != w.table || ch.RowID != w.rowID || (ch.Op == ssp2.OpDelete) != w.del {
		return fmt.Sprintf("%s %s/%s op %d, model %s/%s delete=%v", "change", table, ch.RowID, ch.Op, w.table, w.rowID, w.del)
	}
	if ws, _ := ch.Scopes.Get("ws"); ws != w.ws {
		return fmt.Sprintf("%s/%s scope %q, model %q", table, ch.RowID, ws, w.ws)
	}
	if w.del {
		return ""
	}
	vals, err := r.codecs[table].DecodeRow(ch.Row, nil)
	if err != nil || ch.RowVersion != w.version || !sameVals(vals, w.vals) {
		t := r.sch.Table(table)
		return fmt.Sprintf("%s/%s v%d %s, model v%d %s (%v)", table, ch.RowID, ch.RowVersion, render(t, vals), w.version, render(t, w.vals), err)
	}
	return ""
}

func seqsOf(cs []*ssp2.Commit) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.CommitSeq
	}
	return out
}

func mseqs(cs []*mcommit) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.seq
	}
	return out
}

// checkHeld: after a pull answered whole, a replica holds no row of a
// workspace its actor is not granted (§3.3: a revocation purges).
func (r *runner) checkHeld(sc *simClient) {
	for _, table := range tableNames {
		for _, id := range sc.c.RowIDs(table) {
			vals, _, ok := sc.c.Get(table, id)
			if !ok {
				continue
			}
			ws, _ := rowcodec.ScopeString(vals["ws"])
			if !r.granted(sc.actor, ws) {
				r.failf("row-outside-grant", "%s holds %s/%s of %s, which %s is not granted", sc.id, table, id, ws, sc.actor)
				return
			}
		}
	}
}

// served sees every 200 answer of POST /sync, delivered or not: what the
// server recorded for the client (§4.5) is what it answered, whether or
// not the client heard it.
func (r *runner) served(sc *simClient, reqBody, body []byte) {
	req, err := ssp2.Decode(reqBody)
	if err != nil {
		return
	}
	pulled := false
	for _, f := range req.Frames {
		if _, ok := f.(*ssp2.PullHeader); ok {
			pulled = true
		}
	}
	if !pulled {
		return
	}
	m, err := ssp2.Decode(body)
	if err != nil {
		r.failf("undecodable-response", "%s: %v", sc.id, err)
		return
	}
	for _, f := range m.Frames {
		if h, ok := f.(*ssp2.RespHeader); ok && h.ResetRequired {
			return // epoch acquisition: no client record
		}
	}
	have, cursor := false, sc.handed
	for _, s := range sections(m) {
		if s.start.Status != ssp2.SubActive {
			continue
		}
		if !have || s.end.NextCursor < cursor {
			cursor, have = s.end.NextCursor, true
		}
	}
	sc.handed, sc.handedAt, sc.hasHanded = cursor, r.clock.NowMs(), true
}

// modelRows returns a table's model rows in the given workspaces.
func (r *runner) modelRows(table string, ws map[string]bool) map[string]*mrow {
	t := r.sch.Table(table)
	out := map[string]*mrow{}
	for id, row := range r.model.rows[table] {
		if w, _ := wsOf(t, row.vals); ws == nil || ws[w] {
			out[id] = row
		}
	}
	return out
}

func sortedIDs[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
