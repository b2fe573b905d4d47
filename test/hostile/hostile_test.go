// Package hostile is the hostile-client suite: each test is one attack a
// single authenticated (or unauthenticated) client can make on a real
// "syncd serve" process, bounded in bytes, count and time and aimed only at
// loopback. Each asserts what the server must do under it: refuse the
// attacker with its catalog close code or status, and keep its resident
// memory under a stated ceiling. A test that fails here reopens a way for
// one client to take the server down.
package hostile

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

var syncdBinary string

// TestMain builds the server, or takes the build SYNCD_HOSTILE_BINARY
// names: the same attacks measured against another build (an older one,
// for bench/RESULTS.md) tell what a change did.
func TestMain(m *testing.M) {
	if b := os.Getenv("SYNCD_HOSTILE_BINARY"); b != "" {
		syncdBinary = b
		os.Exit(m.Run())
	}
	os.Exit(proctest.Main(m, "syncd-hostile-", &syncdBinary))
}

// engine is a storage engine the server runs on.
type engine struct {
	name     string
	database func(t *testing.T) string
}

// engines are the storage engines an attack that touches storage runs on.
var engines = []engine{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// sqliteOnly is for attacks that never reach storage.
var sqliteOnly = engines[:1]

// serve starts a server on db with development authentication and the
// extra flags, waits until it is ready, and kills it at the test's end.
func serve(t *testing.T, db string, args ...string) *syncdproc.Node {
	t.Helper()
	proctest.WatchSources(t)
	all := append([]string{"--database", db, "--auth", "dev", "--log-level", "info"}, args...)
	n, err := syncdproc.Start(syncdproc.Options{Binary: syncdBinary, Args: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.WaitReady(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return n
}

// devHeader names actor as the caller (development authentication).
func devHeader(actor string) http.Header {
	h := http.Header{}
	h.Set("X-Syncd-Actor", actor)
	return h
}

// wsURL is the WebSocket URL of a route under the node's sync base.
func wsURL(n *syncdproc.Node, route string) string {
	return "ws" + strings.TrimPrefix(n.BaseURL(), "http") + route
}

// dialRealtime opens a realtime socket for actor and clientID.
func dialRealtime(ctx context.Context, n *syncdproc.Node, actor, clientID string) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(ctx, wsURL(n, "/realtime?clientId="+clientID), &websocket.DialOptions{HTTPHeader: devHeader(actor)})
}

// rss is the resident set size of process pid, in bytes.
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", v, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// rssWatch samples a process's resident set every 20 ms until Stop and
// keeps the peak: an attack is judged by the highest memory it reached,
// not by where memory settled after it.
type rssWatch struct {
	pid  int
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	base int64
	peak int64
	err  error
}

// watchRSS starts sampling n's resident set.
func watchRSS(t *testing.T, n *syncdproc.Node) *rssWatch {
	t.Helper()
	base, err := rss(n.PID())
	if err != nil {
		t.Fatal(err)
	}
	w := &rssWatch{pid: n.PID(), stop: make(chan struct{}), done: make(chan struct{}), base: base, peak: base}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			v, err := rss(w.pid)
			w.mu.Lock()
			if err != nil {
				w.err = err
			} else {
				w.peak = max(w.peak, v)
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return w
}

// Stop ends the sampling; it may be called more than once.
func (w *rssWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// Peak returns the baseline and the highest resident set seen so far.
func (w *rssWatch) Peak() (base, peak int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.base, w.peak
}

// requireGrowthBelow fails the test when the peak resident set rose more
// than limit bytes above the baseline.
func (w *rssWatch) requireGrowthBelow(t *testing.T, limit int64) {
	t.Helper()
	w.Stop()
	base, peak := w.Peak()
	t.Logf("server RSS: baseline %d MiB, peak %d MiB (growth bound %d MiB)", base>>20, peak>>20, limit>>20)
	if peak-base > limit {
		t.Fatalf("server RSS grew from %d MiB to %d MiB under the attack: more than %d MiB", base>>20, peak>>20, limit>>20)
	}
}

// closeStatus is the close code a failed socket read ended with (-1 when
// the socket ended without a close frame).
func closeStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }

// readUntilClosed reads and discards until the socket ends or ctx ends;
// it returns the read error (carrying the close status).
func readUntilClosed(ctx context.Context, c *websocket.Conn) error {
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return err
		}
	}
}
