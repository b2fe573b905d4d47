package client_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// imageSpec is what a test image holds: its metadata and projects rows
// (id → version), and an optional change applied after writing them.
type imageSpec struct {
	meta   sqliteimage.Metadata
	rows   map[string]int64
	mutate string
}

// buildImage writes an image with the SQLite engine straight from the
// §5.3 statements, so a test can also write broken ones.
func buildImage(t testing.TB, tbl *schema.Table, s imageSpec) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "img.sqlite")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stmts := []string{sqliteimage.CreateDataTable(tbl), sqliteimage.CreateMetadataTable}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(sqliteimage.InsertMetadata, s.meta.Args()...); err != nil {
		t.Fatal(err)
	}
	for id, v := range s.rows {
		if _, err := db.Exec(sqliteimage.InsertRow(tbl), id, "alice", "name "+id, int64(1), v); err != nil {
			t.Fatal(err)
		}
	}
	if s.mutate != "" {
		if _, err := db.Exec(s.mutate); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// imagePull has a scripted server answer one bootstrap pull with a
// SEGMENT_REF to img (edited by ref when set) and returns the client and
// the pull's section.
func imagePull(t testing.TB, accept uint8, img []byte, ref func(*ssp2.SegmentRef), seed func(*client.Client)) (*client.Client, client.Section) {
	t.Helper()
	sch := ssptest.Schema(t)
	f := &fakeServer{t: t, sch: sch, segments: map[string][]byte{contentaddr.Of(img): img}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	hdr := http.Header{}
	hdr.Set("X-Actor", "alice")
	c, err := client.New(client.Options{BaseURL: srv.URL + "/api", Schema: sch, ClientID: "c1", Header: hdr, Accept: accept})
	if err != nil {
		t.Fatal(err)
	}
	c.SetLogEpoch("e1")
	c.Subscribe("s", "projects", map[string][]string{"owner": {"alice"}})
	if seed != nil {
		seed(c)
	}
	r := &ssp2.SegmentRef{SegmentID: contentaddr.Of(img), MediaType: ssp2.MediaSQLite, Table: "projects", ByteLength: int64(len(img)),
		RowCount: 2, AsOfCommitSeq: 7, ScopeDigest: "d"}
	if ref != nil {
		ref(r)
	}
	f.script = []func(*ssp2.Message) ([]ssp2.Frame, int){func(*ssp2.Message) ([]ssp2.Frame, int) {
		return []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
			&ssp2.SubStart{ID: "s", Status: ssp2.SubActive, Bootstrap: true, EffectiveScopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}})},
			r, &ssp2.SubEnd{NextCursor: 7}}, 0
	}}
	res, err := c.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c, res.Sections["s"]
}

var (
	withImages = ssp2.AcceptInlineRows | ssp2.AcceptExternalRows | ssp2.AcceptSQLite
	goodMeta   = sqliteimage.Metadata{Format: 1, Table: "projects", SchemaVersion: 2, AsOfCommitSeq: 7, ScopeDigest: "d", RowCount: 2}
)

