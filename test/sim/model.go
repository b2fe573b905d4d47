package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
)

// The oracle: an independent, deliberately plain model of what SPEC §2,
// §3.4, §6.2 and §6.11 say a server does with a commit, written from the
// spec's text and sharing nothing with the server but the compiled
// schema and the row codec's value type. The runner feeds it every commit in the order the server
// committed them (the fault decorator sees each push transaction end)
// and compares everything the server says and stores with it.

// mop is one operation of a queued commit, as the simulated app meant it.
type mop struct {
	table string
	rowID string
	del   bool
	// vals is the sparse payload in column order (absent cells are the
	// zero Value).
	vals    []rowcodec.Value
	hasBase bool
	base    int64
}

// mrow is a current row.
type mrow struct {
	vals    []rowcodec.Value
	version int64
	// cv are the column versions (§2.2), in column order.
	cv []int64
}

func (r *mrow) clone() *mrow {
	return &mrow{vals: append([]rowcodec.Value(nil), r.vals...), version: r.version, cv: append([]int64(nil), r.cv...)}
}

// mchange is one change of an applied commit (§2.2).
type mchange struct {
	table, rowID string
	del          bool
	version      int64
	vals         []rowcodec.Value // the full row of an upsert
	ws           string           // the stored scope
}

// mcommit is one applied commit of the log.
type mcommit struct {
	seq                int64
	client, ccid, actr string
	changes            []mchange
}

// outcome is the §6.3 result the model expects for a commit.
type outcome struct {
	applied bool
	seq     int64
	// The terminating record of a rejection.
	opIndex       int
	code          string
	conflict      bool
	serverVersion int64
	conflictCols  []int
	serverRow     []rowcodec.Value
	// decidedAt is the request during which the server committed it: a
	// result in that request is applied, in any later one cached.
	decidedAt int
	changes   int
}

func (o *outcome) String() string {
	if o.applied {
		return fmt.Sprintf("applied@%d", o.seq)
	}
	if o.conflict {
		return fmt.Sprintf("conflict op%d v%d cols%v", o.opIndex, o.serverVersion, o.conflictCols)
	}
	return fmt.Sprintf("rejected op%d %s", o.opIndex, o.code)
}

type ckey struct{ client, ccid string }

type model struct {
	sch     *schema.Schema
	rows    map[string]map[string]*mrow
	tombs   map[string]map[string]int64
	seq     int64
	horizon int64
	log     []*mcommit // log[i] has seq i+1
	results map[ckey]*outcome
}

func newModel(sch *schema.Schema) *model {
	m := &model{sch: sch, rows: map[string]map[string]*mrow{}, tombs: map[string]map[string]int64{}, results: map[ckey]*outcome{}}
	for _, t := range sch.Tables {
		m.rows[t.Name] = map[string]*mrow{}
		m.tombs[t.Name] = map[string]int64{}
	}
	return m
}

// cand is a commit's candidate state over the model's rows.
type cand struct {
	m       *model
	rows    map[string]map[string]*mrow // nil entry: deleted in this commit
	cleared map[string]map[string]bool  // tombstones an upsert cleared
}

func (c *cand) get(table, id string) *mrow {
	if t, ok := c.rows[table]; ok {
		if r, ok := t[id]; ok {
			return r
		}
	}
	return c.m.rows[table][id]
}

func (c *cand) put(table, id string, r *mrow) {
	if c.rows[table] == nil {
		c.rows[table] = map[string]*mrow{}
	}
	c.rows[table][id] = r
	if r != nil {
		if c.cleared[table] == nil {
			c.cleared[table] = map[string]bool{}
		}
		c.cleared[table][id] = true
	}
}

// tombstoned: a live tombstone the commit has not cleared (tombstones of
// this commit's own deletes are written with its append, §2.2).
func (c *cand) tombstoned(table, id string) bool {
	if c.cleared[table][id] {
		return false
	}
	_, ok := c.m.tombs[table][id]
	return ok
}

// children are the rows of table whose column col equals parent, by id.
func (c *cand) children(table, col, parent string) []string {
	t := c.m.sch.Table(table)
	ci := t.ColumnIndex(col)
	seen := map[string]bool{}
	var out []string
	consider := func(id string, r *mrow) {
		if seen[id] {
			return
		}
		seen[id] = true
		if r == nil {
			return
		}
		if s, ok := rowcodec.ScopeString(r.vals[ci]); ok && s == parent {
			out = append(out, id)
		}
	}
	for id, r := range c.rows[table] {
		consider(id, r)
	}
	for id, r := range c.m.rows[table] {
		if _, over := c.rows[table][id]; !over {
			consider(id, r)
		}
	}
	sort.Strings(out)
	return out
}

type staged struct {
	op      int
	table   string
	id      string
	del     bool
	present []bool
	vals    []rowcodec.Value
}

