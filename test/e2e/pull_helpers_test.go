package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// pullSub is one subscription a test replica keeps.
type pullSub struct {
	id, table string
	scopes    map[string][]string
	cursor    int64
	token     string
	status    ssp2.SubStatus
	reason    string
	effective ssp2.ScopeLists
}

type replicaRow struct {
	version int64
	label   string // the row's name/title cell
}

// replica is a minimal SSP2 client: it sends push and pull requests with
// real bytes over HTTP and applies COMMIT and inline segment frames.
type replica struct {
	t        *testing.T
	s        *server
	c        call
	clientID string
	epoch    string
	hdr      ssp2.PullHeader
	subs     []*pullSub
	rows     map[string]map[string]replicaRow
	// download fetches SEGMENT_REF segments over GET /segments/{id}.
	download bool
	// segments counts the segment ids applied from references.
	segments map[string]int
	// cells holds every applied row's cells by table and row id.
	cells map[string]map[string]ssptest.Cols
}

// setCells records a row's cells.
func (r *replica) setCells(table, rowID string, c ssptest.Cols) {
	if r.cells == nil {
		r.cells = map[string]map[string]ssptest.Cols{}
	}
	if r.cells[table] == nil {
		r.cells[table] = map[string]ssptest.Cols{}
	}
	r.cells[table][rowID] = c
}

func newReplica(t *testing.T, s *server, c call, clientID string) *replica {
	r := &replica{t: t, s: s, c: c, clientID: clientID, rows: map[string]map[string]replicaRow{},
		hdr: ssp2.PullHeader{LimitCommits: 1000, LimitSnapshotRows: 1000, MaxSnapshotPages: 4, Accept: ssp2.AcceptInlineRows}}
	r.epoch = s.epoch(c)
	return r
}

func (r *replica) subscribe(id, table string, sc map[string][]string) *pullSub {
	p := &pullSub{id: id, table: table, scopes: sc, cursor: -1}
	r.subs = append(r.subs, p)
	return p
}

func (r *replica) request(commits ...*ssp2.PushCommit) []byte {
	m := &ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
		&ssp2.ReqHeader{ClientID: r.clientID, SchemaVersion: r.s.sch.Version, LogEpoch: ssp2.Some(r.epoch)}}}
	for _, c := range commits {
		m.Frames = append(m.Frames, c)
	}
	h := r.hdr
	m.Frames = append(m.Frames, &h)
	for _, p := range r.subs {
		f := &ssp2.Subscription{ID: p.id, Table: p.table, Scopes: ssp2.ScopeListsFromMap(p.scopes), Cursor: p.cursor}
		if p.token != "" {
			f.BootstrapState = ssp2.Some(p.token)
		}
		m.Frames = append(m.Frames, f)
	}
	b, err := ssp2.Encode(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// pull sends one request and applies the response.
func (r *replica) pull(commits ...*ssp2.PushCommit) ssptest.Resp {
	r.t.Helper()
	resp := r.fetch(commits...)
	r.apply(resp)
	return resp
}

// fetch sends one request without applying the response.
func (r *replica) fetch(commits ...*ssp2.PushCommit) ssptest.Resp {
	r.t.Helper()
	rep := r.s.post(r.c, r.request(commits...))
	if rep.status != 200 {
		r.t.Fatalf("pull: %d %s", rep.status, rep.body)
	}
	return ssptest.DecodeResponse(r.t, rep.body)
}

func (r *replica) sub(id string) *pullSub {
	for _, p := range r.subs {
		if p.id == id {
			return p
		}
	}
	r.t.Fatalf("response names unknown subscription %q", id)
	return nil
}

func (r *replica) table(name string) map[string]replicaRow {
	m := r.rows[name]
	if m == nil {
		m = map[string]replicaRow{}
		r.rows[name] = m
	}
	return m
}

func labelColumn(t *schema.Table) int {
	if i := t.ColumnIndex("name"); i >= 0 {
		return i
	}
	return t.ColumnIndex("title")
}

// apply applies a response the way a client does (§1.6, §5.6): COMMIT
// changes, inline segment rows (the first page of a fresh bootstrap clears
// the table), cursors and tokens on SUB_END.
func (r *replica) apply(resp ssptest.Resp) {
	r.t.Helper()
	var cur *pullSub
	firstPage := false
	for _, f := range resp.Msg.Frames {
		switch f := f.(type) {
		case *ssp2.SubStart:
			cur = r.sub(f.ID)
			cur.status, cur.reason, cur.effective = f.Status, f.ReasonCode, f.EffectiveScopes
			firstPage = f.Bootstrap && cur.token == ""
			if f.Status == ssp2.SubRevoked {
				r.rows[cur.table] = nil // purge
			}
		case *ssp2.Commit:
			for _, ch := range f.Changes {
				tname := f.Tables[ch.TableIndex]
				tbl := r.table(tname)
				if ch.Op == ssp2.OpDelete {
					delete(tbl, ch.RowID)
					delete(r.cells[tname], ch.RowID)
					continue
				}
				st := r.s.sch.Table(tname)
				vals := ssptest.DecodeRow(r.t, st, ch.Row)
				label, _ := rowcodec.ScopeString(vals[st.Columns[labelColumn(st)].Name])
				tbl[ch.RowID] = replicaRow{version: ch.RowVersion, label: label}
				r.setCells(tname, ch.RowID, vals)
			}
		case *ssp2.SegmentInline, *ssp2.SegmentRef:
			var payload []byte
			if in, ok := f.(*ssp2.SegmentInline); ok {
				payload = in.Payload
			} else {
				ref := f.(*ssp2.SegmentRef)
				if !r.download {
					r.t.Fatalf("SEGMENT_REF to a client that accepts inline rows only: %+v", ref)
				}
				payload = r.fetchSegment(cur, ref)
			}
			sr, err := rowcodec.NewSegmentReader(payload)
			if err != nil {
				r.t.Fatal(err)
			}
			st := r.s.sch.Table(sr.Header().Table)
			if err := sr.Header().CheckTable(st); err != nil {
				r.t.Fatal(err)
			}
			if firstPage {
				r.rows[st.Name] = nil
				delete(r.cells, st.Name)
				firstPage = false
			}
			tbl := r.table(st.Name)
			for {
				rows, err := sr.NextBlock()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					r.t.Fatal(err)
				}
				for _, row := range rows {
					id, _ := rowcodec.ScopeString(row.Values[st.PKIndex])
					label, _ := rowcodec.ScopeString(row.Values[labelColumn(st)])
					tbl[id] = replicaRow{version: row.ServerVersion, label: label}
					cells := ssptest.Cols{}
					for i, c := range st.Columns {
						cells[c.Name] = row.Values[i]
					}
					r.setCells(st.Name, id, cells)
				}
			}
		case *ssp2.SubEnd:
			cur.cursor = f.NextCursor
			cur.token = ""
			if f.BootstrapState.Present {
				cur.token = f.BootstrapState.Value
			}
			if cur.status != ssp2.SubActive {
				cur.token = ""
				if cur.status == ssp2.SubReset {
					cur.cursor = -1
				}
			}
			cur = nil
		}
	}
}

