package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/auth/dev"
	"github.com/syncd-dev/syncd/adapters/fanout/local"
	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// notices records the commit notices a fanout delivers.
type notices struct {
	mu      sync.Mutex
	got     []ports.CommitNotice
	changed chan struct{}
}

func (n *notices) Commit(c ports.CommitNotice) {
	n.mu.Lock()
	n.got = append(n.got, c)
	n.mu.Unlock()
	select {
	case n.changed <- struct{}{}:
	default:
	}
}
func (*notices) Event(ports.FanoutEvent) {}
func (*notices) Resync()                 {}

func (n *notices) waitSeq(t *testing.T, partition string, seq int64) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		n.mu.Lock()
		for _, c := range n.got {
			if c.Partition == partition && c.CommitSeq >= seq {
				n.mu.Unlock()
				return
			}
		}
		n.mu.Unlock()
		select {
		case <-n.changed:
		case <-deadline.C:
			t.Fatalf("no notice of %s seq %d", partition, seq)
		}
	}
}

type fanoutNode struct {
	url    string
	fanout ports.Fanout
}

func startFanoutNode(t *testing.T, database, mode string) fanoutNode {
	t.Helper()
	cfg := testConfig(t)
	cfg.Database, cfg.Fanout = database, mode
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var n fanoutNode
	var ls *platform.Listeners
	var ready *platform.Readiness
	a := fxtest.New(t, app.Options(cfg, platform.ReadBuildInfo("test"), zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		wiring.StorageModule, fx.Populate(&n.fanout, &ls, &ready)))
	a.RequireStart()
	t.Cleanup(a.RequireStop)
	waitPhase(t, ready, platform.PhaseReady)
	if pg, ok := n.fanout.(*pgnotify.Fanout); ok {
		deadline := time.Now().Add(60 * time.Second)
		for !pg.Listening() {
			if time.Now().After(deadline) {
				t.Fatal("fanout never listened")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	n.url = "http://" + ls.Addr(platform.ServerSync).String() + "/sync"
	return n
}

func syncPost(t *testing.T, url string, r ssptest.Req) ssptest.Resp {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(r.Encode(t)))
	req.Header.Set("Content-Type", httpapi.ContentTypeSync)
	req.Header.Set(dev.HeaderActor, "alice")
	req.Header.Set(dev.HeaderScopes, `{"owner_id":["alice"]}`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	return ssptest.DecodeResponse(t, b)
}

// pushList pushes one list row through node's POST /sync.
func pushList(t *testing.T, url, id string) {
	t.Helper()
	sch, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	epoch := syncPost(t, url, ssptest.Req{ClientID: "c-" + id, SchemaVersion: sch.Version, NoEpoch: true, Pull: true}).Header.LogEpoch
	row := ssptest.Sparse(t, sch.Table("lists"), ssptest.Cols{"id": rowcodec.String(id), "owner_id": rowcodec.String("alice"),
		"title": rowcodec.String("Groceries"), "updated_at_ms": rowcodec.Int(1)})
	resp := syncPost(t, url, ssptest.Req{ClientID: "c-" + id, SchemaVersion: sch.Version, Epoch: epoch,
		Commits: []*ssp2.PushCommit{ssptest.Commit("k-"+id, ssptest.Upsert("lists", id, row, -1))}})
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("push %s: %+v", id, resp.Results[0])
	}
}

// TestFanoutAnnouncesPushes: every applied push is announced on the
// fanout; with PostgreSQL (auto) it reaches the other node's listeners,
// with SQLite it stays in process.
func TestFanoutAnnouncesPushes(t *testing.T) {
	t.Run("sqlite, auto is in process", func(t *testing.T) {
		cfg := testConfig(t)
		n := startFanoutNode(t, cfg.Database, config.FanoutAuto)
		if _, ok := n.fanout.(*local.Fanout); !ok {
			t.Fatalf("fanout %T, want the in-process one", n.fanout)
		}
		rec := &notices{changed: make(chan struct{}, 1)}
		stop, err := n.fanout.Listen(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		pushList(t, n.url, "l1")
		rec.waitSeq(t, "default", 1)
	})
	t.Run("postgres, auto crosses nodes", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		a := startFanoutNode(t, dsn, config.FanoutAuto)
		b := startFanoutNode(t, dsn, config.FanoutAuto)
		if _, ok := b.fanout.(*pgnotify.Fanout); !ok {
			t.Fatalf("fanout %T, want the PostgreSQL one", b.fanout)
		}
		rec := &notices{changed: make(chan struct{}, 1)}
		stop, err := b.fanout.Listen(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		pushList(t, a.url, "l1")
		rec.waitSeq(t, "default", 1)
		pushList(t, b.url, "l2") // and its own pushes, once
		rec.waitSeq(t, "default", 2)
	})
	t.Run("postgres with --fanout local stays in process", func(t *testing.T) {
		n := startFanoutNode(t, pgtest.DSN(t), config.FanoutLocal)
		if _, ok := n.fanout.(*local.Fanout); !ok {
			t.Fatalf("fanout %T, want the in-process one", n.fanout)
		}
	})
}

func TestFanoutFlag(t *testing.T) {
	natsAt := func(c *config.Config) { c.NATS.URL = "nats://127.0.0.1:4222" }
	cases := []struct {
		database, fanout string
		set              func(c *config.Config)
		want             string
		valid            bool
	}{
		{"./x.db", "auto", nil, config.FanoutLocal, true},
		{"postgres://h/db", "auto", nil, config.FanoutPostgres, true},
		{"postgres://h/db", "local", nil, config.FanoutLocal, true},
		{"./x.db", "postgres", nil, "", false},
		{"./x.db", "redis", nil, "", false},
		{"postgres://h/db", "nats", natsAt, config.FanoutNATS, true},
		{"postgres://h/db", "nats", nil, "", false},    // no --nats-url
		{"./x.db", "nats", natsAt, "", false},          // the nodes share no database
		{"postgres://h/db", "auto", natsAt, "", false}, // --nats-url without --fanout nats
		{"postgres://h/db", "nats", func(c *config.Config) { natsAt(c); c.NATS.SubjectPrefix = "a.*" }, "", false},
		{"postgres://h/db", "nats", func(c *config.Config) { natsAt(c); c.NATS.SubjectPrefix = "acme.syncd" }, config.FanoutNATS, true},
		{"postgres://h/db", "nats", func(c *config.Config) { natsAt(c); c.NATS.TLSCertFile = "c.pem" }, "", false},
	}
	for _, c := range cases {
		cfg := config.Default()
		cfg.Database, cfg.Fanout = c.database, c.fanout
		if c.set != nil {
			c.set(&cfg)
		}
		err := cfg.Validate()
		if (err == nil) != c.valid {
			t.Fatalf("%s with --fanout %s (%+v): Validate = %v, want valid %v", c.database, c.fanout, cfg.NATS, err, c.valid)
		}
		if c.valid && cfg.FanoutMode() != c.want {
			t.Fatalf("%s with --fanout %s: mode %s, want %s", c.database, c.fanout, cfg.FanoutMode(), c.want)
		}
	}
}