// A §5.3 image is imported with the SQLite engine: its rows and their
// _syncular_version as server versions, the cursor at the pin.
func TestImageImport(t *testing.T) {
	tbl := ssptest.Schema(t).Table("projects")
	img := buildImage(t, tbl, imageSpec{meta: goodMeta, rows: map[string]int64{"p1": 3, "p2": 1}})
	c, sec := imagePull(t, withImages, img, nil, nil)
	if sec.Err != nil {
		t.Fatal(sec.Err)
	}
	if got := strings.Join(c.RowIDs("projects"), ","); got != "p1,p2" || c.Subscription("s").Cursor != 7 {
		t.Fatalf("rows %s cursor %d", got, c.Subscription("s").Cursor)
	}
	vals, v, _ := c.Get("projects", "p1")
	if v != 3 || !vals["name"].Equal(rowcodec.String("name p1")) || !vals["locked"].Equal(rowcodec.Bool(true)) {
		t.Fatalf("p1 = %v v%d", vals, v)
	}
	if st := c.Stats(); st.Images != 1 || st.BootstrapRows != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// §4.2, §5.3, §5.1: what the client refuses, before applying anything
// (the cursor stays, no row lands).
func TestImageRejections(t *testing.T) {
	tbl := ssptest.Schema(t).Table("projects")
	good := imageSpec{meta: goodMeta, rows: map[string]int64{"p1": 3, "p2": 1}}
	otherMeta := func(mut func(*sqliteimage.Metadata)) imageSpec {
		s := good
		mut(&s.meta)
		return s
	}
	tests := []struct {
		name   string
		accept uint8
		img    imageSpec
		raw    []byte
		ref    func(*ssp2.SegmentRef)
		code   syncerr.Code
	}{
		{name: "not advertised", accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, img: good, code: syncerr.InvalidRequest},
		{name: "row cursor on an image", img: good, ref: func(r *ssp2.SegmentRef) { r.RowCursor = ssp2.Some("p0") }, code: syncerr.InvalidRequest},
		{name: "next row cursor on an image", img: good, ref: func(r *ssp2.SegmentRef) { r.NextRowCursor = ssp2.Some("p9") }, code: syncerr.InvalidRequest},
		{name: "not a database", raw: []byte("SQLite format 3\x00 but not really"), code: syncerr.InvalidRequest},
		{name: "other pin", img: otherMeta(func(m *sqliteimage.Metadata) { m.AsOfCommitSeq = 6 }), code: syncerr.InvalidRequest},
		{name: "other digest", img: otherMeta(func(m *sqliteimage.Metadata) { m.ScopeDigest = "e" }), code: syncerr.InvalidRequest},
		{name: "other schema version", img: otherMeta(func(m *sqliteimage.Metadata) { m.SchemaVersion = 1 }), code: syncerr.InvalidRequest},
		{name: "other format", img: otherMeta(func(m *sqliteimage.Metadata) { m.Format = 2 }), code: syncerr.InvalidRequest},
		{name: "metadata row count differs", img: otherMeta(func(m *sqliteimage.Metadata) { m.RowCount = 3 }), code: syncerr.InvalidRequest},
		{name: "rows differ from the count", img: imageSpec{meta: goodMeta, rows: map[string]int64{"p1": 3}},
			ref: func(r *ssp2.SegmentRef) {}, code: syncerr.InvalidRequest},
		{name: "two metadata rows", img: imageSpec{meta: goodMeta, rows: good.rows,
			mutate: `INSERT INTO _syncular_segment SELECT * FROM _syncular_segment`}, code: syncerr.InvalidRequest},
		{name: "column renamed", img: imageSpec{meta: goodMeta, rows: good.rows,
			mutate: `ALTER TABLE projects RENAME COLUMN locked TO lock`}, code: syncerr.SchemaMismatch},
		{name: "version zero", img: imageSpec{meta: goodMeta, rows: map[string]int64{"p1": 0, "p2": 1}}, code: syncerr.InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := tt.raw
			if img == nil {
				img = buildImage(t, tbl, tt.img)
			}
			accept := tt.accept
			if accept == 0 {
				accept = withImages
			}
			c, sec := imagePull(t, accept, img, tt.ref, nil)
			if sec.Err == nil {
				t.Fatal("accepted")
			}
			var se *syncerr.Error
			if !errors.As(sec.Err, &se) || se.Code != tt.code {
				t.Fatalf("error %v, want %s", sec.Err, tt.code)
			}
			if len(c.RowIDs("projects")) != 0 || c.Subscription("s").Cursor != -1 {
				t.Fatalf("applied: rows %v cursor %d", c.RowIDs("projects"), c.Subscription("s").Cursor)
			}
		})
	}
}

// BenchmarkImageImport imports a 100,000-row projects image through a
// scripted server (download from memory, open, check, read and stage every
// row, apply at SUB_END): the client side of an image bootstrap.
func BenchmarkImageImport(b *testing.B) {
	sch := ssptest.Schema(b)
	tbl := sch.Table("projects")
	const n = 100_000
	path := filepath.Join(b.TempDir(), "img.sqlite")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	tx, _ := db.Begin()
	for _, q := range []string{sqliteimage.CreateDataTable(tbl), sqliteimage.CreateMetadataTable} {
		if _, err := tx.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	meta := goodMeta
	meta.RowCount = n
	if _, err := tx.Exec(sqliteimage.InsertMetadata, meta.Args()...); err != nil {
		b.Fatal(err)
	}
	ins, _ := tx.Prepare(sqliteimage.InsertRow(tbl))
	for i := range n {
		id := fmt.Sprintf("p-%07d", i)
		if _, err := ins.Exec(id, "alice", "project "+id+" lorem ipsum dolor sit amet", int64(i%2), int64(1)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	_ = db.Close()
	img, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	ref := func(r *ssp2.SegmentRef) { r.RowCount = n }
	b.ReportAllocs()
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		c, sec := imagePull(b, withImages, img, ref, nil)
		if sec.Err != nil || len(c.Rows("projects")) != n {
			b.Fatalf("%v, %d rows", sec.Err, len(c.Rows("projects")))
		}
	}
}
