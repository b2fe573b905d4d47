package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// engine opens a fresh database of one storage engine.
type engine struct {
	name string
	open func(t *testing.T) ports.Storage
}

func engines() []engine {
	return []engine{
		{"sqlite", func(t *testing.T) ports.Storage {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "syncd.db")})
			if err != nil {
				t.Fatalf("open sqlite: %v", err)
			}
			return st
		}},
		{"postgres", func(t *testing.T) ports.Storage {
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: pgtest.DSN(t), MaxConns: 8})
			if err != nil {
				t.Fatalf("open postgres: %v", err)
			}
			return st
		}},
	}
}

// forEngine runs f against a fresh server on every engine.
func forEngine(t *testing.T, f func(t *testing.T, e engine)) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			f(t, e)
		})
	}
}

// gatedStore lets a test land an undeclared checkpoint between request
// entry and the push lock, the way a migration in another process would.
type gatedStore struct {
	ports.Storage
	version int32
	armed   atomic.Bool
	// beforePush, when set, runs as each push begins, before its
	// transaction (a test holds pushes at a barrier with it).
	beforePush atomic.Pointer[func()]
	// probes counts the far-behind probes pulls ran.
	probes atomic.Int64
	// staleBy makes every log bounds read answer a maximum this many
	// commits behind the log, as a query cache or a lagging replica
	// would (SPEC §7 forbids both on the sync path).
	staleBy atomic.Int64
}

// stale is b as a read staleBy commits behind would answer it.
func (g *gatedStore) stale(b ports.LogBounds) ports.LogBounds {
	b.MaxSeq = max(b.MaxSeq-g.staleBy.Load(), b.HorizonSeq)
	return b
}

// LogBounds passes the engine's bounds read through, staleBy behind.
func (g *gatedStore) LogBounds(ctx context.Context, partition string) (ports.LogBounds, error) {
	b, err := g.Storage.LogBounds(ctx, partition)
	return g.stale(b), err
}

// Pools passes the engine's pools through, for their metrics.
func (g *gatedStore) Pools() map[string]*sql.DB {
	if p, ok := g.Storage.(interface{ Pools() map[string]*sql.DB }); ok {
		return p.Pools()
	}
	return nil
}

// ScanTable passes the engine's table scan through (backfills read it).
func (g *gatedStore) ScanTable(ctx context.Context, partition string, q ports.TableScan) ([]commit.Row, error) {
	return g.Storage.(ports.TableScanner).ScanTable(ctx, partition, q)
}

func (g *gatedStore) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	if err := g.beforeEach(ctx, partition); err != nil {
		return err
	}
	return g.Storage.Push(ctx, partition, o, fn)
}

// beforeEach runs the test's barrier and the armed checkpoint declaration
// as a push begins.
func (g *gatedStore) beforeEach(ctx context.Context, partition string) error {
	if f := g.beforePush.Load(); f != nil {
		(*f)()
	}
	if g.armed.Swap(false) {
		if _, err := g.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: partition, Name: "projection", SchemaVersion: g.version}, time.Now().UnixMilli()); err != nil {
			return err
		}
	}
	return nil
}

// PushThenReadGate passes the engine's gated push through, after the
// same prelude as Push, so the suites run the path the server runs.
func (g *gatedStore) PushThenReadGate(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) (checkpoint.ServeGate, bool, error) {
	gs, ok := g.Storage.(ports.GatedPushStore)
	if !ok {
		return checkpoint.ServeGate{}, false, g.Push(ctx, partition, o, fn)
	}
	if err := g.beforeEach(ctx, partition); err != nil {
		return checkpoint.ServeGate{}, false, err
	}
	return gs.PushThenReadGate(ctx, partition, o, fn)
}

// TouchPartitionHead passes the engine's request head read through.
func (g *gatedStore) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	if hs, ok := g.Storage.(ports.RequestHeadStore); ok {
		h, err := hs.TouchPartitionHead(ctx, q)
		h.Bounds = g.stale(h.Bounds)
		return h, err
	}
	epoch, err := g.TouchPartition(ctx, q.Partition, q.NowMs)
	return ports.RequestHead{LogEpoch: epoch}, err
}

