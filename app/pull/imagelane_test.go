package pull_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/syncd-dev/syncd/adapters/segments/imagebuilder"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

var (
	rowsOnly  = ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitSnapshotRows: 2}
	withImage = ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows | ssp2.AcceptSQLite, LimitSnapshotRows: 2, MaxSnapshotPages: 1}
)

func withBuilder(t *testing.T) func(*pull.Options) {
	b, err := imagebuilder.New(imagebuilder.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *pull.Options) { o.Images = b }
}

type snapRow struct {
	version int64
	payload []byte
}

// image downloads a referenced image from the store and reads it with a
// fresh SQLite connection: its metadata and its rows re-encoded.
func (e *env) image(ref *ssp2.SegmentRef, tbl *schema.Table) (sqliteimage.Metadata, map[string]snapRow) {
	e.t.Helper()
	rc, _, err := e.segs.Open(context.Background(), ref.SegmentID)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	path := filepath.Join(e.t.TempDir(), "image.sqlite")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var m sqliteimage.Metadata
	if err := db.QueryRow(sqliteimage.SelectMetadata).Scan(&m.Format, &m.Table, &m.SchemaVersion, &m.AsOfCommitSeq, &m.ScopeDigest, &m.RowCount); err != nil {
		e.t.Fatal(err)
	}
	q, err := db.Query(sqliteimage.SelectRows(tbl))
	if err != nil {
		e.t.Fatal(err)
	}
	defer q.Close()
	out := map[string]snapRow{}
	codec := rowcodec.New(tbl)
	for q.Next() {
		cells := make([]any, len(tbl.Columns)+1)
		ptrs := make([]any, len(cells))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		if err := q.Scan(ptrs...); err != nil {
			e.t.Fatal(err)
		}
		vals := make([]rowcodec.Value, len(tbl.Columns))
		for i := range tbl.Columns {
			if vals[i], err = sqliteimage.Value(&tbl.Columns[i], cells[i]); err != nil {
				e.t.Fatal(err)
			}
		}
		p, err := codec.AppendRow(nil, vals)
		if err != nil {
			e.t.Fatal(err)
		}
		id, _ := rowcodec.ScopeString(vals[tbl.PKIndex])
		out[id] = snapRow{version: cells[len(tbl.Columns)].(int64), payload: p}
	}
	return m, out
}

