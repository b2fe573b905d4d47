package hostile

import (
	"context"
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

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/syncdproc"
)

// watchQueries registers one live-watchable query over the demo schema's
// todos: the stock binary serves watches of --operations queries only.
const watchQueries = `{"queries": [
  {"id": "todos.inList", "table": "todos",
   "columns": ["id", "title", "done", "position"],
   "filters": [{"column": "list_id", "op": "eq", "param": "list"}],
   "orderBy": [{"column": "position"}],
   "maxRows": 100}
]}`

// The bounds the flood runs against.
const (
	floodNodeSockets  = 6   // --realtime-max-sockets
	floodActorSockets = 4   // --realtime-max-sockets-per-actor
	floodActorWatches = 100 // --operations-max-watches-per-actor
	floodSocketWatch  = 64  // --operations-max-watches, the default
	floodCommits      = 60
)

// watchSocket is an open watch socket whose server messages a goroutine
// reads: the first answer to every watch id, and a count of the rest.
type watchSocket struct {
	w     *client.Watches
	first chan client.WatchEvent

	mu    sync.Mutex
	seen  map[string]bool
	later int
	last  map[string]int64 // a watch's latest snapshot seq
}

// openWatchSocket opens a watch socket for actor; a refused upgrade is
// returned as the client's *HTTPError.
func openWatchSocket(ctx context.Context, t *testing.T, n *syncdproc.Node, sch *schema.Schema, actor string) (*watchSocket, error) {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: sch, ClientID: actor + "-watcher", Header: devHeader(actor)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.OpenWatches(ctx, client.WatchOptions{})
	if err != nil {
		return nil, err
	}
	s := &watchSocket{w: w, first: make(chan client.WatchEvent, 256), seen: map[string]bool{}, last: map[string]int64{}}
	t.Cleanup(func() { _ = w.Close() })
	go func() {
		for {
			ev, err := w.Next(ctx)
			if err != nil {
				return
			}
			s.mu.Lock()
			first := !s.seen[ev.WatchID]
			s.seen[ev.WatchID] = true
			if !first {
				s.later++
			}
			if ev.Result != nil {
				s.last[ev.WatchID] = ev.Result.MaxCommitSeq
			}
			s.mu.Unlock()
			if first {
				s.first <- ev
			}
		}
	}()
	return s, nil
}

// watchAll asks for watches watch ids prefix0… of lists prefix-0… and
// returns how many were answered with a snapshot and the codes of the
// refused ones.
func (s *watchSocket) watchAll(ctx context.Context, t *testing.T, prefix string, watches int) (snapshots int, refused map[string]int) {
	t.Helper()
	for i := range watches {
		list, _ := operations.String(fmt.Sprintf("%s-%d", prefix, i))
		params, _ := operations.Object(operations.Field{Key: "list", Value: list})
		if err := s.w.Watch(ctx, fmt.Sprintf("%s%d", prefix, i), "todos.inList", params); err != nil {
			t.Fatal(err)
		}
	}
	refused = map[string]int{}
	for range watches {
		select {
		case ev := <-s.first:
			if ev.Err != nil {
				refused[ev.Err.Code]++
			} else {
				snapshots++
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d watches answered", snapshots, watches)
		}
	}
	return snapshots, refused
}

// requireSocketLimit asserts that err is the upgrade's refusal past a
// socket cap: HTTP 429 with sync.websocket_connection_limit.
func requireSocketLimit(t *testing.T, what string, err error) {
	t.Helper()
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests || he.Code != "sync.websocket_connection_limit" {
		t.Fatalf("%s: %v, want HTTP 429 sync.websocket_connection_limit", what, err)
	}
}

// requireRealtimeLimit asserts that a realtime upgrade was refused past a
// socket cap: HTTP 429 with sync.websocket_connection_limit.
func requireRealtimeLimit(t *testing.T, what string, c *websocket.Conn, resp *http.Response, err error) {
	t.Helper()
	if err == nil {
		_ = c.CloseNow()
		t.Fatalf("%s: the realtime socket was accepted", what)
	}
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%s: %v, want HTTP 429", what, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "sync.websocket_connection_limit") {
		t.Fatalf("%s: answered %s", what, b)
	}
}

