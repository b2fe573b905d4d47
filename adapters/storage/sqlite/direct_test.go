package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
	"github.com/syncd-dev/syncd/ports"
)

// directFixture is a WAL database with table t(i, s, b) written through
// database/sql, as the store's writer does, and a direct reader on it.
func directFixture(t testing.TB, rows int, conns int) (*directReads, *sql.DB) {
	t.Helper()
	return directFixtureAt(t, filepath.Join(t.TempDir(), "d.db"), rows, conns)
}

func directFixtureAt(t testing.TB, path string, rows int, conns int) (*directReads, *sql.DB) {
	t.Helper()
	db, err := sql.Open("sqlite", DSN(Options{Path: path}, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(`CREATE TABLE t(k INTEGER PRIMARY KEY, i INTEGER, s TEXT, b BLOB)`); err != nil {
		t.Fatal(err)
	}
	ins := []struct {
		i any
		s any
		b any
	}{
		{int64(-7), "héllo", []byte{0, 1, 2}},
		{nil, "", []byte{}},
		{int64(1) << 62, nil, nil},
	}
	for k := range rows {
		v := ins[k%len(ins)]
		if _, err := db.Exec(`INSERT INTO t(k, i, s, b) VALUES (?, ?, ?, ?)`, k, v.i, v.s, v.b); err != nil {
			t.Fatal(err)
		}
	}
	d := newDirectReads(path, time.Second, conns)
	t.Cleanup(d.Close)
	return d, db
}

type directValue struct {
	i     int64
	iOK   bool
	s, b  []byte
	sNull bool
	bNull bool
}

func readAll(ctx context.Context, d *directReads, query string, args ...any) ([]directValue, error) {
	var out []directValue
	err := d.ReadDirect(ctx, query, args, func(r sqlstore.DirectRow) error {
		var v directValue
		v.i, v.iOK = r.Int64(0)
		s, b := r.Bytes(1), r.Bytes(2)
		v.s, v.b = bytes.Clone(s), bytes.Clone(b)
		v.sNull, v.bNull = s == nil, b == nil
		out = append(out, v)
		return nil
	})
	return out, err
}

func TestDirectReadValues(t *testing.T) {
	d, _ := directFixture(t, 3, 1)
	got, err := readAll(context.Background(), d, `SELECT i, s, b FROM t WHERE k>=? ORDER BY k`, int64(0))
	if err != nil {
		t.Fatal(err)
	}
	want := []directValue{
		{i: -7, iOK: true, s: []byte("héllo"), b: []byte{0, 1, 2}},
		{s: []byte{}, b: []byte{}}, // NULL integer; empty text and blob are not NULL
		{i: 1 << 62, iOK: true, sNull: true, bNull: true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for k := range want {
		g, w := got[k], want[k]
		if g.i != w.i || g.iOK != w.iOK || !bytes.Equal(g.s, w.s) || !bytes.Equal(g.b, w.b) || g.sNull != w.sNull || g.bNull != w.bNull {
			t.Errorf("row %d: got %+v, want %+v", k, g, w)
		}
	}
}

// The store's connections and the direct reader's open the file named,
// whatever in its path a URI would read otherwise (a percent escape, a
// query, a fragment).
func TestDirectReadOpensTheNamedFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a%41b?mode=ro#x")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "d.db")
	d, _ := directFixtureAt(t, path, 3, 1)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the writer did not create the named file: %v", err)
	}
	got, err := readAll(context.Background(), d, `SELECT i, s, b FROM t WHERE k>=?`, int64(0))
	if err != nil || len(got) != 3 {
		t.Fatalf("%d rows, %v; want the writer's 3", len(got), err)
	}
}

// The request head runs its cached plan again: a read leaves no cleared
// bindings behind. Clearing them expires a statement whose plan depends
// on a parameter being 0 or 1 (the head's running schema version is one),
// and its next step would prepare it afresh.
func TestDirectRequestHeadKeepsItsPlan(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "h.db"), TouchInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if err := st.EnsureSchema(ctx, storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		q := ports.HeadQuery{Partition: "p", ClientID: "c", Running: 1, NowMs: int64(1_000 + i), PushClientID: "c", PushClientCommitID: "cc"}
		if _, err := st.TouchPartitionHead(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	reads := 0
	for _, c := range st.direct.idle {
		for q, stmt := range c.stmts {
			reads++
			if n := sqlite3.Xsqlite3_stmt_status(c.tls, stmt, sqlite3.SQLITE_STMTSTATUS_REPREPARE, 0); n != 0 {
				t.Errorf("prepared again %d times: %s", n, q)
			}
		}
	}
	if reads == 0 {
		t.Fatal("the head was not read through the direct reader")
	}
}

func TestDirectReadBindsArguments(t *testing.T) {
	d, _ := directFixture(t, 6, 1)
	tests := []struct {
		name  string
		query string
		args  []any
		rows  int
	}{
		{"int64", `SELECT i, s, b FROM t WHERE k>?`, []any{int64(3)}, 2},
		{"int", `SELECT i, s, b FROM t WHERE k<=?`, []any{1}, 2},
		{"text", `SELECT i, s, b FROM t WHERE s=?`, []any{"héllo"}, 2},
		{"empty text is not NULL", `SELECT i, s, b FROM t WHERE s=?`, []any{""}, 2},
		{"a longer text after a short one", `SELECT i, s, b FROM t WHERE s=? OR s=?`, []any{"x", string(bytes.Repeat([]byte("y"), 500))}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(context.Background(), d, tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.rows {
				t.Fatalf("%d rows, want %d", len(got), tt.rows)
			}
		})
	}
}

func TestDirectReadErrors(t *testing.T) {
	d, _ := directFixture(t, 3, 1)
	stop := errors.New("stop")
	tests := []struct {
		name   string
		query  string
		args   []any
		each   func(sqlstore.DirectRow) error
		engine bool // an SQLite error (the connection is then dropped)
		is     error
	}{
		{name: "syntax", query: `SELEC 1`, engine: true},
		{name: "no such table", query: `SELECT i FROM missing WHERE k=?`, args: []any{1}, engine: true},
		{name: "writes are refused", query: `DELETE FROM t WHERE k=?`, args: []any{1}, engine: true},
		{name: "argument count", query: `SELECT i, s, b FROM t WHERE k=?`},
		{name: "argument type", query: `SELECT i, s, b FROM t WHERE k=?`, args: []any{1.5}},
		{name: "callback error", query: `SELECT i, s, b FROM t WHERE k>=?`, args: []any{0}, each: func(sqlstore.DirectRow) error { return stop }, is: stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			each := tt.each
			if each == nil {
				each = func(sqlstore.DirectRow) error { return nil }
			}
			err := d.ReadDirect(context.Background(), tt.query, tt.args, each)
			if err == nil {
				t.Fatal("no error")
			}
			var de *directError
			if errors.As(err, &de) != tt.engine {
				t.Errorf("engine error %v, want %v: %v", !tt.engine, tt.engine, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("got %v, want %v", err, tt.is)
			}
			// The reader still answers after any failure.
			if got, err := readAll(context.Background(), d, `SELECT i, s, b FROM t WHERE k>=?`, 0); err != nil || len(got) != 3 {
				t.Fatalf("after the failure: %d rows, %v", len(got), err)
			}
		})
	}
}

func TestDirectReadContextAndClose(t *testing.T) {
	d, _ := directFixture(t, 2*directCheckEvery+1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := d.ReadDirect(ctx, `SELECT i, s, b FROM t WHERE k>=?`, []any{0}, func(sqlstore.DirectRow) error {
		if n++; n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != directCheckEvery {
		t.Fatalf("cancelled mid-read: %v after %d rows, want context.Canceled after %d", err, n, directCheckEvery)
	}
	if _, err := readAll(ctx, d, `SELECT i, s, b FROM t WHERE k>=?`, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	d.Close()
	if _, err := readAll(context.Background(), d, `SELECT i, s, b FROM t WHERE k>=?`, 0); !errors.Is(err, errDirectClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Reads share a small pool while the writer commits: every read sees a
// committed prefix, and no connection is used by two goroutines at once
// (the race detector would say).
func TestDirectReadConcurrentWithWriter(t *testing.T) {
	d, db := directFixture(t, 100, 2)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() {
		for k := 100; ctx.Err() == nil && k < 400; k++ {
			if _, err := db.Exec(`INSERT INTO t(k, i, s, b) VALUES (?, ?, 'w', x'00')`, k, k); err != nil {
				t.Error(err)
				return
			}
		}
	})
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			last := 0
			for range 20 {
				got, err := readAll(ctx, d, `SELECT k, s, b FROM t WHERE k>=? ORDER BY k`, 0)
				if err != nil {
					errs <- err
					return
				}
				for k, v := range got {
					if v.i != int64(k) {
						errs <- fmt.Errorf("row %d has key %d: not a prefix", k, v.i)
						return
					}
				}
				if len(got) < last {
					errs <- fmt.Errorf("%d rows after %d", len(got), last)
					return
				}
				last = len(got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkDirectRead compares a 1,000-row read of the catch-up range's
// shape through database/sql (modernc) and through the direct reader.
func BenchmarkDirectRead(b *testing.B) {
	d, _ := directFixture(b, 1000, 1)
	const q = `SELECT k, s, b FROM t WHERE k>=? AND k<? ORDER BY k`
	r, err := sql.Open("sqlite", DSN(Options{Path: d.path}, false))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	st, err := r.Prepare(q)
	if err != nil {
		b.Fatal(err)
	}
	var sink []byte
	b.Run("database-sql", func(b *testing.B) {
		for b.Loop() {
			rows, err := st.Query(0, 1000)
			if err != nil {
				b.Fatal(err)
			}
			var k sql.NullInt64
			var s, p sql.RawBytes
			for rows.Next() {
				if err := rows.Scan(&k, &s, &p); err != nil {
					b.Fatal(err)
				}
				sink = append(sink[:0], p...)
			}
			_ = rows.Close()
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			err := d.ReadDirect(context.Background(), q, []any{0, 1000}, func(row sqlstore.DirectRow) error {
				_, _ = row.Int64(0)
				_ = row.Bytes(1)
				sink = append(sink[:0], row.Bytes(2)...)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
