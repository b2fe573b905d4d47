package wiring

import (
	"github.com/syncd-dev/syncd/app/internal/periodic"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/test/testclock"

	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/segments/fsseg"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/segments/sqlseg"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/ports"
)

func TestNewSegmentStore(t *testing.T) {
	log := zap.NewNop()
	cfg := config.Default()

	lc := fxtest.NewLifecycle(t)
	s, err := NewSegmentStore(lc, SegmentStoreParams{Config: cfg, Log: log})
	if err != nil || s != nil {
		t.Fatalf("without storage: %v %v", s, err)
	}

	s, err = NewSegmentStore(lc, SegmentStoreParams{Config: cfg, Log: log, Store: memory.New()})
	if _, ok := s.(*memseg.Store); err != nil || !ok {
		t.Fatalf("over the in-memory storage: %T %v", s, err)
	}

	fs := cfg
	fs.Segments.Store, fs.Segments.Dir = config.SegmentStoreFS, filepath.Join(t.TempDir(), "seg")
	s, err = NewSegmentStore(lc, SegmentStoreParams{Config: fs, Log: log, Store: memory.New()})
	if _, ok := s.(*fsseg.Store); err != nil || !ok {
		t.Fatalf("--segment-store fs: %T %v", s, err)
	}

	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lc = fxtest.NewLifecycle(t)
	s, err = NewSegmentStore(lc, SegmentStoreParams{Config: cfg, Log: log, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	defer lc.RequireStop()
	b := []byte("db segment")
	p := ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p", LogEpoch: "e", Table: "t", ScopeDigest: "d"},
		SegmentID: contentaddr.Of(b), ExpiresAtMs: 10}
	if _, err := s.Put(context.Background(), b, p); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlseg.Open(context.Background(), sqlseg.Options{DB: st.DB()}); err != nil {
		t.Fatal(err)
	}
	if pubs, err := s.Publications(context.Background(), p.SegmentID); err != nil || len(pubs) != 1 {
		t.Fatalf("publications %v %v", pubs, err)
	}
}

func TestSegmentSignerAndURLs(t *testing.T) {
	cfg := config.Default()
	if s, err := NewSegmentSigner(cfg); s != nil || err != nil {
		t.Fatalf("no key file: %v %v", s, err)
	}
	if u := newSegmentURLSigner(cfg, nil); u != nil {
		t.Fatalf("pull signer without a key: %v", u)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	_ = os.WriteFile(short, []byte("0123456789\n"), 0o600)
	cfg.Segments.SignedURLKeyFile = short
	if _, err := NewSegmentSigner(cfg); err == nil {
		t.Fatal("short key accepted")
	}
	cfg.Segments.SignedURLKeyFile = filepath.Join(dir, "missing")
	if _, err := NewSegmentSigner(cfg); err == nil {
		t.Fatal("missing key file accepted")
	}
	key := strings.Repeat("k", 40)
	good := filepath.Join(dir, "key")
	_ = os.WriteFile(good, []byte(key+"\n"), 0o600)
	cfg.Segments.SignedURLKeyFile = good
	cfg.Segments.PublicURL = "https://sync.example.com/api"
	cfg.Segments.SignedURLTTL = 2 * time.Minute
	s, err := NewSegmentSigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := newSegmentURLSigner(cfg, s)
	id := contentaddr.Of([]byte("x"))
	now := time.UnixMilli(1_700_000_000_500)
	url, exp, err := u.SignSegmentURL(context.Background(), ports.SegmentURLRequest{SegmentID: id, ScopeDigest: "dd", Partition: "p1", NowMs: now.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	prefix := "https://sync.example.com/api/segments/" + id + "?st="
	if !strings.HasPrefix(url, prefix) || exp != (now.Unix()+120)*1000 {
		t.Fatalf("url %q expires %d", url, exp)
	}
	// The token verifies under the key as written, newline trimmed.
	v, _ := signedurl.NewSigner([]byte(key))
	c, err := v.Verify(strings.TrimPrefix(url, prefix), now)
	if err != nil || c.Segment != id || c.ScopeDigest != "dd" || c.Audience != v.Audience("p1") {
		t.Fatalf("claims %+v %v", c, err)
	}
}

func TestSegmentSweeper(t *testing.T) {
	m, err := platform.NewMetrics(platform.BuildInfo{}, platform.NewReadiness(platform.NewClock()))
	if err != nil {
		t.Fatal(err)
	}
	store := memseg.New()
	b := []byte("expires at once")
	if _, err := store.Put(context.Background(), b, ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p"},
		SegmentID: contentaddr.Of(b), ExpiresAtMs: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Segments.SweepInterval = 10 * time.Millisecond
	lc := fxtest.NewLifecycle(t)
	if err := scheduleSegmentSweep(lc, testScheduler(t, platform.NewClock()), cfg, m, zap.NewNop(), platform.NewClock(), store); err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pubs, _ := store.Publications(context.Background(), contentaddr.Of(b))
		if len(pubs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired segment never swept")
		}
		time.Sleep(5 * time.Millisecond)
	}
	lc.RequireStop()
	// Off: no sweeper, no error.
	cfg.Segments.SweepInterval = 0
	if err := scheduleSegmentSweep(fxtest.NewLifecycle(t), testScheduler(t, platform.NewClock()), cfg, m, zap.NewNop(), platform.NewClock(), store); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentSweeperRunsOnTheAppClock: the sweep waits on the app clock
// and expires by its time, not the wall's.
func TestSegmentSweeperRunsOnTheAppClock(t *testing.T) {
	m, err := platform.NewMetrics(platform.BuildInfo{}, platform.NewReadiness(platform.NewClock()))
	if err != nil {
		t.Fatal(err)
	}
	store := memseg.New()
	b := []byte("expires in the next century")
	later := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := store.Put(context.Background(), b, ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p"},
		SegmentID: contentaddr.Of(b), ExpiresAtMs: later.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	clk := testclock.Stepped(later.Add(time.Hour))
	cfg := config.Default()
	cfg.Segments.SweepInterval = time.Hour
	lc := fxtest.NewLifecycle(t)
	if err := scheduleSegmentSweep(lc, testScheduler(t, clk), cfg, m, zap.NewNop(), clk, store); err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	defer lc.RequireStop()
	clk.Step() // one interval passes on the app clock: a sweep
	clk.Step() // the next wait began, so the sweep is done
	if pubs, _ := store.Publications(context.Background(), contentaddr.Of(b)); len(pubs) != 0 {
		t.Fatalf("segment expired on the app clock still published: %v", pubs)
	}
}

// testScheduler is the periodic scheduler on clk.
func testScheduler(t *testing.T, clk platform.Clock) *periodic.Scheduler {
	t.Helper()
	s, err := NewPeriodicScheduler(clk, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
