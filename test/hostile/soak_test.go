package hostile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
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
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/syncdproc"
)

// soakCeiling is the server's resident memory the soak must stay under,
// with the default bounds, on a small (2-core, any memory) machine.
const soakCeiling = 512 << 20

// soakDuration is how long the attacks run: SYNCD_SOAK (a Go duration)
// or 20 s.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("SYNCD_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 30*time.Minute {
			t.Fatalf("SYNCD_SOAK %q: want a duration up to 30m", v)
		}
		return d
	}
	return 20 * time.Second
}

// soakTally counts what each attack and the honest clients did.
type soakTally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (s *soakTally) add(what string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[what] += n
}

func (s *soakTally) get(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[what]
}

// Every attack of this suite at once, beside honest clients, with the
// default bounds: the server's memory stays under soakCeiling, every
// honest client keeps being served, and every commit the server
// acknowledged to one is there afterwards.
func TestEveryAttackAtOnce(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			n := serve(t, e.database(t), "--operations", writeQueries(t))
			dur := soakDuration(t)
			ctx, cancel := context.WithTimeout(t.Context(), dur+2*time.Minute)
			defer cancel()
			actx, stopAttacks := context.WithTimeout(ctx, dur)
			defer stopAttacks()
			var tally soakTally
			var wg sync.WaitGroup
			run := func(workers int, attack func(ctx context.Context, worker int)) {
				for i := range workers {
					wg.Go(func() {
						for actx.Err() == nil {
							attack(actx, i)
						}
					})
				}
			}
			// Registrations the presence flood and the slow readers hold.
			for i := range 6 {
				member(ctx, t, n, "mallory", fmt.Sprintf("sink-%d", i), "l-flood")
			}
			member(ctx, t, n, "mallory", "publisher", "l-flood")
			for i := range 4 {
				member(ctx, t, n, "mallory", fmt.Sprintf("slow-%d", i), "l-honest")
			}
			w := watchRSS(t, n)

			run(2, func(ctx context.Context, i int) { tally.add("endless round", soakEndlessRound(ctx, n, i)) })
			run(4, func(ctx context.Context, i int) { tally.add("unfinished message", soakUnfinished(ctx, n, i)) })
			run(8, func(ctx context.Context, i int) { tally.add("stalled upload", soakStalledUpload(ctx, n, i)) })
			run(1, func(ctx context.Context, _ int) { tally.add("presence publish", soakPresenceFlood(ctx, n)) })
			run(4, func(ctx context.Context, i int) { tally.add("slow reader", soakSlowReader(ctx, n, i)) })
			run(2, func(ctx context.Context, i int) { tally.add("churn", soakChurn(ctx, n, i)) })
			run(4, func(ctx context.Context, i int) { tally.add("half-open", soakHalfOpen(ctx, n)) })
			run(2, func(ctx context.Context, i int) { tally.add("watch flood", soakWatchFlood(ctx, n, i)) })

			// Honest clients: push and pull through the Go client, retrying
			// refusals the way a client does, and one realtime listener.
			const honest = 4
			acked := make([][]string, honest)
			for i := range honest {
				sch := demoSchema(t)
				wg.Go(func() { acked[i] = soakHonest(actx, t, sch, n, i, &tally) })
			}
			wg.Go(func() { tally.add("honest socket event", soakListener(actx, n)) })
			wg.Wait()
			w.Stop()
			base, peak := w.Peak()
			for _, k := range []string{"endless round", "unfinished message", "stalled upload", "presence publish", "slow reader",
				"churn", "half-open", "watch flood", "honest round", "honest refusal", "honest socket event"} {
				t.Logf("%-20s %d", k, tally.get(k))
			}
			t.Logf("server RSS over %v: baseline %d MiB, peak %d MiB (ceiling %d MiB)", dur, base>>20, peak>>20, soakCeiling>>20)
			if peak > soakCeiling {
				t.Errorf("server RSS peaked at %d MiB under every attack at once: over the %d MiB ceiling", peak>>20, soakCeiling>>20)
			}
			for i, ids := range acked {
				if len(ids) < 3 {
					t.Errorf("honest client %d completed %d pushes: it was not kept served", i, len(ids))
				}
			}
			if tally.get("honest socket event") == 0 {
				t.Error("the honest socket heard nothing of the honest commits")
			}
			soakVerify(ctx, t, n, acked)
		})
	}
}

