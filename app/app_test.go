package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func testConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Database = filepath.Join(t.TempDir(), "syncd.db")
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.ShutdownDelay = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fakeStore is a ports.SchemaStore whose answer the test controls.
type fakeStore struct {
	mu    sync.Mutex
	err   error
	calls int
	decls []cpdomain.Declaration
}

func (f *fakeStore) EnsureSchema(_ context.Context, _ *schema.Schema, decls []cpdomain.Declaration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.decls = decls
	return f.err
}

type harness struct {
	app       *fxtest.App
	listeners *platform.Listeners
	readiness *platform.Readiness
}

func start(t *testing.T, cfg config.Config, extra ...fx.Option) *harness {
	t.Helper()
	h := &harness{}
	opts := append([]fx.Option{fx.Populate(&h.listeners, &h.readiness)}, extra...)
	h.app = fxtest.New(t, app.Options(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t), opts...))
	h.app.RequireStart()
	return h
}

func (h *harness) url(name, path string) string {
	return "http://" + h.listeners.Addr(name).String() + path
}

// waitPhase polls until the readiness phase is want (no timing assertion:
// the deadline only bounds a hung test).
func waitPhase(t *testing.T, r *platform.Readiness, want platform.Phase) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.Phase() != want {
		if time.Now().After(deadline) {
			t.Fatalf("phase %s, want %s (status %+v)", r.Phase(), want, r.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFailed waits until the current phase has recorded an error.
func waitFailed(t *testing.T, r *platform.Readiness) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.Status().Error == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no error recorded (status %+v)", r.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeEmbeddedDefault(t *testing.T) {
	h := start(t, testConfig(t))
	waitPhase(t, h.readiness, platform.PhaseReady)

	code, body := get(t, "GET", h.url(platform.ServerAdmin, "/livez"))
	if code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("livez %d %s", code, body)
	}
	code, body = get(t, "GET", h.url(platform.ServerAdmin, "/readyz"))
	var st platform.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 || !st.Ready || st.Phase != platform.PhaseReady || st.SchemaVersion != 1 {
		t.Fatalf("readyz %d %s", code, body)
	}
	code, body = get(t, "GET", h.url(platform.ServerAdmin, "/metrics"))
	for _, want := range []string{"syncd_ready 1", `syncd_readiness_phase{phase="ready"} 1`, "go_goroutines", "syncd_build_info"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("metrics lacks %q (%d)", want, code)
		}
	}
	if code, _ := get(t, "GET", h.url(platform.ServerAdmin, "/debug/pprof/")); code != 404 {
		t.Fatalf("pprof without --pprof: %d", code)
	}
	if code, _ := get(t, "GET", h.url(platform.ServerSync, "/debug/pprof/")); code != 404 {
		t.Fatalf("pprof on the sync listener: %d", code)
	}
	code, body = get(t, "POST", h.url(platform.ServerSync, "/sync"))
	if code != 404 || !strings.Contains(body, `"code":"sync.not_found"`) {
		t.Fatalf("sync %d %s", code, body)
	}
	_, body = get(t, "GET", h.url(platform.ServerAdmin, "/metrics"))
	if !strings.Contains(body, `syncd_http_requests_total{code="sync.not_found",method="POST",route="/sync",status="404"} 1`) || !strings.Contains(body, "syncd_http_requests_in_flight 0") {
		t.Fatal("request not counted")
	}
	h.app.RequireStop()
	if h.readiness.Ready() {
		t.Fatal("still ready after stop")
	}
}

func TestMountAndRouteGroup(t *testing.T) {
	cfg := testConfig(t)
	cfg.Mount = "/api"
	route := fx.Provide(fx.Annotate(func() platform.RouteHandler {
		return platform.RouteHandler{Route: httpapi.RouteSync, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		})}
	}, fx.ResultTags(`group:"syncd.routes"`)))
	h := start(t, cfg, route)
	waitPhase(t, h.readiness, platform.PhaseReady)
	if code, _ := get(t, "POST", h.url(platform.ServerSync, "/api/sync")); code != 204 {
		t.Fatalf("provided route: %d", code)
	}
	if code, body := get(t, "GET", h.url(platform.ServerSync, "/api/segments/s1")); code != 404 || !strings.Contains(body, `"code":"sync.not_found"`) {
		t.Fatalf("segments: %d %s", code, body)
	}
	if code, _ := get(t, "POST", h.url(platform.ServerSync, "/sync")); code != 404 {
		t.Fatalf("unmounted path: %d", code)
	}
	h.app.RequireStop()
}