func wsOf(t *schema.Table, vals []rowcodec.Value) (string, bool) {
	return rowcodec.ScopeString(vals[t.ColumnIndex("ws")])
}

// decide runs one commit of actor (allowed: the ws values granted at the
// time) against the model and returns its outcome and, when applied, the
// commit to append.
func (m *model) decide(allowed func(ws string) bool, ops []mop) (*outcome, *cand, []mchange) {
	c := &cand{m: m, rows: map[string]map[string]*mrow{}, cleared: map[string]map[string]bool{}}
	var changes []mchange
	var st []staged
	reject := func(i int, code string) (*outcome, *cand, []mchange) {
		return &outcome{opIndex: i, code: code}, nil, nil
	}
	for i, op := range ops {
		t := m.sch.Table(op.table)
		if op.del {
			stored := c.get(op.table, op.rowID)
			if stored == nil {
				continue // §6.2: applied, no change, no authorization
			}
			ws, _ := wsOf(t, stored.vals)
			if !allowed(ws) {
				return reject(i, "sync.forbidden")
			}
			c.put(op.table, op.rowID, nil)
			changes = append(changes, mchange{table: op.table, rowID: op.rowID, del: true, ws: ws})
			st = append(st, staged{op: i, table: op.table, id: op.rowID, del: true})
			continue
		}
		n := len(t.Columns)
		present := make([]bool, n)
		for ci, v := range op.vals {
			present[ci] = !v.IsAbsent()
		}
		stored := c.get(op.table, op.rowID)
		payloadAllowed := func() bool {
			ws, ok := wsOf(t, op.vals)
			return ok && allowed(ws)
		}
		var next *mrow
		if stored != nil {
			ws, _ := wsOf(t, stored.vals)
			if !allowed(ws) { // §3.4: the stored row authorizes, never the payload
				return reject(i, "sync.forbidden")
			}
			wsc := t.ColumnIndex("ws")
			if present[wsc] && !op.vals[wsc].Equal(stored.vals[wsc]) { // §3.4 rule 5
				return reject(i, "sync.invalid_request")
			}
			if op.hasBase {
				if op.base > stored.version {
					return reject(i, "sync.invalid_request")
				}
				var cols []int
				for ci := range n {
					if !present[ci] || ci == t.PKIndex || t.Columns[ci].Type == schema.TypeCRDT {
						continue
					}
					if op.base == 0 || stored.cv[ci] > op.base {
						cols = append(cols, ci)
					}
				}
				if op.base == 0 || len(cols) > 0 {
					return &outcome{opIndex: i, code: "sync.version_conflict", conflict: true, serverVersion: stored.version,
						conflictCols: cols, serverRow: append([]rowcodec.Value(nil), stored.vals...)}, nil, nil
				}
			}
			next = stored.clone()
			next.version++
			for ci := range n {
				if !present[ci] {
					continue
				}
				next.vals[ci] = mergeCell(t.Columns[ci], stored.vals[ci], op.vals[ci])
				if ci != t.PKIndex {
					next.cv[ci] = next.version
				}
			}
		} else {
			switch {
			case op.hasBase && op.base > 0:
				if !payloadAllowed() {
					return reject(i, "sync.forbidden")
				}
				return reject(i, "sync.row_missing")
			case !op.hasBase && c.tombstoned(op.table, op.rowID):
				return reject(i, "sync.row_deleted") // a delete beats an unversioned upsert
			}
			for ci := range n {
				if !present[ci] {
					return reject(i, "sync.row_missing") // a partial payload names an update
				}
			}
			if !payloadAllowed() {
				return reject(i, "sync.forbidden")
			}
			next = &mrow{vals: make([]rowcodec.Value, n), version: 1, cv: make([]int64, n)}
			for ci := range n {
				next.vals[ci] = mergeCell(t.Columns[ci], rowcodec.Null(), op.vals[ci])
				next.cv[ci] = 1
			}
		}
		c.put(op.table, op.rowID, next)
		ws, _ := wsOf(t, next.vals)
		changes = append(changes, mchange{table: op.table, rowID: op.rowID, version: next.version, vals: next.vals, ws: ws})
		st = append(st, staged{op: i, table: op.table, id: op.rowID, present: present, vals: next.vals})
	}
	// §6.11: references, once per commit, over the candidate state.
	for _, s := range st {
		if s.del || c.get(s.table, s.id) == nil {
			continue
		}
		t := m.sch.Table(s.table)
		for _, ref := range t.References {
			ci := t.ColumnIndex(ref.Column)
			if !s.present[ci] || s.vals[ci].IsNull() {
				continue
			}
			pid, _ := rowcodec.ScopeString(s.vals[ci])
			if c.get(ref.ParentTable, pid) == nil {
				return reject(s.op, "sync.reference_violation")
			}
		}
	}
	type queued struct {
		origin      int
		table, pkey string
	}
	var queue []queued
	visited := map[[2]string]bool{}
	for _, s := range st {
		if s.del {
			queue = append(queue, queued{origin: s.op, table: s.table, pkey: s.id})
			visited[[2]string{s.table, s.id}] = true
		}
	}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, ct := range m.sch.Tables {
			for _, ref := range ct.References {
				if ref.ParentTable != q.table {
					continue
				}
				kids := c.children(ct.Name, ref.Column, q.pkey)
				if len(kids) == 0 {
					continue
				}
				switch ref.OnDelete {
				case schema.OnDeleteCascade:
					for _, id := range kids {
						if visited[[2]string{ct.Name, id}] {
							continue
						}
						visited[[2]string{ct.Name, id}] = true
						r := c.get(ct.Name, id)
						ws, _ := wsOf(ct, r.vals)
						c.put(ct.Name, id, nil)
						changes = append(changes, mchange{table: ct.Name, rowID: id, del: true, ws: ws})
						queue = append(queue, queued{origin: q.origin, table: ct.Name, pkey: id})
					}
				case schema.OnDeleteSetNull:
					for _, id := range kids {
						next := c.get(ct.Name, id).clone()
						next.version++
						ci := ct.ColumnIndex(ref.Column)
						next.vals[ci] = rowcodec.Null()
						next.cv[ci] = next.version
						c.put(ct.Name, id, next)
						ws, _ := wsOf(ct, next.vals)
						changes = append(changes, mchange{table: ct.Name, rowID: id, version: next.version, vals: next.vals, ws: ws})
					}
				default:
					return reject(q.origin, "sync.reference_violation")
				}
			}
		}
	}
	return &outcome{applied: true, changes: len(changes)}, c, changes
}