// rowsLane bootstraps sub on the rows lane to completion and returns the
// rows its segments carried.
func (e *env) rowsLane(h ssp2.PullHeader, allowed scopes.Allowed, s subSpec) map[string]snapRow {
	e.t.Helper()
	out := map[string]snapRow{}
	for range 100 {
		r := e.ok(h, allowed, s)
		var segs [][]byte
		for _, f := range r.inline[0] {
			segs = append(segs, f.Payload)
		}
		for _, f := range r.refs[0] {
			if f.MediaType != ssp2.MediaRows {
				e.t.Fatalf("rows lane served media %v", f.MediaType)
			}
			rc, _, err := e.segs.Open(context.Background(), f.SegmentID)
			if err != nil {
				e.t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			_ = rc.Close()
			segs = append(segs, b)
		}
		for _, b := range segs {
			seg, err := rowcodec.DecodeSegment(b)
			if err != nil {
				e.t.Fatal(err)
			}
			tbl := e.sch.Table(seg.Table)
			for _, row := range slices.Concat(seg.Blocks...) {
				p, err := rowcodec.New(tbl).AppendRow(nil, row.Values)
				if err != nil {
					e.t.Fatal(err)
				}
				id, _ := rowcodec.ScopeString(row.Values[tbl.PKIndex])
				out[id] = snapRow{version: row.ServerVersion, payload: p}
			}
		}
		if !r.ends[0].BootstrapState.Present {
			return out
		}
		s.cursor, s.token = r.ends[0].NextCursor, r.ends[0].BootstrapState.Value
	}
	e.t.Fatal("rows-lane bootstrap does not complete")
	return nil
}

// §5.3: a client taking images gets the whole table as one sqlite
// SEGMENT_REF in one pull whatever its page limits (no row cursors, no
// resume token, nextCursor the pin), and the image holds exactly the rows
// and versions the rows lane delivers.
func TestImageLaneWholeTable(t *testing.T) {
	e := newEnv(t, withBuilder(t))
	e.seed("alice", "a", 5)
	e.seed("bob", "b", 3)
	pin := e.seed("alice", "c", 2)
	r := e.ok(withImage, aliceGrant, sub("s", -1))
	if !r.starts[0].Bootstrap || len(r.inline[0]) != 0 || len(r.refs[0]) != 1 {
		t.Fatalf("section: bootstrap %v, %d inline, %d refs", r.starts[0].Bootstrap, len(r.inline[0]), len(r.refs[0]))
	}
	ref := r.refs[0][0]
	if ref.MediaType != ssp2.MediaSQLite || ref.RowCursor.Present || ref.NextRowCursor.Present || ref.RowCount != 7 || ref.AsOfCommitSeq != pin || ref.Table != "projects" {
		t.Fatalf("descriptor %+v", ref)
	}
	if r.ends[0].BootstrapState.Present || r.ends[0].NextCursor != pin {
		t.Fatalf("SUB_END %+v", r.ends[0])
	}
	digest := scopes.Map{"owner": {"alice"}}.Digest()
	if ref.ScopeDigest != digest || ref.ByteLength <= 0 {
		t.Fatalf("descriptor digest %s length %d", ref.ScopeDigest, ref.ByteLength)
	}
	tbl := e.sch.Table("projects")
	meta, img := e.image(ref, tbl)
	if meta != (sqliteimage.Metadata{Format: 1, Table: "projects", SchemaVersion: int64(e.sch.Version), AsOfCommitSeq: pin, ScopeDigest: digest, RowCount: 7}) {
		t.Fatalf("metadata %+v", meta)
	}
	rows := e.rowsLane(rowsOnly, aliceGrant, sub("s", -1))
	if len(img) != len(rows) {
		t.Fatalf("image %d rows, rows lane %d", len(img), len(rows))
	}
	for id, want := range rows {
		got, ok := img[id]
		if !ok || got.version != want.version || !bytes.Equal(got.payload, want.payload) {
			t.Fatalf("row %s: image %+v, rows lane %+v", id, got, want)
		}
	}
}

// The image holds every column type exactly as the rows lane does.
func TestImageLaneEveryType(t *testing.T) {
	e := newEnv(t, withBuilder(t))
	notes := e.sch.Table("notes")
	vals := []ssptest.Cols{
		{"id": rowcodec.String("n1"), "title": rowcodec.String("naïve 🚀"), "body": rowcodec.String(""), "count": rowcodec.Int(-7),
			"score": rowcodec.Float(2.5), "done": rowcodec.Bool(true), "meta": rowcodec.JSON(`{ "a": [1,2] }`),
			"blob": rowcodec.Bytes([]byte{0, 255}), "doc": rowcodec.CRDT([]byte{7})},
		{"id": rowcodec.String("n2"), "title": rowcodec.Null(), "body": rowcodec.String("b"), "count": rowcodec.Null(),
			"score": rowcodec.Float(math.Inf(-1)), "done": rowcodec.Bool(false), "meta": rowcodec.Null(), "blob": rowcodec.Bytes([]byte{}), "doc": rowcodec.Null()},
		{"id": rowcodec.String("n3"), "title": rowcodec.String("t"), "body": rowcodec.String("x"), "count": rowcodec.Int(1<<53 - 1),
			"score": rowcodec.Float(1e-300), "done": rowcodec.Bool(false), "meta": rowcodec.JSON("7"), "blob": rowcodec.Null(), "doc": rowcodec.Null()},
	}
	e.seedTable(notes, vals)
	grant := scopes.Allowed{"id": {"*"}}
	s := subSpec{id: "n", table: "notes", scopes: map[string][]string{"id": {"n1", "n2", "n3"}}, cursor: -1}
	r := e.ok(withImage, grant, s)
	if len(r.refs[0]) != 1 || r.refs[0][0].MediaType != ssp2.MediaSQLite {
		t.Fatalf("no image: %d refs %d inline", len(r.refs[0]), len(r.inline[0]))
	}
	_, img := e.image(r.refs[0][0], notes)
	rows := e.rowsLane(rowsOnly, grant, s)
	if len(img) != 3 || len(rows) != 3 {
		t.Fatalf("image %d rows, rows lane %d", len(img), len(rows))
	}
	for id, want := range rows {
		if got := img[id]; got.version != want.version || !bytes.Equal(got.payload, want.payload) {
			t.Fatalf("row %s: image %x v%d, rows lane %x v%d", id, got.payload, got.version, want.payload, want.version)
		}
	}
}

// seedTable writes rows of a table in one commit; the scopes are those of
// the table's scope columns.
func (e *env) seedTable(tbl *schema.Table, rows []ssptest.Cols) int64 {
	e.t.Helper()
	ctx := context.Background()
	var seq int64
	err := e.st.Push(ctx, part, ports.PushOptions{WriterVersion: e.sch.Version}, func(tx ports.PushTx) error {
		var changes []commit.Change
		for _, cols := range rows {
			payload := ssptest.Full(e.t, tbl, cols)
			vals, err := rowcodec.New(tbl).DecodeRow(payload, nil)
			if err != nil {
				return err
			}
			plain := make([]any, len(vals))
			for i, v := range vals {
				plain[i] = v.Plain()
			}
			id, _ := rowcodec.ScopeString(vals[tbl.PKIndex])
			sc := map[string]string{}
			for _, s := range tbl.Scopes {
				sc[s.Variable], _ = rowcodec.ScopeString(vals[tbl.ColumnIndex(s.Column)])
			}
			if err := tx.UpsertRow(ctx, tbl.Name, ports.RowWrite{RowID: id, Version: 1, Scopes: sc, Payload: payload, Values: plain}); err != nil {
				return err
			}
			changes = append(changes, commit.Change{Table: tbl.Name, RowID: id, Op: commit.OpUpsert, RowVersion: 1, Scopes: sc, Row: payload})
		}
		var err error
		seq, err = tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: e.now.UnixMilli(), ActorID: "a", ClientID: "x", ClientCommitID: fmt.Sprint("t", len(rows)), Changes: changes})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

// §5.3 reuse: one stored image per (partition, table, schema version,
// digest, pin), built once; without bit 2 the same table goes the rows
// lane (capability negotiation).
func TestImageLaneReuseAndGating(t *testing.T) {
	e := newEnv(t, withBuilder(t))
	e.seed("alice", "a", 5)
	first := e.ok(withImage, aliceGrant, sub("s", -1)).refs[0][0]
	second := e.ok(withImage, aliceGrant, sub("s", -1)).refs[0][0]
	if first.SegmentID != second.SegmentID {
		t.Fatalf("rebuilt: %s then %s", first.SegmentID, second.SegmentID)
	}
	if n := e.m.Value("syncd_pull_image_builds_total"); n != 1 {
		t.Fatalf("%v image builds", n)
	}
	r := e.ok(rowsOnly, aliceGrant, sub("s", -1))
	for _, f := range r.refs[0] {
		if f.MediaType != ssp2.MediaRows {
			t.Fatal("a client without bit 2 got an image")
		}
	}
	if len(r.inline[0])+len(r.refs[0]) == 0 {
		t.Fatal("no rows segments")
	}
}

// §4.7 scope pin: commits outside the subscription's scope leave the pin
// and the stored image as they were; a change in scope moves both.
func TestImageLaneScopePin(t *testing.T) {
	e := newEnv(t, withBuilder(t))
	pin := e.seed("alice", "a", 5)
	e.seed("bob", "b", 3)
	first := e.ok(withImage, aliceGrant, sub("s", -1))
	if first.refs[0][0].AsOfCommitSeq != pin || first.ends[0].NextCursor != pin {
		t.Fatalf("pin %d, want the scope pin %d", first.refs[0][0].AsOfCommitSeq, pin)
	}
	e.seed("bob", "c", 3)
	again := e.ok(withImage, aliceGrant, sub("s", -1))
	if again.refs[0][0].SegmentID != first.refs[0][0].SegmentID {
		t.Fatal("a commit outside the scope changed the image")
	}
	// The incremental pull from the scope pin replays only out-of-scope
	// commits: no changes, the cursor at the log's end.
	inc := e.ok(withImage, aliceGrant, sub("s", pin))
	if len(inc.commits[0]) != 0 || inc.ends[0].NextCursor != 3 {
		t.Fatalf("after the pin: %d commits, next %d", len(inc.commits[0]), inc.ends[0].NextCursor)
	}
	moved := e.seed("alice", "d", 1)
	third := e.ok(withImage, aliceGrant, sub("s", -1))
	if ref := third.refs[0][0]; ref.AsOfCommitSeq != moved || ref.RowCount != 6 || ref.SegmentID == first.refs[0][0].SegmentID {
		t.Fatalf("after a change in scope: pin %d rows %d", ref.AsOfCommitSeq, ref.RowCount)
	}
}

// §5.3 eligibility: a snapshot within one rows page goes the rows lane
// (inline), and so does a bootstrap resumed mid-table, even with bit 2.
func TestImageLaneEligibility(t *testing.T) {
	e := newEnv(t, withBuilder(t))
	e.seed("alice", "a", 2)
	r := e.ok(withImage, aliceGrant, sub("s", -1))
	if len(r.refs[0]) != 0 || len(r.inline[0]) != 1 || r.ends[0].BootstrapState.Present {
		t.Fatalf("one-page table: %d refs, %d inline", len(r.refs[0]), len(r.inline[0]))
	}
	if n := e.m.Value("syncd_pull_image_declines_total"); n != 1 {
		t.Fatalf("%v declines", n)
	}
	e.seed("alice", "b", 4)
	h := rowsOnly
	h.MaxSnapshotPages = 1
	first := e.ok(h, aliceGrant, sub("s", -1))
	tok := first.ends[0].BootstrapState
	if !tok.Present {
		t.Fatal("no resume token")
	}
	s := sub("s", first.ends[0].NextCursor)
	s.token = tok.Value
	resumed := e.ok(withImage, aliceGrant, s)
	for _, f := range resumed.refs[0] {
		if f.MediaType != ssp2.MediaRows {
			t.Fatal("a mid-table resume switched to the image lane")
		}
	}
	if resumed.ends[0].NextCursor != first.ends[0].NextCursor {
		t.Fatalf("resume moved the pin: %d → %d", first.ends[0].NextCursor, resumed.ends[0].NextCursor)
	}
}

// Tables with encrypted columns never use the image lane (§4.7, §5.11).
func TestImageLaneEncryptedTable(t *testing.T) {
	sch, err := schema.Load([]byte(`{"irVersion":1,"schemaVersion":1,"schemaVersions":[{"version":1,"migrations":["0001"]}],"tables":[
{"name":"secrets","primaryKey":"id","columns":[{"name":"id","type":"string","nullable":false},{"name":"owner","type":"string","nullable":false},
{"name":"body","type":"bytes","nullable":true,"encrypted":true,"declaredType":"string"}],
"scopes":[{"pattern":"user:{owner}","variable":"owner","column":"owner"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvSchema(t, sch, withBuilder(t))
	tbl := sch.Table("secrets")
	var rows []ssptest.Cols
	for i := range 4 {
		rows = append(rows, ssptest.Cols{"id": rowcodec.String(fmt.Sprint("s", i)), "owner": rowcodec.String("alice"), "body": rowcodec.Bytes([]byte{1})})
	}
	e.seedTable(tbl, rows)
	s := subSpec{id: "s", table: "secrets", scopes: map[string][]string{"owner": {"alice"}}, cursor: -1}
	r := e.ok(withImage, aliceGrant, s)
	for _, f := range r.refs[0] {
		if f.MediaType == ssp2.MediaSQLite {
			t.Fatal("an encrypted table went the image lane")
		}
	}
	if r.ends[0].NextCursor != 1 || !r.ends[0].BootstrapState.Present {
		t.Fatalf("rows lane: %+v", r.ends[0])
	}
}

// Without a builder the server serves an image some publisher stored
// under the bootstrap's key, and the rows lane otherwise.
func TestImageLaneWithoutBuilder(t *testing.T) {
	e := newEnv(t, nil)
	e.seed("alice", "a", 5)
	r := e.ok(withImage, aliceGrant, sub("s", -1))
	for _, f := range r.refs[0] {
		if f.MediaType == ssp2.MediaSQLite {
			t.Fatal("an image without a builder")
		}
	}
	// A publisher (another node) stored an image under the key.
	pub := ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: part, LogEpoch: e.epoch, Table: "projects", SchemaVersion: e.sch.Version,
		MediaType: ports.SegmentSQLite, ScopeDigest: scopes.Map{"owner": {"alice"}}.Digest(), AsOfCommitSeq: 1}, RowCount: 5,
		CreatedAtMs: e.now.UnixMilli(), ExpiresAtMs: e.now.UnixMilli() + 60_000}
	b := []byte("stored by another node")
	pub.SegmentID = contentAddr(b)
	if _, err := e.segs.Put(context.Background(), b, pub); err != nil {
		t.Fatal(err)
	}
	r = e.ok(withImage, aliceGrant, sub("s", -1))
	if len(r.refs[0]) != 1 || r.refs[0][0].SegmentID != pub.SegmentID || r.refs[0][0].MediaType != ssp2.MediaSQLite {
		t.Fatalf("stored image not served: %+v", r.refs[0])
	}
}

// An image descriptor carries a signed URL when the client set bit 3.
func TestImageLaneSignedURL(t *testing.T) {
	e := newEnv(t, func(o *pull.Options) {
		withBuilder(t)(o)
		o.Signer = fixedSigner{}
	})
	e.seed("alice", "a", 5)
	h := withImage
	h.Accept |= ssp2.AcceptSignedURLs
	ref := e.ok(h, aliceGrant, sub("s", -1)).refs[0][0]
	if ref.MediaType != ssp2.MediaSQLite || !ref.URL.Present || ref.URL.Value != "https://cdn/"+ref.SegmentID || !ref.URLExpiresAtMs.Present {
		t.Fatalf("descriptor %+v", ref)
	}
}

type fixedSigner struct{}

func (fixedSigner) SignSegmentURL(_ context.Context, r ports.SegmentURLRequest) (string, int64, error) {
	return "https://cdn/" + r.SegmentID, r.NowMs + 1000, nil
}

func contentAddr(b []byte) string { return contentaddr.Of(b) }

// deleteProject deletes one project row of owner in its own commit.
func (e *env) deleteProject(owner, id string) int64 {
	e.t.Helper()
	ctx := context.Background()
	var seq int64
	err := e.st.Push(ctx, part, ports.PushOptions{WriterVersion: e.sch.Version}, func(tx ports.PushTx) error {
		if err := tx.DeleteRow(ctx, "projects", id, 0); err != nil {
			return err
		}
		var err error
		seq, err = tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: e.now.UnixMilli(), ActorID: "a", ClientID: "x", ClientCommitID: "del-" + id,
			Changes: []commit.Change{{Table: "projects", RowID: id, Op: commit.OpDelete, Scopes: map[string]string{"owner": owner}}}})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

// §8.4: an incremental pull whose window holds more matching changes than
// CatchUpChanges, and more than one response carries, is answered with a
// bootstrap section at a fresh pin instead of the commits; with a delete
// in the window (which the client's upserts could not undo) with a reset.
func TestCatchUpThroughSegments(t *testing.T) {
	var probes *probeCounter
	farBehind := func(t *testing.T, threshold int) *env {
		e := newEnv(t, func(o *pull.Options) {
			withBuilder(t)(o)
			o.CatchUpChanges = threshold
			probes = &probeCounter{Store: o.Store.(*memory.Store)}
			o.Store = probes
		})
		e.seed("alice", "a", 1) // seq 1: the client holds it
		for i := range 12 {
			e.seed("alice", fmt.Sprint("n", i), 1)
			e.seed("bob", fmt.Sprint("b", i), 1)
		}
		return e
	}
	rows := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitCommits: 5}
	images := rows
	images.Accept |= ssp2.AcceptSQLite
	images.LimitSnapshotRows = 2 // more than one page: the image lane

	t.Run("rows lane", func(t *testing.T) {
		e := farBehind(t, 10)
		r := e.ok(rows, aliceGrant, sub("s", 1))
		if !r.starts[0].Bootstrap || len(r.commits[0]) != 0 || len(r.inline[0]) != 1 || r.ends[0].NextCursor != 25 || r.ends[0].BootstrapState.Present {
			t.Fatalf("catch-up: bootstrap %v, %d commits, %d inline, %+v", r.starts[0].Bootstrap, len(r.commits[0]), len(r.inline[0]), r.ends[0])
		}
		seg, err := rowcodec.DecodeSegment(r.inline[0][0].Payload)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(slices.Concat(seg.Blocks...)); n != 13 {
			t.Fatalf("catch-up segment holds %d rows, want 13", n)
		}
		if e.m.Value("syncd_pull_catchups_total") != 1 {
			t.Fatal("catch-up not counted")
		}
	})
	t.Run("image lane at the scope pin", func(t *testing.T) {
		e := farBehind(t, 10)
		r := e.ok(images, aliceGrant, sub("s", 1))
		if len(r.refs[0]) != 1 || r.refs[0][0].MediaType != ssp2.MediaSQLite || r.refs[0][0].AsOfCommitSeq != 24 || r.ends[0].NextCursor != 24 {
			t.Fatalf("catch-up: %+v %+v", r.refs[0], r.ends[0])
		}
	})
	t.Run("a delete in the window resets", func(t *testing.T) {
		e := farBehind(t, 10)
		e.deleteProject("alice", "a-000")
		r := e.ok(rows, aliceGrant, sub("s", 1))
		if r.starts[0].Status != ssp2.SubReset || r.starts[0].ReasonCode != "sync.cursor_expired" || r.ends[0].NextCursor != 1 {
			t.Fatalf("catch-up with a delete: %+v %+v", r.starts[0], r.ends[0])
		}
	})
	t.Run("below the threshold the commits are served", func(t *testing.T) {
		e := farBehind(t, 12)
		r := e.ok(rows, aliceGrant, sub("s", 1))
		if r.starts[0].Bootstrap || len(r.commits[0]) != 5 {
			t.Fatalf("incremental: bootstrap %v, %d commits", r.starts[0].Bootstrap, len(r.commits[0]))
		}
	})
	t.Run("no probe while every change to the table is within the threshold", func(t *testing.T) {
		// The read holds alice's first 6 changes (seqs 2–12); after it, 13
		// changes to the table (alice's and bob's, seqs 13–25) are
		// counted, not read: 19 at most.
		e := farBehind(t, 19)
		r := e.ok(rows, aliceGrant, sub("s", 1))
		if r.starts[0].Bootstrap || len(r.commits[0]) != 5 || probes.n != 0 {
			t.Fatalf("incremental: bootstrap %v, %d commits, %d probes", r.starts[0].Bootstrap, len(r.commits[0]), probes.n)
		}
		e = farBehind(t, 18) // one more than the threshold: the probe decides
		r = e.ok(rows, aliceGrant, sub("s", 1))
		if r.starts[0].Bootstrap || len(r.commits[0]) != 5 || probes.n != 1 {
			t.Fatalf("incremental: bootstrap %v, %d commits, %d probes", r.starts[0].Bootstrap, len(r.commits[0]), probes.n)
		}
	})
	t.Run("one response suffices", func(t *testing.T) {
		e := farBehind(t, 10)
		h := rows
		h.LimitCommits = 100
		r := e.ok(h, aliceGrant, sub("s", 1))
		if r.starts[0].Bootstrap || len(r.commits[0]) != 12 {
			t.Fatalf("incremental: bootstrap %v, %d commits", r.starts[0].Bootstrap, len(r.commits[0]))
		}
	})
	t.Run("off", func(t *testing.T) {
		e := farBehind(t, 0)
		if r := e.ok(rows, aliceGrant, sub("s", 1)); r.starts[0].Bootstrap || len(r.commits[0]) != 5 {
			t.Fatalf("incremental: bootstrap %v, %d commits", r.starts[0].Bootstrap, len(r.commits[0]))
		}
	})
}

// probeCounter counts the far-behind probes a pull runs.
type probeCounter struct {
	*memory.Store
	n      int
	counts []int64 // the AfterSeq of every CountWindowChanges
}

func (p *probeCounter) CountWindowChanges(ctx context.Context, partition string, w ports.WindowProbe) (int, error) {
	p.counts = append(p.counts, w.AfterSeq)
	return p.Store.CountWindowChanges(ctx, partition, w)
}

func (p *probeCounter) ProbeCommitWindow(ctx context.Context, partition string, w ports.WindowProbe) (ports.WindowSummary, error) {
	p.n++
	return p.Store.ProbeCommitWindow(ctx, partition, w)
}

// The far-behind count is taken once per stretch of the log: a later
// response of the catch-up, and other clients catching up over the same
// log, count only what lies past the counted window (and remember the
// longer window); a new log epoch counts afresh; and a count never hides
// a window grown past the threshold.
func TestFarBehindCountedOnce(t *testing.T) {
	var probes *probeCounter
	e := newEnv(t, func(o *pull.Options) {
		withBuilder(t)(o)
		o.CatchUpChanges = 25
		probes = &probeCounter{Store: o.Store.(*memory.Store)}
		o.Store = probes
	})
	e.seed("alice", "a", 1) // seq 1
	for i := range 12 {
		// seqs 2–25: alice's at even seqs, bob's at odd ones
		e.seed("alice", fmt.Sprint("n", i), 1)
		e.seed("bob", fmt.Sprint("b", i), 1)
	}
	rows := ssp2.PullHeader{Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitCommits: 5}
	steps := []struct {
		name   string
		before func()
		client string
		cursor int64
		counts []int64 // the windows counted, by their AfterSeq
		probes int
	}{
		// The read holds alice's seqs 2–12 (6 changes); the 13 changes of
		// (12, 25] are counted: within the 25 - 6 left.
		{"first response counts the rest of the window", nil, "c1", 1, []int64{12}, 0},
		{"another client over the same log counts nothing", nil, "c2", 1, nil, 0},
		{"the next response of the catch-up counts nothing", nil, "c1", 10, nil, 0},
		{"a grown log counts only past the counted window", func() {
			e.seed("bob", "b12", 1) // seq 26: 14 changes after 12
		}, "c3", 1, []int64{25}, 0},
		{"the grown window is remembered", nil, "c4", 1, nil, 0},
		{"past the threshold the whole window is counted, then probed", func() {
			for i := 12; i < 15; i++ { // seqs 27–32: 20 changes after 12
				e.seed("alice", fmt.Sprint("n", i), 1)
				e.seed("bob", fmt.Sprint("b", i+1), 1)
			}
		}, "c5", 1, []int64{26, 12}, 1},
		{"a new log epoch counts afresh", func() { e.epoch = "rotated" }, "c6", 13, []int64{24}, 0},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		probes.counts, probes.n = nil, 0
		r := e.pullAsOK(st.client, rows, sub("s", st.cursor))
		if r.starts[0].Bootstrap || len(r.commits[0]) != 5 {
			t.Fatalf("%s: bootstrap %v, %d commits", st.name, r.starts[0].Bootstrap, len(r.commits[0]))
		}
		if !slices.Equal(probes.counts, st.counts) || probes.n != st.probes {
			t.Fatalf("%s: counted after %v with %d probes, want %v and %d", st.name, probes.counts, probes.n, st.counts, st.probes)
		}
	}
}

func (e *env) pullAsOK(client string, h ssp2.PullHeader, subs ...subSpec) result {
	e.t.Helper()
	r, err := e.pullAs(client, h, aliceGrant, subs...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}