// soakEndlessRound streams a round that never ends until the server
// closes the socket; it returns 1 per socket the server sent away.
func soakEndlessRound(ctx context.Context, n *syncdproc.Node, i int) int {
	c, _, err := dialRealtime(ctx, n, "mallory", fmt.Sprintf("endless-%d", i))
	if err != nil {
		pause(ctx)
		return 0
	}
	defer c.CloseNow()
	msg := frame(60 << 10)
	err = c.Write(ctx, websocket.MessageBinary, roundHead())
	for sent := 0; err == nil && sent < 256<<20; sent += len(msg) {
		err = c.Write(ctx, websocket.MessageBinary, msg)
	}
	return 1
}

// soakUnfinished begins a large message it never finishes.
func soakUnfinished(ctx context.Context, n *syncdproc.Node, i int) int {
	p, err := dialRawSocket(ctx, n, fmt.Sprintf("/realtime?clientId=unfinished-%d", i), "mallory")
	if err != nil {
		pause(ctx)
		return 0
	}
	defer p.close()
	p.streamUnfinished(ctx, 60, 1<<20, 200*time.Millisecond)
	return 1
}

// soakStalledUpload declares the largest blob, sends part of it and
// stalls until the server answers or closes.
func soakStalledUpload(ctx context.Context, n *syncdproc.Node, i int) int {
	c, done := soakDial(ctx, n)
	if c == nil {
		return 0
	}
	defer done()
	id := fmt.Sprintf("sha256:%064x", i+1)
	head := fmt.Sprintf("PUT /blobs/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Syncd-Actor: mallory\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", id, 64<<20)
	if _, err := io.WriteString(c, head); err != nil {
		return 0
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0
	}
	if resp.StatusCode == http.StatusContinue {
		if _, err := c.Write(make([]byte, 3<<19)); err != nil {
			return 1
		}
		if resp, err = http.ReadResponse(br, nil); err != nil {
			return 1
		}
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		pause(ctx)
	}
	return 1
}

// soakPresenceFlood publishes 16 KiB documents as fast as it can to a key
// six sockets hold and never read.
func soakPresenceFlood(ctx context.Context, n *syncdproc.Node) int {
	var sinks []*websocket.Conn
	defer func() {
		for _, c := range sinks {
			c.CloseNow()
		}
	}()
	for i := range 6 {
		if c, _, err := dialRealtime(ctx, n, "mallory", fmt.Sprintf("sink-%d", i)); err == nil {
			sinks = append(sinks, c)
		}
	}
	pub, _, err := dialRealtime(ctx, n, "mallory", "publisher")
	if err != nil {
		pause(ctx)
		return 0
	}
	defer pub.CloseNow()
	go func() { _ = readUntilClosed(ctx, pub) }()
	pad := strings.Repeat("p", 16<<10-40)
	published := 0
	for ctx.Err() == nil {
		msg := fmt.Sprintf(`{"event":"presence","data":{"scopeKey":"list:l-flood","doc":{"n":%d,"pad":"%s"}}}`, published, pad)
		if pub.Write(ctx, websocket.MessageText, []byte(msg)) != nil {
			break
		}
		published++
	}
	return published
}

// soakSlowReader holds a socket registered on the honest clients' list
// and never reads it: the deltas of their commits back up on it.
func soakSlowReader(ctx context.Context, n *syncdproc.Node, i int) int {
	c, _, err := dialRealtime(ctx, n, "mallory", fmt.Sprintf("slow-%d", i))
	if err != nil {
		pause(ctx)
		return 0
	}
	defer c.CloseNow()
	<-ctx.Done()
	return 1
}

// soakChurn connects and disconnects as fast as it can.
func soakChurn(ctx context.Context, n *syncdproc.Node, i int) int {
	c, _, err := dialRealtime(ctx, n, "mallory", fmt.Sprintf("churn-%d", i))
	if err != nil {
		pause(ctx)
		return 0
	}
	c.CloseNow()
	return 1
}

// soakHalfOpen opens a connection, sends half a request head and goes
// silent until the server ends it.
func soakHalfOpen(ctx context.Context, n *syncdproc.Node) int {
	c, done := soakDial(ctx, n)
	if c == nil {
		return 0
	}
	defer done()
	_, _ = io.WriteString(c, "GET /realtime?clientId=half HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	_, _ = io.Copy(io.Discard, c)
	return 1
}

// soakDial opens a TCP connection to the sync listener that ends with ctx
// (nil after a pause when it cannot); done closes it.
func soakDial(ctx context.Context, n *syncdproc.Node) (c net.Conn, done func()) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(n.BaseURL(), "http://"))
	if err != nil {
		pause(ctx)
		return nil, nil
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	return c, func() { stop(); _ = c.Close() }
}