// fetchSegment downloads a referenced segment as the client of sub and
// checks its content address (§5.1).
func (r *replica) fetchSegment(sub *pullSub, ref *ssp2.SegmentRef) []byte {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(r.s.url, "/sync")+"/segments/"+ref.SegmentID, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	sc, _ := json.Marshal(sub.scopes)
	req.Header.Set("X-Syncular-Scopes", string(sc))
	req.Header.Set("X-Syncd-Actor", r.c.actor)
	req.Header.Set("X-Syncd-Partition", r.c.partition)
	if r.c.scopes != "" {
		req.Header.Set("X-Syncd-Scopes", r.c.scopes)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET segment: %d %s %v", resp.StatusCode, b, err)
	}
	if contentaddr.Of(b) != ref.SegmentID || int64(len(b)) != ref.ByteLength {
		r.t.Fatalf("segment bytes do not match %s", ref.SegmentID)
	}
	if r.segments == nil {
		r.segments = map[string]int{}
	}
	r.segments[ref.SegmentID]++
	return b
}

// seedCommits appends n commits of one project upsert each to partition
// through the storage port (fast seeding, not n HTTP round trips), in
// transactions of batch commits.
func seedCommits(t *testing.T, st ports.Storage, sch *schema.Schema, partition, owner string, n, batch int) {
	t.Helper()
	tbl := sch.Table("projects")
	ctx := context.Background()
	for done := 0; done < n; {
		k := min(batch, n-done)
		err := st.Push(ctx, partition, ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
			for i := 0; i < k; i++ {
				id := fmt.Sprintf("c-%06d", done+i)
				name := fmt.Sprintf("commit %d", done+i)
				payload := ssptest.Full(t, tbl, ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String(owner),
					"name": rowcodec.String(name), "locked": rowcodec.Bool(false)})
				sc := map[string]string{"owner": owner}
				if err := tx.UpsertRow(ctx, "projects", ports.RowWrite{RowID: id, Version: 1, Scopes: sc, Payload: payload,
					Values: []any{id, owner, name, false}}); err != nil {
					return err
				}
				if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: time.Now().UnixMilli(), ActorID: "seed",
					ClientID: "seed", ClientCommitID: id, Changes: []commit.Change{{Table: "projects", RowID: id, Op: commit.OpUpsert,
						RowVersion: 1, Scopes: sc, Row: payload}}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("seed commits: %v", err)
		}
		done += k
	}
}

// seedRows writes n project rows owned by owner in commits of batch rows.
func seedRows(t *testing.T, st ports.Storage, sch *schema.Schema, partition, owner, prefix string, n, batch int) {
	t.Helper()
	tbl := sch.Table("projects")
	ctx := context.Background()
	for done := 0; done < n; {
		k := min(batch, n-done)
		err := st.Push(ctx, partition, ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
			changes := make([]commit.Change, 0, k)
			for i := 0; i < k; i++ {
				id := fmt.Sprintf("%s-%06d", prefix, done+i)
				payload := ssptest.Full(t, tbl, ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String(owner),
					"name": rowcodec.String(id), "locked": rowcodec.Bool(false)})
				sc := map[string]string{"owner": owner}
				if err := tx.UpsertRow(ctx, "projects", ports.RowWrite{RowID: id, Version: 1, Scopes: sc, Payload: payload,
					Values: []any{id, owner, id, false}}); err != nil {
					return err
				}
				changes = append(changes, commit.Change{Table: "projects", RowID: id, Op: commit.OpUpsert, RowVersion: 1, Scopes: sc, Row: payload})
			}
			_, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: time.Now().UnixMilli(), ActorID: "seed", ClientID: "seed",
				ClientCommitID: fmt.Sprintf("%s-%d", prefix, done), Changes: changes})
			return err
		})
		if err != nil {
			t.Fatalf("seed rows: %v", err)
		}
		done += k
	}
}