// TestWatchFlood: one actor opens sockets of both kinds and live query
// watches past every cap, then commits make the server rerun what it
// admitted. The realtime and the watch sockets count together against
// the node's and the actor's socket caps (past them an upgrade of either
// kind is refused with HTTP 429 sync.websocket_connection_limit, and a
// closed socket gives its slot back); watches past a socket's or the
// actor's bound are refused with watch_error operation.invalid_request;
// the reruns leave another actor's watch served, and the server's memory
// stays bounded.
func TestWatchFlood(t *testing.T) {
	sch, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			ops := filepath.Join(t.TempDir(), "operations.json")
			if err := os.WriteFile(ops, []byte(watchQueries), 0o600); err != nil {
				t.Fatal(err)
			}
			n := serve(t, e.database(t), "--operations", ops,
				"--realtime-max-sockets", fmt.Sprint(floodNodeSockets),
				"--realtime-max-sockets-per-actor", fmt.Sprint(floodActorSockets),
				"--operations-max-watches-per-actor", fmt.Sprint(floodActorWatches))
			mem := watchRSS(t, n)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()

			// Mallory's realtime socket and three watch sockets fill her
			// four slots; her fifth socket of either kind is refused, for
			// every one of the fifty she tries.
			rt, _, err := dialRealtime(ctx, n, "mallory", "mallory-rt")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = readUntilClosed(ctx, rt) }()
			var mine []*watchSocket
			for i := range 50 {
				s, err := openWatchSocket(ctx, t, n, sch, "mallory")
				if i < floodActorSockets-1 {
					if err != nil {
						t.Fatalf("mallory's watch socket %d: %v", i, err)
					}
					mine = append(mine, s)
					continue
				}
				requireSocketLimit(t, fmt.Sprintf("mallory's watch socket %d", i), err)
			}
			c, resp, err := dialRealtime(ctx, n, "mallory", "mallory-rt2")
			requireRealtimeLimit(t, "mallory's second realtime socket", c, resp, err)

			// Eve's two sockets fill the node; Trent's are refused.
			eve, err := openWatchSocket(ctx, t, n, sch, "eve")
			if err != nil {
				t.Fatal(err)
			}
			rtEve, _, err := dialRealtime(ctx, n, "eve", "eve-rt")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = readUntilClosed(ctx, rtEve) }()
			_, err = openWatchSocket(ctx, t, n, sch, "trent")
			requireSocketLimit(t, "trent's watch socket on a full node", err)
			c, resp, err = dialRealtime(ctx, n, "trent", "trent-rt")
			requireRealtimeLimit(t, "trent's realtime socket on a full node", c, resp, err)

			// Mallory asks for 80 watches on each socket: 64 fit the
			// first, 36 more the second, none the third.
			admitted := 0
			for i, s := range mine {
				got, refused := s.watchAll(ctx, t, fmt.Sprintf("m%d-", i), 80)
				admitted += got
				if got+refused["operation.invalid_request"] != 80 {
					t.Fatalf("socket %d: %d snapshots, refusals %v", i, got, refused)
				}
				if i == 0 && got != floodSocketWatch {
					t.Fatalf("the first socket admitted %d watches, want %d", got, floodSocketWatch)
				}
			}
			if admitted != floodActorWatches {
				t.Fatalf("mallory holds %d watches, want %d", admitted, floodActorWatches)
			}
			// Eve watches the list the commits go to.
			if got, refused := eve.watchAll(ctx, t, "hot", 1); got != 1 {
				t.Fatalf("eve's watch refused: %v", refused)
			}

			// Commits to the watched table rerun all of them.
			writer, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: sch, ClientID: "writer", Header: devHeader("writer")})
			if err != nil {
				t.Fatal(err)
			}
			if err := writer.AcquireEpoch(ctx); err != nil {
				t.Fatal(err)
			}
			var last int64
			for i := range floodCommits {
				id := fmt.Sprintf("todo-%d", i)
				op, err := writer.Upsert("todos", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "list_id": rowcodec.String("hot-0"),
					"title": rowcodec.String(id), "done": rowcodec.Bool(false), "position": rowcodec.Int(int64(i)), "updated_at_ms": rowcodec.Int(1)}, -1)
				if err != nil {
					t.Fatal(err)
				}
				writer.Queue(op)
				res, err := writer.Push(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Pushes) != 1 || res.Pushes[0].Status != ssp2.PushApplied {
					t.Fatalf("push %d: %+v", i, res.Pushes)
				}
				last = res.Pushes[0].CommitSeq
			}
			// Eve's watch reaches the last commit.
			for eve.lastSeq("hot0") < last {
				if ctx.Err() != nil {
					t.Fatalf("eve's watch stopped at commit %d of %d", eve.lastSeq("hot0"), last)
				}
				time.Sleep(20 * time.Millisecond)
			}
			reruns := 0
			for _, s := range mine {
				s.mu.Lock()
				reruns += s.later
				s.mu.Unlock()
			}
			t.Logf("%d commits reran mallory's %d watches %d times", floodCommits, admitted, reruns)

			// A closed socket gives its slot back: Trent gets one.
			_ = mine[2].w.Close()
			var trent *watchSocket
			for trent == nil {
				if trent, err = openWatchSocket(ctx, t, n, sch, "trent"); err != nil {
					requireSocketLimit(t, "trent's watch socket", err)
					if ctx.Err() != nil {
						t.Fatal("mallory's closed socket never gave its slot back")
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			mem.requireGrowthBelow(t, 64<<20)
		})
	}
}

// lastSeq is the latest snapshot's maxCommitSeq of watchID.
func (s *watchSocket) lastSeq(watchID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[watchID]
}