// ReadRecentWindow passes the engine's recent log through.
func (g *gatedStore) ReadRecentWindow(partition, logEpoch string, w ports.CommitWindow) ([]commit.Commit, bool) {
	if rr, ok := g.Storage.(ports.RecentWindowReader); ok {
		return rr.ReadRecentWindow(partition, logEpoch, w)
	}
	return nil, false
}

// CountWindowChanges passes the engine's far-behind count through; an
// engine without one sends every far-behind test to the probe.
func (g *gatedStore) CountWindowChanges(ctx context.Context, partition string, p ports.WindowProbe) (int, error) {
	if c, ok := g.Storage.(ports.WindowChangeCounter); ok {
		return c.CountWindowChanges(ctx, partition, p)
	}
	return p.Limit + 1, nil
}

// ProbeCommitWindow counts the probe and passes it through.
func (g *gatedStore) ProbeCommitWindow(ctx context.Context, partition string, p ports.WindowProbe) (ports.WindowSummary, error) {
	g.probes.Add(1)
	return g.Storage.ProbeCommitWindow(ctx, partition, p)
}

// ReadBoundsAndGate passes the engine's combined read through.
func (g *gatedStore) ReadBoundsAndGate(ctx context.Context, partition string, running int32) (ports.LogBounds, checkpoint.ServeGate, bool, error) {
	if bg, ok := g.Storage.(ports.BoundsGateReader); ok {
		b, gate, complete, err := bg.ReadBoundsAndGate(ctx, partition, running)
		return g.stale(b), gate, complete, err
	}
	b, err := g.LogBounds(ctx, partition)
	return b, checkpoint.ServeGate{}, false, err
}

// server is a running syncd on one engine.
type server struct {
	t     *testing.T
	url   string
	admin string
	store *gatedStore
	sch   *schema.Schema
	// logs holds every entry the server logged, at every level.
	logs *observer.ObservedLogs
}

type serverOpts struct {
	minWire int
	extra   []fx.Option
	config  func(*config.Config)
	// ir replaces the test schema.
	ir []byte
}

func start(t *testing.T, e engine, so serverOpts) *server {
	t.Helper()
	st := e.open(t)
	ir := ssptest.IR()
	if so.ir != nil {
		ir = so.ir
	}
	sch, err := schema.Load(ir)
	if err != nil {
		t.Fatal(err)
	}
	gs := &gatedStore{Storage: st, version: sch.Version}
	dir := t.TempDir()
	irPath := filepath.Join(dir, "schema.ir.json")
	if err := os.WriteFile(irPath, ir, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownDelay = 0
	// Suites deliver one commit 100 times at once; the in-flight bound has
	// its own tests (adapters/httpapi) and must not refuse them here.
	cfg.HTTP.MaxInflightRequests = 1024
	cfg.Schema, cfg.Auth = irPath, config.AuthDev
	cfg.Database = filepath.Join(dir, "unused.db")
	if so.minWire != 0 {
		cfg.Round.MinWireVersion = so.minWire
	}
	if so.config != nil {
		so.config(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var ready *platform.Readiness
	var listeners *platform.Listeners
	opts := append([]fx.Option{
		fx.Provide(func() ports.Storage { return gs }, func() ports.SchemaStore { return gs }),
		fx.Populate(&ready, &listeners),
	}, so.extra...)
	obs, logs := observer.New(zap.DebugLevel)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, obs)
	}))
	a := fx.New(app.Options(cfg, platform.BuildInfo{}, log, opts...))
	startReady(t, a, ready, func(error) { _ = st.Close() })
	return &server{t: t, url: "http://" + listeners.Addr(platform.ServerSync).String() + "/sync",
		admin: "http://" + listeners.Addr(platform.ServerAdmin).String(), store: gs, sch: sch, logs: logs}
}

