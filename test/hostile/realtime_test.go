package hostile

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/syncdproc"
)

// demoSchema is the schema a bare server runs with.
func demoSchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// member registers clientID of actor on list listID (a pull of the
// list's todos), so that its socket holds the presence key list:listID.
func member(ctx context.Context, t *testing.T, n *syncdproc.Node, actor, clientID, listID string) {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: n.BaseURL(), Schema: demoSchema(t), ClientID: clientID, Header: devHeader(actor)})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("todos", "todos", map[string][]string{"list_id": {listID}})
	if _, err := c.Pull(ctx); err != nil {
		t.Fatalf("pull of %s: %v", clientID, err)
	}
}

// roundHead is the start of a socket round: the 0x01 tag and a request
// envelope header.
func roundHead() []byte {
	h := make([]byte, 0, 1+ssp2.HeaderSize)
	h = append(h, 0x01)
	h = append(h, ssp2.Magic...)
	h = binary.LittleEndian.AppendUint16(h, 3)
	return append(h, byte(ssp2.KindRequest), 0)
}

// frame is a round chunk carrying one whole REQ_HEADER-typed frame of n
// bytes: well-formed framing that never reaches END.
func frame(n int) []byte {
	b := make([]byte, 0, 1+5+n)
	b = append(b, 0x01, byte(ssp2.TypeReqHeader))
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, make([]byte, n)...)
}

// An endless socket round: attackers stream well-formed frames of a
// request whose END never comes, answering pings all along. Measured
// before the fix: one socket took the server from 41 MiB to 1.9 GiB in
// 12 s and stayed open. Now a round is closed at the request bound
// (1009), or as soon as the node's in-flight memory, which POST /sync
// bodies share, has no room for it (1013).
func TestEndlessSocketRound(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		attackers int
		codes     []websocket.StatusCode
		growth    int64
	}{
		// With room in the budget past one whole request, the request
		// bound is what closes it.
		{"one socket, the request bound", []string{"--max-inflight-body-bytes", "167772160"}, 1,
			[]websocket.StatusCode{websocket.StatusMessageTooBig}, 320 << 20},
		// With the defaults (a 64 MiB budget, one 64 MiB request) the
		// budget is shared: whichever bound a socket meets first closes it.
		{"four sockets, the defaults", nil, 4,
			[]websocket.StatusCode{websocket.StatusMessageTooBig, websocket.StatusTryAgainLater}, 320 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := serve(t, sqliteOnly[0].database(t), tc.args...)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			w := watchRSS(t, n)
			const sendCap = 256 << 20 // each attacker's bound, far past the server's
			codes := make([]websocket.StatusCode, tc.attackers)
			sent := make([]int64, tc.attackers)
			var wg sync.WaitGroup
			for i := range tc.attackers {
				wg.Go(func() {
					c, _, err := dialRealtime(ctx, n, "mallory", fmt.Sprintf("endless-%d", i))
					if err != nil {
						t.Errorf("dial: %v", err)
						return
					}
					defer c.CloseNow()
					readErr := make(chan error, 1)
					go func() { readErr <- readUntilClosed(ctx, c) }()
					msg := frame(60 << 10)
					err = c.Write(ctx, websocket.MessageBinary, roundHead())
					for err == nil && sent[i] < sendCap {
						err = c.Write(ctx, websocket.MessageBinary, msg)
						sent[i] += int64(len(msg))
					}
					select {
					case rerr := <-readErr:
						codes[i] = closeStatus(rerr)
					case <-ctx.Done():
						t.Errorf("attacker %d: the socket stayed open after %d MiB", i, sent[i]>>20)
					}
				})
			}
			wg.Wait()
			for i, code := range codes {
				t.Logf("attacker %d: closed with %d after %d MiB sent", i, code, sent[i]>>20)
				if !slices.Contains(tc.codes, code) {
					t.Errorf("attacker %d closed with %d, want one of %v", i, code, tc.codes)
				}
				if sent[i] >= sendCap {
					t.Errorf("attacker %d sent its whole %d MiB", i, sendCap>>20)
				}
			}
			// The in-flight budget holds the rounds' buffers; the copies made
			// as they grow and the collector's headroom come on top.
			w.requireGrowthBelow(t, tc.growth)
		})
	}
}

// A round begun and never finished, on a socket that keeps answering
// pings, is closed once the body read timeout passes.
func TestStalledSocketRound(t *testing.T) {
	n := serve(t, sqliteOnly[0].database(t), "--body-read-timeout", "2s")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, _, err := dialRealtime(ctx, n, "mallory", "stalled")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, roundHead()); err != nil {
		t.Fatal(err)
	}
	err = readUntilClosed(ctx, c)
	if code := closeStatus(err); code != websocket.StatusPolicyViolation {
		t.Fatalf("stalled round closed with %d (%v), want %d", code, err, websocket.StatusPolicyViolation)
	}
}

