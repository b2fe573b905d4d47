package app_test

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	natsfanout "github.com/syncd-dev/syncd/adapters/fanout/nats"
	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/natstest"
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

// TestNATSFanoutReadinessAndMetrics: with --fanout nats, /readyz's
// "fanout" check fails while the NATS connection is down (the server
// stopped) and passes again once the node has resubscribed, which is
// counted as a reconnect; the metrics are those of the PostgreSQL fanout.
func TestNATSFanoutReadinessAndMetrics(t *testing.T) {
	srv := natstest.Start(t)
	cfg := testConfig(t)
	cfg.Database, cfg.Fanout, cfg.NATS.URL = pgtest.DSN(t), config.FanoutNATS, srv.URL()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var (
		f     ports.Fanout
		ready *platform.Readiness
		m     *platform.Metrics
		ls    *platform.Listeners
	)
	a := fxtest.New(t, app.Options(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
		wiring.StorageModule, fx.Populate(&f, &ready, &m, &ls)))
	a.RequireStart()
	t.Cleanup(a.RequireStop)
	if _, ok := f.(*natsfanout.Fanout); !ok {
		t.Fatalf("fanout %T, want the NATS one", f)
	}
	fanoutCheck := func(ok bool) func() bool {
		return func() bool { c, in := ready.Status().Checks["fanout"]; return in && c.OK == ok }
	}
	readyz := func() int {
		resp, err := http.Get("http://" + ls.Addr(platform.ServerAdmin).String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
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
	until("/readyz answers 200", func() bool { return readyz() == http.StatusOK })
	if v, ok := metricValue(t, m, "syncd_fanout_listening"); !ok || v != 1 {
		t.Fatalf("syncd_fanout_listening %v %v", v, ok)
	}
	if _, ok := metricValue(t, m, "syncd_fanout_overflows_total"); !ok {
		t.Fatal("no syncd_fanout_overflows_total")
	}

	srv.Stop()
	until("the fanout check fails", fanoutCheck(false))
	until("/readyz answers 503", func() bool { return readyz() == http.StatusServiceUnavailable })
	if v, _ := metricValue(t, m, "syncd_fanout_listening"); v != 0 {
		t.Fatalf("syncd_fanout_listening %v with NATS down", v)
	}
	srv.Restart()
	until("the node resubscribes", func() bool {
		v, _ := metricValue(t, m, "syncd_fanout_reconnects_total")
		return v >= 1
	})
	until("the fanout check passes again", fanoutCheck(true))
	until("/readyz answers 200 again", func() bool { return readyz() == http.StatusOK })
}
