package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/rowcodec"
)

// goClient is a Go client of alice's projects in partition part.
func goClient(t *testing.T, s *server, part, id string) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("X-Syncd-Actor", "alice")
	h.Set("X-Syncd-Partition", part)
	h.Set("X-Syncd-Scopes", `{"owner":["alice"],"project_id":["*"]}`)
	c, err := client.New(client.Options{BaseURL: strings.TrimSuffix(s.url, "/sync"), Schema: s.sch, ClientID: id, Header: h})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
	if _, err := c.PullUntilIdle(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	return c
}

func queueProject(t *testing.T, c *client.Client, id, name string) {
	t.Helper()
	op, err := c.Upsert("projects", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner": rowcodec.String("alice"),
		"name": rowcodec.String(name), "locked": rowcodec.Bool(false)}, -1)
	if err != nil {
		t.Fatal(err)
	}
	c.Queue(op)
}

func connect(t *testing.T, c *client.Client) *client.Realtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rt, err := c.Connect(ctx, client.RealtimeOptions{ChunkBytes: 16})
	if err != nil {
		t.Fatalf("connect %s: %v", c.ClientID(), err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// next waits (with a generous bound) for the next event the client handled.
func next(t *testing.T, rt *client.Realtime) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ev, err := rt.Next(ctx)
	if err != nil {
		t.Fatalf("realtime next: %v", err)
	}
	return ev
}

func name(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	row, _, ok := c.Get("projects", id)
	if !ok {
		return ""
	}
	return row["name"].Text()
}

// Two Go clients: one writes (over HTTP, then over its own socket), the
// other receives every commit live as a delta, without polling, and acks
// it; the writer's own socket round is followed by the catch-up wake-up
// the server owes it, which the client serves with a round.
func TestRealtimeGoClientsConverge(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		a, b := goClient(t, s, "rtc", "a"), goClient(t, s, "rtc", "b")
		rb := connect(t, b)
		if h := rb.Hello(); h.ClientID != "b" || h.RequiresSync {
			t.Fatalf("hello %+v", h)
		}

		queueProject(t, a, "p-1", "One")
		res, err := a.Push(t.Context())
		if err != nil || len(res.Pushes) != 1 {
			t.Fatalf("push over HTTP: %v %+v", err, res)
		}
		ev := next(t, rb)
		if ev.Delta == nil || name(t, b, "p-1") != "One" || b.Subscription("projects").Cursor != res.Pushes[0].CommitSeq {
			t.Fatalf("want the delta of p-1, got %+v (cursor %d)", ev, b.Subscription("projects").Cursor)
		}
		waitFor(t, "b's ack stored", func() bool {
			rec, err := s.store.GetClient(t.Context(), "rtc", "b")
			return err == nil && rec != nil && rec.Cursor == res.Pushes[0].CommitSeq
		})

		// The writer's rounds go over its socket once it is connected.
		ra := connect(t, a)
		before := a.Stats()
		queueProject(t, a, "p-2", "Two")
		if res, err = a.Push(t.Context()); err != nil || len(res.Pushes) != 1 {
			t.Fatalf("push over the socket: %v %+v", err, res)
		}
		if d := a.Stats().Rounds - before.Rounds; d != 1 || a.Stats().Requests-before.Requests != 1 {
			t.Fatalf("the push was not one socket round: %+v → %+v", before, a.Stats())
		}
		if ev := next(t, rb); ev.Delta == nil || name(t, b, "p-2") != "Two" {
			t.Fatalf("want the delta of p-2, got %+v", ev)
		}
		// §8.7: the round's own commit can ride no delta: a wake-up follows.
		if ev := next(t, ra); ev.Wake == nil || ev.Wake.Reason != realtime.WakeCatchupRequired || ev.Round == nil || name(t, a, "p-2") != "Two" {
			t.Fatalf("writer: want a catch-up round, got %+v", ev)
		}

		// A reader that was away hears requiresSync and catches up by a
		// socket round; deltas flow again after it.
		rb.Close()
		queueProject(t, a, "p-3", "Three")
		if _, err := a.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		rb = connect(t, b)
		if !rb.Hello().RequiresSync {
			t.Fatalf("hello of a behind client %+v", rb.Hello())
		}
		rounds := b.Stats().Rounds
		if _, err := b.PullUntilIdle(t.Context(), 10); err != nil || name(t, b, "p-3") != "Three" || b.Stats().Rounds == rounds {
			t.Fatalf("catch-up over the socket: %v, rounds %d→%d", err, rounds, b.Stats().Rounds)
		}
		queueProject(t, a, "p-4", "Four")
		if _, err := a.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		for name(t, b, "p-4") != "Four" {
			next(t, rb)
		}
		if got, want := b.RowIDs("projects"), a.RowIDs("projects"); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("replicas differ: %v vs %v", got, want)
		}

		// Closed, the client is back on POST /sync.
		rb.Close()
		rounds = b.Stats().Rounds
		if _, err := b.Pull(t.Context()); err != nil || b.Stats().Rounds != rounds || b.Realtime() != nil {
			t.Fatalf("after Close: %v, rounds %d→%d", err, rounds, b.Stats().Rounds)
		}
	})
}

// Past the delta cap the client is woken with delta-too-large and pulls
// the commit in a round; heartbeats are answered and counted.
func TestRealtimeGoClientDeltaTooLarge(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{config: func(c *config.Config) {
			c.Realtime.MaxDeltaBytes = 32
			c.Realtime.Heartbeat = 20 * time.Millisecond
		}})
		a, b := goClient(t, s, "rtl", "a"), goClient(t, s, "rtl", "b")
		rb := connect(t, b)
		queueProject(t, a, "p-1", "One")
		if _, err := a.Push(t.Context()); err != nil {
			t.Fatal(err)
		}
		ev := next(t, rb)
		if ev.Wake == nil || ev.Wake.Reason != realtime.WakeDeltaTooLarge || ev.Round == nil || name(t, b, "p-1") != "One" {
			t.Fatalf("want delta-too-large and a round, got %+v", ev)
		}
		waitFor(t, "a heartbeat", func() bool { return rb.Heartbeats() > 0 })
		if rb.Err() != nil {
			t.Fatalf("socket ended: %v", rb.Err())
		}
	})
}
