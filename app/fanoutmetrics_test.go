package app_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
)

// metricValue is the value of the unlabelled metric name (false: absent).
func metricValue(t *testing.T, m *platform.Metrics, name string) (float64, bool) {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name || len(f.Metric) == 0 {
			continue
		}
		if g := f.Metric[0].GetGauge(); g != nil {
			return g.GetValue(), true
		}
		return f.Metric[0].GetCounter().GetValue(), true
	}
	return 0, false
}

// TestFanoutReadinessAndMetrics: with the PostgreSQL fanout, /readyz has
// a "fanout" check that fails while the LISTEN connection is down, and
// the listener's state, reconnects and overflows are metrics.
func TestFanoutReadinessAndMetrics(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := testConfig(t)
	cfg.Database, cfg.Fanout = dsn, "postgres"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var (
		f     ports.Fanout
		ready *platform.Readiness
		m     *platform.Metrics
	)
	a := fxtest.New(t, app.Options(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
		wiring.StorageModule, fx.Populate(&f, &ready, &m)))
	a.RequireStart()
	t.Cleanup(a.RequireStop)
	waitPhase(t, ready, platform.PhaseReady)
	pg := f.(*pgnotify.Fanout)
	fanoutCheck := func(ok bool) func() bool {
		return func() bool { c, in := ready.Status().Checks["fanout"]; return in && c.OK == ok }
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
		}
	}
	until("the fanout check passes", fanoutCheck(true))
	if v, ok := metricValue(t, m, "syncd_fanout_listening"); !ok || v != 1 {
		t.Fatalf("syncd_fanout_listening %v %v", v, ok)
	}
	if _, ok := metricValue(t, m, "syncd_fanout_overflows_total"); !ok {
		t.Fatal("no syncd_fanout_overflows_total")
	}

	// The listener's backend is killed: the check fails until it is back,
	// and the reconnect is counted.
	db, err := sql.Open("pgx", pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var killed bool
	if err := db.QueryRowContext(context.Background(), "select pg_terminate_backend($1)", int64(pg.ListenerPID())).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener: %v %v", killed, err)
	}
	until("the listener reconnects", func() bool {
		v, _ := metricValue(t, m, "syncd_fanout_reconnects_total")
		return v >= 1
	})
	until("the fanout check passes again", fanoutCheck(true))
}
