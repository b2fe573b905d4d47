package contract_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/fanout/local"
	natsfanout "github.com/syncd-dev/syncd/adapters/fanout/nats"
	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
	"github.com/syncd-dev/syncd/test/natstest"
	"github.com/syncd-dev/syncd/test/pgtest"
)

func TestFanoutLocal(t *testing.T) {
	contract.RunFanout(t, contract.FanoutHarness{
		New: func(t *testing.T) ports.Fanout {
			f := local.New(local.Options{Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
			t.Cleanup(func() { _ = f.Close() })
			return f
		},
	})
}

func TestFanoutPostgres(t *testing.T) {
	dsns := map[ports.Fanout]string{}
	open := func(t *testing.T, dsn string) ports.Fanout {
		f, err := pgnotify.New(pgnotify.Options{DSN: dsn, Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
		if err != nil {
			t.Fatal(err)
		}
		f.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := f.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		waitListening(t, f)
		dsns[f] = dsn
		return f
	}
	contract.RunFanout(t, contract.FanoutHarness{
		New:  func(t *testing.T) ports.Fanout { return open(t, pgtest.DSN(t)) },
		Peer: func(t *testing.T, f ports.Fanout) ports.Fanout { return open(t, dsns[f]) },
		Kill: func(t *testing.T, f ports.Fanout) {
			pid := f.(*pgnotify.Fanout).ListenerPID()
			db, err := sql.Open("pgx", pgtest.BaseURL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			var ok bool
			if err := db.QueryRow("select pg_terminate_backend($1)", int64(pid)).Scan(&ok); err != nil || !ok {
				t.Fatalf("terminate listener backend %d: %v %v", pid, ok, err)
			}
		},
	})
}

// TestFanoutNATS runs the suite on a real NATS server (natstest.URL): each
// node connects through a proxy of its own, which Kill cuts; each
// deployment is a random name, as a database and schema would be.
func TestFanoutNATS(t *testing.T) {
	url := natstest.URL(t)
	deployments := map[ports.Fanout]string{}
	proxies := map[ports.Fanout]*natstest.Proxy{}
	open := func(t *testing.T, deployment string) ports.Fanout {
		p := natstest.NewProxy(t, url)
		f, err := natsfanout.New(natsfanout.Options{
			URL: p.URL(), Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
			Deployment: func(context.Context) (string, error) { return deployment, nil },
			MinBackoff: 10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		f.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := f.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		waitFor(t, "the NATS fanout subscribed", f.Listening)
		deployments[f], proxies[f] = deployment, p
		return f
	}
	contract.RunFanout(t, contract.FanoutHarness{
		New:  func(t *testing.T) ports.Fanout { return open(t, "contract "+rand.Text()) },
		Peer: func(t *testing.T, f ports.Fanout) ports.Fanout { return open(t, deployments[f]) },
		Kill: func(t *testing.T, f ports.Fanout) { proxies[f].Cut() },
	})
}

// waitFor polls (generous deadline, no timing asserted) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitListening polls (generous deadline, no timing asserted) until f's
// listener connection listens.
func waitListening(t *testing.T, f *pgnotify.Fanout) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f.Listening() {
		if time.Now().After(deadline) {
			t.Fatal("fanout never started listening")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