func TestStorageNotReady(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		phase   platform.Phase
		details string
	}{
		{"pending checkpoint", syncerr.New(syncerr.StorageCheckpointIncomplete).
			WithDetails(map[string]string{"partition": "p1", "projection": "todo_counts"}),
			platform.PhaseBackfillCheckpoint, `"details":{"partition":"p1","projection":"todo_counts"}`},
		{"layout mismatch", syncerr.New(syncerr.StorageStoredLayoutMismatch), platform.PhaseStorageMigration, ""},
		{"plain error", errors.New("connection refused"), platform.PhaseStorageMigration, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{err: tt.err}
			decls := []cpdomain.Declaration{{Partition: "p1", Name: "todo_counts", SchemaVersion: 1}}
			h := start(t, testConfig(t),
				fx.Supply(fx.Annotate(store, fx.As(new(ports.SchemaStore)))),
				fx.Supply(decls))
			waitPhase(t, h.readiness, tt.phase)
			// The phase is entered before the storage step runs; wait for
			// its refusal to be recorded.
			waitFailed(t, h.readiness)

			code, body := get(t, "GET", h.url(platform.ServerAdmin, "/readyz"))
			var st platform.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil || code != 503 || st.Ready || st.Phase != tt.phase || st.Error == nil {
				t.Fatalf("readyz %d %s", code, body)
			}
			code, body = get(t, "POST", h.url(platform.ServerSync, "/sync"))
			if code != 503 || !strings.Contains(body, `"code":"sync.schema_not_ready"`) || !strings.Contains(body, tt.details) {
				t.Fatalf("sync %d %s", code, body)
			}
			if tt.details == "" && strings.Contains(body, "details") {
				t.Fatalf("details leaked: %s", body)
			}
			store.mu.Lock()
			if len(store.decls) != 1 {
				t.Errorf("declarations not passed: %v", store.decls)
			}
			store.mu.Unlock()
			h.app.RequireStop()
		})
	}
}

func TestBadSchemaFailsStart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.ir.json")
	if err := os.WriteFile(p, []byte(`{"irVersion":1,"schemaVersion":1,"schemaVersions":[{"version":1}],"tables":[{"name":"t","primaryKey":"id","columns":[{"name":"id","type":"float","nullable":false}],"scopes":["a:{id}"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Schema = p
	a := fx.New(app.Options(cfg, platform.ReadBuildInfo("test"), zap.NewNop()), fx.NopLogger)
	err := a.Err()
	var ce *schema.CompileError
	if !errors.As(err, &ce) || ce.Reason != schema.ReasonPrimaryKeyType || syncerr.CodeOf(err) != syncerr.SchemaInvalid {
		t.Fatalf("err = %v", err)
	}
	if code := app.Run(cfg, platform.ReadBuildInfo("test"), zap.NewNop()); code != 1 {
		t.Fatalf("Run = %d", code)
	}
}

// An older schema the current one is not compatible with stops the
// start before storage opens (SPEC §9): the refusal names the column and
// no database file is created.
func TestIncompatibleSchemaWindowFailsStart(t *testing.T) {
	dir := t.TempDir()
	ir := func(v int, extra string) string {
		return fmt.Sprintf(`{"irVersion":1,"schemaVersion":%d,"schemaVersions":[{"version":%d}],"tables":[{"name":"t","primaryKey":"id",`+
			`"columns":[{"name":"id","type":"string","nullable":false}%s],"scopes":["a:{id}"]}]}`, v, v, extra)
	}
	cur, old := filepath.Join(dir, "v2.json"), filepath.Join(dir, "v1.json")
	if err := os.WriteFile(cur, []byte(ir(2, `,{"name":"n","type":"integer","nullable":false}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte(ir(1, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Schema, cfg.SchemaWindow.Older = cur, []string{old}
	a := fx.New(app.Options(cfg, platform.ReadBuildInfo("test"), zap.NewNop()), fx.NopLogger)
	var we *schema.WindowError
	if err := a.Err(); !errors.As(err, &we) || we.Column != "n" || we.Reason != schema.ReasonWindowAppendedNotNull || syncerr.CodeOf(err) != syncerr.SchemaInvalid {
		t.Fatalf("err = %v", err)
	}
	if code := app.Run(cfg, platform.ReadBuildInfo("test"), zap.NewNop()); code != 1 {
		t.Fatalf("Run = %d", code)
	}
	if _, err := os.Stat(cfg.Database); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the database was opened: %v", err)
	}
}

func TestBusyPortFailsStart(t *testing.T) {
	h := start(t, testConfig(t))
	cfg := testConfig(t)
	cfg.Listen = h.listeners.Addr(platform.ServerAdmin).String()
	a := fx.New(app.Options(cfg, platform.ReadBuildInfo("test"), zap.NewNop()), fx.NopLogger)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Start(ctx); err == nil {
		_ = a.Stop(ctx)
		t.Fatal("started on a busy port")
	}
	h.app.RequireStop()
}

// TestCheckpointProgressHook: the hook a host registers is the one the
// graph's checkpoint runner is given.
func TestCheckpointProgressHook(t *testing.T) {
	var heard []checkpoint.Phase
	var got wiring.CheckpointProgress
	fxtest.New(t, app.WithCheckpointProgress(func(p checkpoint.Progress) { heard = append(heard, p.Phase) }),
		fx.Populate(&got)).RequireStart().RequireStop()
	got(checkpoint.Progress{Phase: checkpoint.PhaseScan})
	if len(heard) != 1 || heard[0] != checkpoint.PhaseScan {
		t.Fatalf("host hook heard %v", heard)
	}
}