// call is one HTTP exchange.
type call struct {
	actor, partition string
	scopes           string // X-Syncd-Scopes JSON, "" for none
	contentType      string // "" → the sync content type
	encoding         string // request Content-Encoding: "", "gzip"
	acceptEncoding   string
	bearer           string // Authorization: Bearer token
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (s *server) post(c call, body []byte) reply {
	s.t.Helper()
	if c.encoding == "gzip" {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
	}
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	ct := c.contentType
	if ct == "" {
		ct = httpapi.ContentTypeSync
	}
	req.Header.Set("Content-Type", ct)
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if c.actor == "" {
		c.actor = "alice"
	}
	req.Header.Set("X-Syncd-Actor", c.actor)
	if c.partition != "" {
		req.Header.Set("X-Syncd-Partition", c.partition)
	}
	if c.scopes != "" {
		req.Header.Set("X-Syncd-Scopes", c.scopes)
	}
	if c.encoding != "" {
		req.Header.Set("Content-Encoding", c.encoding)
	}
	// An explicit Accept-Encoding keeps the client from decoding for us.
	ae := c.acceptEncoding
	if ae == "" {
		ae = "identity"
	}
	req.Header.Set("Accept-Encoding", ae)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST /sync: %v", err)
	}
	defer resp.Body.Close()
	var rd io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = zr
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// sync posts a request and decodes a 200 SSP2 response.
func (s *server) sync(c call, r ssptest.Req) (ssptest.Resp, []byte) {
	s.t.Helper()
	rep := s.post(c, r.Encode(s.t))
	if rep.status != http.StatusOK || rep.header.Get("Content-Type") != httpapi.ContentTypeSync {
		s.t.Fatalf("status %d (%s): %s", rep.status, rep.header.Get("Content-Type"), rep.body)
	}
	return ssptest.DecodeResponse(s.t, rep.body), rep.body
}

// jsonError expects a §10.1 JSON error with status and code.
func (s *server) jsonError(rep reply, status int, code syncerr.Code) map[string]any {
	s.t.Helper()
	var body map[string]any
	if err := json.Unmarshal(rep.body, &body); err != nil || rep.status != status || body["code"] != string(code) {
		s.t.Fatalf("want %d %s, got %d %s", status, code, rep.status, rep.body)
	}
	return body
}

// epoch acquires the partition's log epoch as a fresh client would.
func (s *server) epoch(c call) string {
	s.t.Helper()
	resp, _ := s.sync(c, ssptest.Req{ClientID: "probe-" + c.actor, SchemaVersion: s.sch.Version, NoEpoch: true, Pull: true})
	if resp.Header == nil || !resp.Header.ResetRequired || resp.Header.LogEpoch == "" {
		s.t.Fatalf("epoch acquisition: %+v", resp.Msg.Frames)
	}
	return resp.Header.LogEpoch
}

// noLoggedText fails when any log entry so far (message or field) contains
// one of the fragments, case-insensitively.
func (s *server) noLoggedText(fragments ...string) {
	s.t.Helper()
	for _, e := range s.logs.All() {
		line := strings.ToLower(fmt.Sprint(e.Message, " ", e.ContextMap()))
		for _, f := range fragments {
			if strings.Contains(line, strings.ToLower(f)) {
				s.t.Fatalf("log entry carries %q: %s", f, line)
			}
		}
	}
}

// startReady starts the assembled a and waits, within 30 seconds, until
// ready says so. At cleanup it stops a (again within 30 seconds) and hands
// stopped what Stop returned.
func startReady(t *testing.T, a *fx.App, ready *platform.Readiness, stopped func(error)) {
	t.Helper()
	if err := a.Err(); err != nil {
		t.Fatalf("assemble: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped(a.Stop(ctx))
	})
	for !ready.Ready() {
		if ctx.Err() != nil {
			t.Fatalf("not ready: %+v", ready.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