// soakHonest pushes a todo and pulls, again and again, retrying refusals
// the way a client does; it returns the row ids whose commits the server
// acknowledged.
func soakHonest(ctx context.Context, t *testing.T, sch *schema.Schema, n *syncdproc.Node, i int, tally *soakTally) []string {
	c, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: sch, ClientID: fmt.Sprintf("honest-%d", i), Header: devHeader("alice")})
	if err != nil {
		t.Error(err)
		return nil
	}
	c.Subscribe("todos", "todos", map[string][]string{"list_id": {"l-honest"}})
	var acked []string
	for k := 0; ctx.Err() == nil; k++ {
		id := fmt.Sprintf("h%d-%d", i, k)
		op, err := c.Upsert("todos", id, map[string]rowcodec.Value{
			"id": rowcodec.String(id), "list_id": rowcodec.String("l-honest"), "title": rowcodec.String(id), "done": rowcodec.Bool(false),
			"position": rowcodec.Int(int64(k)), "updated_at_ms": rowcodec.Int(1),
		}, -1)
		if err != nil {
			t.Error(err)
			return acked
		}
		c.Queue(op)
		for ctx.Err() == nil {
			if _, err := c.Sync(ctx); err != nil {
				tally.add("honest refusal", 1)
				pause(ctx)
				continue
			}
			if len(c.Pending()) == 0 {
				acked = append(acked, id)
				tally.add("honest round", 1)
				break
			}
		}
	}
	return acked
}

// soakListener is an honest realtime socket on the honest list: it counts
// the deltas and wake-ups it hears, registering and reconnecting the way
// a client does when the server refuses it for a moment.
func soakListener(ctx context.Context, n *syncdproc.Node) int {
	heard := 0
	for ctx.Err() == nil {
		if err := memberErr(ctx, n, "alice", "listener", "l-honest"); err != nil {
			pause(ctx)
			continue
		}
		c, _, err := dialRealtime(ctx, n, "alice", "listener")
		if err != nil {
			pause(ctx)
			continue
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				break
			}
			if len(b) > 0 && (b[0] == 0x02 || strings.Contains(string(b), `"event":"sync"`)) {
				heard++
			}
		}
		c.CloseNow()
	}
	return heard
}

// soakVerify pulls the honest list afresh: every acknowledged row is
// there.
func soakVerify(ctx context.Context, t *testing.T, n *syncdproc.Node, acked [][]string) {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: demoSchema(t), ClientID: "verifier", Header: devHeader("alice")})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("todos", "todos", map[string][]string{"list_id": {"l-honest"}})
	if _, err := c.PullUntilIdle(ctx, 1000); err != nil {
		t.Fatalf("verifying pull: %v", err)
	}
	rows := c.Rows("todos")
	total := 0
	for _, ids := range acked {
		for _, id := range ids {
			total++
			if _, ok := rows[id]; !ok {
				t.Errorf("acknowledged row %s is missing", id)
			}
		}
	}
	t.Logf("%d acknowledged honest commits, all present", total)
}

// writeQueries writes the watchable query file (watchQueries) for
// --operations.
func writeQueries(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "operations.json")
	if err := os.WriteFile(p, []byte(watchQueries), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// soakWatchFlood opens a watch socket and as many watches as it is let,
// each on a list of its own, then holds them while the honest clients
// commit.
func soakWatchFlood(ctx context.Context, n *syncdproc.Node, i int) int {
	sch, err := schema.Load(todos.IR())
	if err != nil {
		return 0
	}
	c, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: sch, ClientID: fmt.Sprintf("watcher-%d", i), Header: devHeader("mallory")})
	if err != nil {
		return 0
	}
	w, err := c.OpenWatches(ctx, client.WatchOptions{})
	if err != nil {
		pause(ctx)
		return 0
	}
	defer func() { _ = w.Close() }()
	asked := 0
	for k := range 100 {
		list, _ := operations.String(fmt.Sprintf("l-watch-%d-%d", i, k))
		params, _ := operations.Object(operations.Field{Key: "list", Value: list})
		if w.Watch(ctx, fmt.Sprintf("w%d", k), "todos.inList", params) != nil {
			break
		}
		asked++
	}
	for {
		if _, err := w.Next(ctx); err != nil {
			return asked
		}
	}
}

// memberErr is member without the test: for goroutines.
func memberErr(ctx context.Context, n *syncdproc.Node, actor, clientID, listID string) error {
	s, err := schema.Load(todos.IR())
	if err != nil {
		return err
	}
	c, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: s, ClientID: clientID, Header: devHeader(actor)})
	if err != nil {
		return err
	}
	c.Subscribe("todos", "todos", map[string][]string{"list_id": {listID}})
	_, err = c.Pull(ctx)
	return err
}

// pause waits a moment before an attack tries again.
func pause(ctx context.Context) {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