// Unfinished messages: attackers begin a 60 MiB binary message, send it in
// 1 MiB fragments with pings between them, slowly. Measured before the
// fix: 10 such sockets held 60 MiB each (RSS 36 → 666 MiB) for 40 s. Now
// every fragment is charged to the node's in-flight memory (1013 when it
// has no room) and a message must be complete within the body read
// timeout (1008).
func TestUnfinishedSocketMessages(t *testing.T) {
	n := serve(t, sqliteOnly[0].database(t), "--body-read-timeout", "3s")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w := watchRSS(t, n)
	const attackers = 10
	codes := make([]int, attackers)
	var wg sync.WaitGroup
	for i := range attackers {
		wg.Go(func() {
			p, err := dialRawSocket(ctx, n, "/realtime?clientId="+fmt.Sprintf("unfinished-%d", i), "mallory")
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer p.close()
			codes[i] = p.streamUnfinished(ctx, 60, 1<<20, 200*time.Millisecond)
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != int(websocket.StatusTryAgainLater) && code != int(websocket.StatusPolicyViolation) {
			t.Errorf("attacker %d closed with %d, want %d or %d", i, code, websocket.StatusTryAgainLater, websocket.StatusPolicyViolation)
		}
	}
	t.Logf("close codes: %v", codes)
	// The in-flight budget (64 MiB) holds the messages being read; the
	// copies made as they grow and the collector's headroom come on top.
	w.requireGrowthBelow(t, 320<<20)
}

// A presence flood: one publisher sends 16 KiB documents as fast as it can
// to a key held by ten sockets that never read. Measured before the fix:
// RSS to 2.7 GiB in 12 s. Now a reader's queue holds one delivery per peer
// and key, the publisher is held to its rate, and memory stays flat.
func TestPresenceFlood(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			n := serve(t, e.database(t))
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			const sinks = 10
			for i := range sinks {
				member(ctx, t, n, "mallory", fmt.Sprintf("sink-%d", i), "l1")
			}
			member(ctx, t, n, "mallory", "publisher", "l1")
			member(ctx, t, n, "alice", "watcher", "l1")
			for i := range sinks {
				c, _, err := dialRealtime(ctx, n, "mallory", fmt.Sprintf("sink-%d", i))
				if err != nil {
					t.Fatal(err)
				}
				defer c.CloseNow() // never read: the server's writes back up
			}
			watcher, _, err := dialRealtime(ctx, n, "alice", "watcher")
			if err != nil {
				t.Fatal(err)
			}
			defer watcher.CloseNow()
			received := make(chan int, 1)
			wctx, stopWatching := context.WithCancel(ctx)
			go func() {
				count := 0
				defer func() { received <- count }()
				for {
					_, b, err := watcher.Read(wctx)
					if err != nil {
						return
					}
					if bytes.Contains(b, []byte(`"publisher"`)) {
						count++
					}
				}
			}()
			pub, _, err := dialRealtime(ctx, n, "mallory", "publisher")
			if err != nil {
				t.Fatal(err)
			}
			defer pub.CloseNow()
			go func() { _ = readUntilClosed(ctx, pub) }()
			w := watchRSS(t, n)
			pad := strings.Repeat("x", 16<<10-40)
			began := time.Now()
			published := 0
			for time.Since(began) < 8*time.Second && published < 200_000 {
				msg := fmt.Sprintf(`{"event":"presence","data":{"scopeKey":"list:l1","doc":{"n":%d,"pad":"%s"}}}`, published, pad)
				if err := pub.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
					t.Fatalf("publish %d: %v", published, err)
				}
				published++
			}
			elapsed := time.Since(began)
			time.Sleep(2 * time.Second) // the held publishes drain at the rate
			stopWatching()
			got := <-received
			w.requireGrowthBelow(t, 128<<20)
			// Default rate 10/s with bursts of 20: the watcher hears at most
			// that many, however many were published.
			most := 20 + int(10*(elapsed+3*time.Second).Seconds())
			t.Logf("published %d documents in %v; the watcher heard %d (at most %d)", published, elapsed.Round(time.Millisecond), got, most)
			if got == 0 || got > most {
				t.Fatalf("the watcher heard %d of the publisher's documents, want 1 to %d", got, most)
			}
		})
	}
}