// mergeCell is the value an upsert leaves in a present column: the
// payload's, or for a crdt column merge(stored, incoming) (§5.10.3; a
// NULL payload clears it).
func mergeCell(col schema.Column, stored, incoming rowcodec.Value) rowcodec.Value {
	if col.Type != schema.TypeCRDT || incoming.IsNull() {
		return incoming
	}
	var prev []string
	if !stored.IsNull() && !stored.IsAbsent() {
		prev, _ = parseSet(stored.Raw())
	}
	in, _ := parseSet(incoming.Raw())
	return rowcodec.CRDT([]byte(formatSet(unionSet(prev, in))))
}

// commit appends an applied commit: rows, tombstones (cleared by its
// upserts, written for its deletes, cascades included) and the log.
func (m *model) commit(c *cand, changes []mchange, client, ccid, actor string) int64 {
	m.seq++
	for table, ids := range c.cleared {
		for id := range ids {
			delete(m.tombs[table], id)
		}
	}
	for table, rows := range c.rows {
		for id, r := range rows {
			if r == nil {
				delete(m.rows[table], id)
			} else {
				m.rows[table][id] = r
			}
		}
	}
	for _, ch := range changes {
		if ch.del {
			m.tombs[ch.table][ch.rowID] = m.seq
		}
	}
	m.log = append(m.log, &mcommit{seq: m.seq, client: client, ccid: ccid, actr: actor, changes: changes})
	return m.seq
}

// prune raises the horizon; tombstones at or below it go (§4.6).
func (m *model) prune(horizon int64) {
	if horizon <= m.horizon {
		return
	}
	m.horizon = horizon
	for _, t := range m.tombs {
		for id, s := range t {
			if s <= horizon {
				delete(t, id)
			}
		}
	}
}

// window returns the model's commits in (after, through] with their
// changes in the ws values of effective, dropping commits left empty (§4.5).
func (m *model) window(table string, effective map[string]bool, after, through int64) []*mcommit {
	var out []*mcommit
	for s := after + 1; s <= through && s <= m.seq; s++ {
		if s < 1 {
			continue
		}
		mc := m.log[s-1]
		var chs []mchange
		for _, ch := range mc.changes {
			if ch.table == table && effective[ch.ws] {
				chs = append(chs, ch)
			}
		}
		if len(chs) > 0 {
			out = append(out, &mcommit{seq: mc.seq, client: mc.client, ccid: mc.ccid, actr: mc.actr, changes: chs})
		}
	}
	return out
}

// render prints a row's cells for failure messages.
func render(t *schema.Table, vals []rowcodec.Value) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Columns[i].Name)
		b.WriteByte('=')
		b.WriteString(cell(v))
	}
	b.WriteByte('}')
	return b.String()
}

func cell(v rowcodec.Value) string {
	switch v.Kind() {
	case rowcodec.KindAbsent:
		return "-"
	case rowcodec.KindNull:
		return "null"
	case rowcodec.KindInteger:
		return strconv.FormatInt(v.Int(), 10)
	}
	return strconv.Quote(v.Text())
}
