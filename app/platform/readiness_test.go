package platform

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/testclock"
)

func TestPhaseOf(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		compile bool
		want    Phase
	}{
		{"none", nil, false, PhaseReady},
		{"compile", errors.New("x"), true, PhaseSchemaCompile},
		{"checkpoint", syncerr.New(syncerr.StorageCheckpointIncomplete), false, PhaseBackfillCheckpoint},
		{"wrapped checkpoint", errors.Join(errors.New("ensure"), syncerr.New(syncerr.StorageCheckpointIncomplete)), false, PhaseBackfillCheckpoint},
		{"layout", syncerr.New(syncerr.StoragePhysicalLayoutMismatch), false, PhaseStorageMigration},
		{"too new", syncerr.New(syncerr.StorageSchemaTooNew), false, PhaseStorageMigration},
		{"plain", errors.New("io"), false, PhaseStorageMigration},
	}
	for _, tt := range tests {
		if got := PhaseOf(tt.err, tt.compile); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

type stepStore struct{ errs []error }

func (s *stepStore) EnsureSchema(context.Context, *schema.Schema, []checkpoint.Declaration) error {
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func TestPreparerPhases(t *testing.T) {
	r := NewReadiness(NewClock())
	var seen []Phase
	r.OnChange(func(p Phase) { seen = append(seen, p) })
	store := &stepStore{errs: []error{
		errors.New("database is locked"),
		syncerr.New(syncerr.StorageCheckpointIncomplete),
	}}
	s, err := CompileSchema(NewSchemaSource(config.Default()), r)
	if err != nil {
		t.Fatal(err)
	}
	p := &Preparer{Store: store, Readiness: r, Log: zap.NewNop()}
	if err := p.Run(context.Background(), s, Backoff{Initial: time.Microsecond, Max: time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	want := []Phase{PhaseSchemaCompile, PhaseStorageMigration, PhaseBackfillCheckpoint, PhaseStorageMigration, PhaseReady}
	if len(seen) != len(want) {
		t.Fatalf("phases %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("phases %v, want %v", seen, want)
		}
	}
	// Prepared, but nobody can connect yet: not ready.
	if st := r.Status(); r.Schema() == nil || st.Ready || st.Reason != ReasonListenerUnbound || r.ServeError() != nil || st.Error != nil {
		t.Fatalf("ready before the sync listener: %+v", st)
	}
	r.SetListening()
	if r.Schema() == nil || !r.Ready() || r.ServeError() != nil || r.Status().Error != nil {
		t.Fatalf("not ready: %+v", r.Status())
	}
	r.Drain()
	// Draining turns /readyz off while the sync API keeps serving.
	if st := r.Status(); r.Ready() || r.ServeError() != nil || !st.Draining || st.Reason != ReasonDraining {
		t.Fatalf("drain: %+v", st)
	}
}

// TestReadinessDependencyCheck: a dependency that goes down turns /readyz
// 503 naming it, results are reused within the TTL, and readiness returns
// by itself once the probe passes again.
func TestReadinessDependencyCheck(t *testing.T) {
	clock := testclock.New(time.Unix(1_000_000, 0))
	var mu sync.Mutex
	probes, down := 0, error(nil)
	r := NewReadiness(NewClock())
	r.AddCheck(Check{Name: "storage", Now: clock.Now, TTL: time.Second, Probe: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		probes++
		return down
	}})
	setDown := func(err error) { mu.Lock(); down = err; mu.Unlock() }
	count := func() int { mu.Lock(); defer mu.Unlock(); return probes }

	// Not probed while starting: the phases report storage themselves.
	if st := r.Status(); st.Ready || st.Reason != string(PhaseSchemaCompile) || count() != 0 {
		t.Fatalf("starting: %+v, %d probes", st, count())
	}
	r.enter(PhaseReady, nil)
	r.SetListening()
	steps := []struct {
		name    string
		down    error
		advance time.Duration
		ready   bool
		probes  int
	}{
		{"up", nil, 0, true, 1},
		{"down within the TTL: cached", errors.New("connection refused"), 500 * time.Millisecond, true, 1},
		{"down after the TTL", errors.New("connection refused"), 500 * time.Millisecond, false, 2},
		{"still down", errors.New("connection refused"), time.Second, false, 3},
		{"back up within the TTL: cached", nil, 999 * time.Millisecond, false, 3},
		{"back up", nil, time.Millisecond, true, 4},
	}
	for _, s := range steps {
		setDown(s.down)
		clock.Advance(s.advance)
		st := r.Status()
		if st.Ready != s.ready || count() != s.probes {
			t.Fatalf("%s: ready %v after %d probes, want %v after %d: %+v", s.name, st.Ready, count(), s.ready, s.probes, st)
		}
		cs := st.Checks["storage"]
		if s.ready {
			if st.Reason != "" || len(st.Down) != 0 || !cs.OK || cs.Error != nil {
				t.Fatalf("%s: %+v", s.name, st)
			}
			continue
		}
		if st.Reason != ReasonDependencyDown || len(st.Down) != 1 || st.Down[0] != "storage" || cs.OK ||
			cs.Error == nil || cs.Error.Message != "connection refused" || r.ServeError() != nil {
			t.Fatalf("%s: %+v", s.name, st)
		}
	}
	// Draining is reported first and probes nothing.
	r.Drain()
	clock.Advance(time.Hour)
	if st := r.Status(); st.Ready || st.Reason != ReasonDraining || count() != 4 {
		t.Fatalf("draining: %+v, %d probes", st, count())
	}
}

func TestPreparerStopsOnCancel(t *testing.T) {
	r := NewReadiness(NewClock())
	s, err := CompileSchema(NewSchemaSource(config.Default()), r)
	if err != nil {
		t.Fatal(err)
	}
	p := &Preparer{Store: &stepStore{errs: []error{errors.New("down")}}, Readiness: r, Log: zap.NewNop()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx, s, DefaultBackoff()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if r.Phase() != PhaseStorageMigration || r.Status().Error == nil {
		t.Fatalf("status %+v", r.Status())
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 5 * time.Second}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if got := b.Delay(i); got != want {
			t.Errorf("Delay(%d) = %v, want %v", i, got, want)
		}
	}
}

func TestBuildInfoString(t *testing.T) {
	s := ReadBuildInfo("v1.2.3").String()
	for _, want := range []string{"syncd v1.2.3", "go:", "platform:", "SSP2 wire 3"} {
		if !strings.Contains(s, want) {
			t.Errorf("version output lacks %q:\n%s", want, s)
		}
	}
}

func TestServeErrorDetails(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		details string
	}{
		{"checkpoint", syncerr.New(syncerr.StorageCheckpointIncomplete).WithDetails(map[string]string{"partition": "p", "projection": "x"}), `{"partition":"p","projection":"x"}`},
		{"too new", syncerr.New(syncerr.StorageSchemaTooNew).WithDetails(map[string]int{"storedSchemaVersion": 3, "runningSchemaVersion": 2}), `{"runningSchemaVersion":2,"storedSchemaVersion":3}`},
		{"layout", syncerr.New(syncerr.StorageStoredLayoutMismatch).WithDetails(map[string]string{"table": "t"}), ""},
		{"plain", errors.New("x"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReadiness(NewClock())
			r.enter(PhaseOf(tt.err, false), tt.err)
			var se *syncerr.Error
			if !errors.As(r.ServeError(), &se) || se.Code != syncerr.SchemaNotReady || string(se.Details) != tt.details {
				t.Fatalf("got %v details %s", r.ServeError(), se.Details)
			}
		})
	}
}

func TestCompileSchemaFailures(t *testing.T) {
	tests := []struct {
		name string
		read func() ([]byte, error)
		code syncerr.Code
	}{
		{"unreadable", func() ([]byte, error) { return nil, errors.New("permission denied") }, ""},
		{"not json", func() ([]byte, error) { return []byte("{"), nil }, syncerr.SchemaInvalid},
		{"refused", func() ([]byte, error) { return []byte(`{"irVersion":9}`), nil }, syncerr.SchemaInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReadiness(NewClock())
			s, err := CompileSchema(SchemaSource{Name: "x.json", Read: tt.read}, r)
			if err == nil || s != nil || syncerr.CodeOf(err) != tt.code || !strings.Contains(err.Error(), "x.json") {
				t.Fatalf("got %v %v", s, err)
			}
			st := r.Status()
			if st.Phase != PhaseSchemaCompile || st.Ready || st.Error == nil || r.Schema() != nil {
				t.Fatalf("status %+v", st)
			}
		})
	}
}
