package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/seed"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/ports"
)

// startServer runs syncd in process on SQLite with the tasks fixture and
// returns its sync base URL.
func startServer(t *testing.T, minWire, seedRows int) string {
	t.Helper()
	schemaPath := sharedFixture(t)
	return startServerWith(t, schemaPath, minWire, seedRows)
}

// startServerWith is startServer serving the schema at schemaPath, its
// configuration changed by each of configure.
func startServerWith(t *testing.T, schemaPath string, minWire, seedRows int, configure ...func(*config.Config)) string {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(dir, "syncd.db")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownDelay = 0
	cfg.Schema, cfg.Auth = schemaPath, config.AuthDev
	cfg.Database = filepath.Join(dir, "syncd.db")
	cfg.Round.MinWireVersion = minWire
	for _, f := range configure {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var ready *platform.Readiness
	var listeners *platform.Listeners
	a := fx.New(app.Options(cfg, platform.BuildInfo{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		fx.Provide(func() ports.Storage { return st }, func() ports.SchemaStore { return st }),
		fx.Populate(&ready, &listeners)))
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = a.Stop(ctx)
		_ = st.Close()
	})
	for !ready.Ready() {
		if ctx.Err() != nil {
			t.Fatalf("not ready: %+v", ready.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	sch, err := schema.LoadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if seedRows == 0 {
		return "http://" + listeners.Addr(platform.ServerSync).String()
	}
	if _, err := seed.Run(ctx, st, seed.Options{Schema: sch, Table: "tasks", Value: "storm", Rows: seedRows, Batch: 500,
		Bulk: func(ctx context.Context, partition, table string, rows []ports.RowWrite, b seed.Batch) (int64, error) {
			return st.SeedRows(ctx, partition, table, rows, sqlstore.SeedOptions{WriterVersion: b.WriterVersion,
				Batch: len(rows), CreatedAtMs: b.CreatedAtMs, ActorID: b.ActorID, ClientID: b.ClientID, ClientCommitPrefix: b.ClientCommitID})
		}}); err != nil {
		t.Fatal(err)
	}
	return "http://" + listeners.Addr(platform.ServerSync).String()
}

// TestScenarios runs every scenario briefly against an in-process server:
// each must finish by its request budget and record no error.
func TestScenarios(t *testing.T) {
	url, url2, fresh := startServer(t, 3, 3000), startServer(t, 2, 0), startServer(t, 3, 0)
	for _, tc := range []struct {
		name     string
		args     []string
		segments bool // segment downloads expected
		// want checks the result beyond "no error" (nil: nothing more).
		want func(r Result) string
	}{
		{"push-pull", []string{"--vus", "3", "--requests", "60", "--ops", "2"}, false, nil},
		{"bootstrap-storm", []string{"--vus", "3", "--requests", "30", "--dataset", "3000", "--limit-rows", "1000", "--max-pages", "2"}, false, nil},
		{"bootstrap-storm", []string{"--vus", "2", "--requests", "10", "--dataset", "3000", "--limit-rows", "5000", "--external-rows=false"}, false, nil},
		{"bootstrap-storm", []string{"--vus", "2", "--requests", "6", "--dataset", "3000", "--limit-rows", "4000", "--inline-rows=false"}, true, nil},
		{"bootstrap-storm", []string{"--vus", "2", "--requests", "6", "--dataset", "3000", "--sqlite-images"}, true, func(r Result) string {
			// Every bootstrap is one imported image (3000 rows, more than a page).
			if r.Notes["imagesImported"] == nil || r.Notes["imagesImported"].(float64) != float64(op(r, "bootstrap").Count) {
				return "not one image per bootstrap"
			}
			return ""
		}},
		{"catch-up", []string{"--vus", "2", "--requests", "12", "--dataset", "300", "--limit-commits", "100"}, false, nil},
		// On a log whose first commit is the writer's (cursor 0 before it).
		{"catch-up", []string{"--vus", "1", "--requests", "3", "--dataset", "250", "--url", fresh}, false, nil},
		{"mixed-soak", []string{"--vus", "3", "--requests", "60"}, false, nil},
		{"push-pull", []string{"--vus", "4", "--requests", "40", "--partitions", "2"}, false, nil},
		{"maintenance-churn", []string{"--vus", "2", "--requests", "40"}, false, nil},
		{"push-pull", []string{"--vus", "2", "--requests", "20", "--wire", "2", "--expect-fail"}, false, nil},
		{"push-pull", []string{"--vus", "2", "--requests", "20", "--wire", "2", "--url", url2}, false, nil},
		{"mixed-soak", []string{"--vus", "2", "--requests", "30", "--wire", "2", "--url", url2}, false, nil},
		{"push-pull", []string{"--vus", "2", "--requests", "30", "--transport", "ws"}, false, nil},
		{"mixed-soak", []string{"--vus", "2", "--requests", "30", "--transport", "ws", "--wire", "2", "--url", url2}, false, nil},
		{"bootstrap-storm", []string{"--vus", "2", "--requests", "10", "--dataset", "3000", "--limit-rows", "1000", "--transport", "ws"}, false, nil},
		{"reconnect-storm", []string{"--vus", "4", "--requests", "60"}, false, func(r Result) string {
			// Every step redials: more connects than clients, and every
			// neighbour's replica compared.
			if op(r, "connect").Count <= 4 || r.Notes["convergedRows"] == nil || r.Notes["convergedRows"].(float64) == 0 {
				return "no reconnects or no converged rows"
			}
			return ""
		}},
		{"propagation", []string{"--vus", "2", "--requests", "40", "--idle-sockets", "5"}, false, func(r Result) string {
			if n := op(r, "propagation").Count; n == 0 || n != op(r, "push").Count || r.Notes["idleSockets"].(float64) != 5 {
				return "not one propagation per push"
			}
			return ""
		}},
		{"engine-commit", []string{"--vus", "3", "--requests", "30", "--engine-read", "--engine-database", filepath.Join(t.TempDir(), "engine.db")}, false, func(r Result) string {
			if op(r, "commit").Count != 30 || op(r, "read").Count != 30 || r.Notes["engine"] != "sqlite" {
				return "not one read per commit on sqlite"
			}
			return ""
		}},
		// Two servers that share no database: each pair's receiver is on
		// the other one, so no commit ever reaches it.
		{"propagation", []string{"--vus", "1", "--requests", "6", "--timeout", "2s", "--max-errors", "1", "--url", url + "," + fresh, "--expect-fail"}, false, nil},
		{"propagation", []string{"--vus", "1", "--requests", "20", "--transport", "ws"}, false, func(r Result) string {
			if n := op(r, "propagation").Count; n == 0 || n != op(r, "push").Count {
				return "not one propagation per push"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--url", url, "--schema", sharedFixture(t), "--duration", "2m", "--json", "-"}, tc.args...)
			expectFail := false
			if args[len(args)-1] == "--expect-fail" {
				args, expectFail = args[:len(args)-1], true
			}
			var out, errb bytes.Buffer
			code := run0(context.Background(), append(args, tc.name), &out, &errb)
			if expectFail {
				if code != 1 {
					t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errb.String())
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
			}
			js := out.String()[strings.Index(out.String(), "\n["):]
			var res []Result
			if err := json.Unmarshal([]byte(js), &res); err != nil {
				t.Fatalf("json: %v\n%s", err, js)
			}
			if len(res) != 1 || res[0].Errors != 0 || res[0].Requests == 0 {
				t.Fatalf("results: %+v", res)
			}
			if tc.segments && res[0].Notes["segmentDownloads"] == nil {
				t.Fatalf("no segment downloads: %+v", res[0])
			}
			if tc.want != nil {
				if why := tc.want(res[0]); why != "" {
					t.Fatalf("%s: %+v", why, res[0])
				}
			}
		})
	}
}

// TestBlobsScenario: blobs of a few sizes go up and come back through a
// server serving the bench schema, counted by kind.
func TestBlobsScenario(t *testing.T) {
	schemaPath := filepath.FromSlash("../../bench/blobs.ir.json")
	url := startServerWith(t, schemaPath, 3, 0)
	for _, size := range []string{"1", "70000", "1048576"} {
		var out, errb bytes.Buffer
		code := run0(context.Background(), []string{"--url", url, "--schema", schemaPath, "--vus", "2", "--requests", "4",
			"--blob-bytes", size, "--json", "-", "blobs"}, &out, &errb)
		if code != 0 {
			t.Fatalf("--blob-bytes %s: exit %d\n%s%s", size, code, out.String(), errb.String())
		}
		var res []Result
		if err := json.Unmarshal([]byte(out.String()[strings.Index(out.String(), "\n["):]), &res); err != nil {
			t.Fatal(err)
		}
		r := res[0]
		n, _ := strconv.ParseInt(size, 10, 64)
		if r.Errors != 0 || op(r, "upload").Count != 4 || op(r, "download").Count != 4 || op(r, "download").Bytes != 4*n || r.Notes["downloadMBPerSecond"] == nil {
			t.Fatalf("--blob-bytes %s: %+v", size, r)
		}
	}
	var out, errb bytes.Buffer
	if code := run0(context.Background(), []string{"--url", url, "--requests", "1", "blobs"}, &out, &errb); code == 0 {
		t.Fatal("blobs ran on a table without a blob_ref column")
	}
}

// TestOperationsScenario: the clients call the bench's registered query
// beside a push mix, every answer checked; a server without the query
// fails the run with its catalog code.
func TestOperationsScenario(t *testing.T) {
	schemaPath := sharedFixture(t)
	ops := filepath.FromSlash("../../bench/operations.json")
	url := startServerWith(t, schemaPath, 3, 0, func(c *config.Config) { c.Operations = ops })
	bare := startServerWith(t, schemaPath, 3, 0)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want func(r Result) string
	}{
		{"queries beside pushes", []string{"--url", url, "--vus", "2", "--requests", "40", "--rows-per-client", "30", "--write-every", "4"}, 0,
			func(r Result) string {
				q := op(r, "query")
				if q.Count == 0 || op(r, "push").Count == 0 || q.Items != int64(q.Count)*30 || q.Count+op(r, "push").Count+op(r, "pull").Count != r.Requests {
					return "not a query and push mix of 30-row answers"
				}
				if op(r, "seed").Items != 60 || r.Notes["operation"] != "tasks.byProject" {
					return "not 30 seeded rows per client"
				}
				return ""
			}},
		{"queries only", []string{"--url", url, "--vus", "1", "--requests", "10"}, 0, func(r Result) string {
			if op(r, "query").Count != 9 || op(r, "push").Count != 0 || op(r, "query").Items != 9*100 {
				return "not 9 queries of 100 rows after the epoch"
			}
			return ""
		}},
		{"a server without the query", []string{"--url", bare, "--vus", "1", "--requests", "5", "--max-errors", "1"}, 1, func(r Result) string {
			if r.ErrorCodes["operation.unknown"] == 0 {
				return "no operation.unknown"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run0(context.Background(), append([]string{"--schema", schemaPath, "--duration", "2m", "--json", "-"}, append(tc.args, "operations")...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errb.String())
			}
			var res []Result
			if err := json.Unmarshal([]byte(out.String()[strings.Index(out.String(), "\n["):]), &res); err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || (tc.code == 0 && res[0].Errors != 0) {
				t.Fatalf("results: %+v", res)
			}
			if why := tc.want(res[0]); why != "" {
				t.Fatalf("%s: %+v", why, res[0])
			}
		})
	}
}

// TestMaintenanceChurnPrunesToTheFloors: with the tests' retention
// (--prune-to-active-floors-UNSAFE-for-tests), a server pruning every 20
// ms under maintenance-churn removes commits while the clients push, and
// the laggards meet sync.cursor_expired and bootstrap again; with the
// normative floors (the newest 1,000 commits kept) the same run prunes
// nothing.
func TestMaintenanceChurnPrunesToTheFloors(t *testing.T) {
	schemaPath := sharedFixture(t)
	for _, tc := range []struct {
		name   string
		unsafe bool
	}{{"to the active floors", true}, {"normative floors", false}} {
		t.Run(tc.name, func(t *testing.T) {
			url := startServerWith(t, schemaPath, 3, 0, func(c *config.Config) {
				c.Retention.PruneInterval = 20 * time.Millisecond
				c.Pull.ClientRecordRefresh = 0 // every pull moves the floor
				if tc.unsafe {
					c.Retention.ToActiveFloorsUnsafe = true
					c.Retention.ActiveWindow = time.Minute
				}
			})
			var out, errb bytes.Buffer
			code := run0(context.Background(), []string{"--url", url, "--schema", schemaPath, "--duration", "2m", "--json", "-",
				"--vus", "4", "--requests", "300", "maintenance-churn"}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
			}
			js := out.String()[strings.Index(out.String(), "\n["):]
			var res []Result
			if err := json.Unmarshal([]byte(js), &res); err != nil || len(res) != 1 || res[0].Errors != 0 {
				t.Fatalf("results %+v, %v", res, err)
			}
			resets := op(res[0], "reset").Count
			t.Logf("%d resets, %d bootstraps", resets, op(res[0], "bootstrap").Count)
			if tc.unsafe && (resets == 0 || op(res[0], "bootstrap").Count <= 4) {
				t.Fatal("no sync.cursor_expired resets and re-bootstraps under pruning")
			}
			if !tc.unsafe && resets != 0 {
				t.Fatalf("%d resets with the normative floors", resets)
			}
		})
	}
}

func op(r Result, kind string) OpResult {
	for _, o := range r.Ops {
		if o.Kind == kind {
			return o
		}
	}
	return OpResult{}
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{}, {"nope"}, {"--wire", "4", "push-pull"}, {"--vus", "0", "push-pull"}, {"-H", "bad", "push-pull"},
		{"--transport", "udp", "push-pull"}, {"--idle-sockets", "-1", "propagation"}, {"engine-commit"},
		{"--write-every", "-1", "operations"}, {"--operation", "", "operations"}, {"--url", " , ", "push-pull"}} {
		if code := run0(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestURLList: --url takes several servers, and the clients take them in
// turn.
func TestURLList(t *testing.T) {
	o, _, err := parse([]string{"--url", "http://a:1, http://b:2/m,", "push-pull"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{o: o}
	got := []string{e.baseURL(0), e.baseURL(1), e.baseURL(2)}
	if want := []string{"http://a:1", "http://b:2/m", "http://a:1"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("clients 0..2 on %q, want %q", got, want)
	}
}

// sharedFixture is the tasks load fixture beside the repository, the
// schema of the figures in bench/RESULTS.md (the test skips, or fails
// under SYNCD_REQUIRE_SHARED=1, when it is not there).
func sharedFixture(t *testing.T) string {
	t.Helper()
	return vectortest.Fixture(t, "fixtures/tasks.ir.json")
}

// Bare, syncload loads what a bare `syncd serve` serves: the todos demo.
func TestDefaultsMatchABareServer(t *testing.T) {
	fx, err := loadFixture("", "")
	if err != nil {
		t.Fatal(err)
	}
	if fx.table.Name != "lists" || fx.variable != "owner_id" {
		t.Fatalf("default table %s scoped by %s", fx.table.Name, fx.variable)
	}
	if _, err := loadFixture("", "nope"); err == nil {
		t.Fatal("an unknown table was accepted")
	}
}

// TestEngineHTTP: engine-serve answers engine-http's commits and reads
// (one read back per commit, each the value committed), refuses a request
// without an id, answers 404 for an id never committed, and stops cleanly
// with its context.
func TestEngineHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var serr, errb bytes.Buffer // serr is engine-serve's, read after it ended
	done := make(chan int, 1)
	go func() {
		done <- engineServe(ctx, []string{"--listen", "127.0.0.1:0", "--engine-database", filepath.Join(t.TempDir(), "floor.db")}, pw, &serr)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		<-done
		t.Fatalf("engine-serve: %v %s", err, serr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "engine-serve: listening on "))
	res, err := http.Post(url+"/engine/commit", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("commit without an id: status %d, want 400", res.StatusCode)
	}
	res, err = http.Get(url + "/engine/read?id=999")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("read of an id never committed: status %d, want 404", res.StatusCode)
	}
	var out bytes.Buffer
	if code := run0(context.Background(), []string{"--url", url, "--vus", "2", "--requests", "20", "--duration", "2m", "--json", "-", "engine-http"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	var r []Result
	if err := json.Unmarshal([]byte(out.String()[strings.Index(out.String(), "\n["):]), &r); err != nil {
		t.Fatal(err)
	}
	if len(r) != 1 || r[0].Errors != 0 || op(r[0], "commit").Count != 20 || op(r[0], "read").Count != 20 {
		t.Fatalf("results: %+v", r)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("engine-serve exit %d: %s", code, serr.String())
	}
}
