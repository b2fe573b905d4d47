package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// A client id belongs to the first actor that uses it in the partition, by
// push as well as by pull; every other actor is refused with
// sync.invalid_client_id, and no actor is ever answered with another
// actor's idempotency record.
func TestClientIDBoundOnFirstUse(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		alice, bob, carol := call{actor: "alice"}, call{actor: "bob"}, call{actor: "carol"}
		ep := s.epoch(alice)
		req := func(client string, commits ...*ssp2.PushCommit) ssptest.Req {
			return ssptest.Req{ClientID: client, SchemaVersion: s.sch.Version, Epoch: ep, Commits: commits}
		}
		own := func(id, owner string) *ssp2.PushCommit {
			return ssptest.Commit("k1", ssptest.Upsert("projects", id, project(t, s.sch, id, owner, owner+"'s"), -1))
		}
		refused := func(c call, r ssptest.Req) {
			t.Helper()
			s.jsonError(s.post(c, r.Encode(t)), http.StatusBadRequest, syncerr.InvalidClientID)
		}
		absent := func(id string) {
			t.Helper()
			if row, err := s.store.GetRow(context.Background(), "default", "projects", id); err != nil || row != nil {
				t.Fatalf("row %s of a refused request: %+v, %v", id, row, err)
			}
		}

		// Bob pushes first under client k; Alice's own row under the same
		// client and commit id is refused, never answered with Bob's result.
		resp, _ := s.sync(bob, req("k", own("p-bob", "bob")))
		first := resp.Results[0]
		if first.Status != ssp2.PushApplied {
			t.Fatalf("bob's push %+v", first)
		}
		refused(alice, req("k", own("p-alice", "alice")))
		absent("p-alice")
		refused(alice, req("k", ssptest.Commit("k2", ssptest.Upsert("projects", "p-alice", project(t, s.sch, "p-alice", "alice", "x"), -1))))
		absent("p-alice")
		refused(alice, ssptest.Req{ClientID: "k", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true, SubTable: "projects"})
		// Bob's replay is still his.
		resp, _ = s.sync(bob, req("k", own("p-bob", "bob")))
		if r := resp.Results[0]; r.Status != ssp2.PushCached || r.CommitSeq != first.CommitSeq {
			t.Fatalf("bob's replay %+v, want cached seq %d", r, first.CommitSeq)
		}

		// The other order: Alice squats the ids Carol's device will use;
		// Carol's real commit is refused (she resets her client id), never
		// answered cached with Alice's result.
		resp, _ = s.sync(alice, req("carol-phone", own("p-squat", "alice")))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("squatting push %+v", resp.Results[0])
		}
		refused(carol, req("carol-phone", own("p-carol", "carol")))
		absent("p-carol")
		resp, _ = s.sync(carol, req("carol-phone-2", own("p-carol", "carol")))
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("carol's push under a fresh client id %+v", resp.Results[0])
		}

		// A pull binds too: Dave's pulled client id is refused to Alice.
		s.sync(call{actor: "dave"}, ssptest.Req{ClientID: "dave-1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true, SubTable: "projects"})
		refused(alice, req("dave-1", own("p-dave", "alice")))
		absent("p-dave")

		// Another partition is another namespace.
		other := call{actor: "alice", partition: "other"}
		oep := s.epoch(other)
		resp, _ = s.sync(other, ssptest.Req{ClientID: "k", SchemaVersion: s.sch.Version, Epoch: oep,
			Commits: []*ssp2.PushCommit{own("p-alice", "alice")}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("the same client id in another partition %+v", resp.Results[0])
		}
	})
}

// Two actors racing for one fresh client id, both past the request-level
// check before either push transaction starts: exactly one wins.
func TestClientIDRaceOnFreshID(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		ep := s.epoch(call{actor: "alice"})
		actors := []string{"alice", "bob"}
		for round := range 4 {
			var barrier sync.WaitGroup
			barrier.Add(len(actors))
			hold := func() { barrier.Done(); barrier.Wait() }
			s.store.beforePush.Store(&hold)
			client := fmt.Sprint("fresh-", round)
			replies := make([]reply, len(actors))
			var wg sync.WaitGroup
			for i, a := range actors {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("p-%s-%d", a, round)
					// Distinct commit ids: the binding alone must decide,
					// not the idempotency record of the other's commit.
					r := ssptest.Req{ClientID: client, SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
						ssptest.Commit("k-"+a, ssptest.Upsert("projects", id, project(t, s.sch, id, a, "x"), -1))}}
					replies[i] = s.post(call{actor: a}, r.Encode(t))
				}()
			}
			wg.Wait()
			s.store.beforePush.Store(nil)
			winners := 0
			for i, rep := range replies {
				id := fmt.Sprintf("p-%s-%d", actors[i], round)
				row, err := s.store.GetRow(context.Background(), "default", "projects", id)
				if err != nil {
					t.Fatal(err)
				}
				switch rep.status {
				case http.StatusOK:
					winners++
					if r := ssptest.DecodeResponse(t, rep.body).Results[0]; r.Status != ssp2.PushApplied || row == nil {
						t.Fatalf("round %d: %s won with %+v, row %v", round, actors[i], r, row)
					}
				default:
					s.jsonError(rep, http.StatusBadRequest, syncerr.InvalidClientID)
					if row != nil {
						t.Fatalf("round %d: the refused %s's row landed", round, actors[i])
					}
				}
			}
			if winners != 1 {
				t.Fatalf("round %d: %d actors won client %s", round, winners, client)
			}
		}
	})
}

// upgrade asks for a realtime socket under clientID and returns the
// refusal, or nil once the socket is open (and closed again).
func upgrade(t *testing.T, s *server, c call, clientID string) *reply {
	t.Helper()
	u := "ws" + strings.TrimSuffix(strings.TrimPrefix(s.url, "http"), "/sync") + "/realtime?clientId=" + url.QueryEscape(clientID)
	h := http.Header{}
	h.Set("X-Syncd-Actor", c.actor)
	h.Set("X-Syncd-Partition", c.partition)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, res, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "")
		return nil
	}
	if res == nil {
		t.Fatalf("dial realtime: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	return &reply{status: res.StatusCode, header: res.Header, body: body}
}

// Opening a socket is a use of the client id (SPEC §1.5, §8.1): the
// upgrade binds a fresh id to its actor, so another actor's push under
// it is refused, and an id another actor bound (by a push, without a
// client record) refuses the upgrade before it happens.
func TestRealtimeUpgradeBindsTheClientID(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		alice, bob := call{actor: "alice"}, call{actor: "bob"}
		ep := s.epoch(alice)
		push := func(c call, client, row string) reply {
			r := ssptest.Req{ClientID: client, SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
				ssptest.Commit("k-"+c.actor, ssptest.Upsert("projects", row, project(t, s.sch, row, c.actor, "x"), -1))}}
			return s.post(c, r.Encode(t))
		}
		if rep := push(bob, "bobs-phone", "p-bob"); rep.status != http.StatusOK {
			t.Fatalf("bob's push: %d %s", rep.status, rep.body)
		}
		rep := upgrade(t, s, alice, "bobs-phone")
		if rep == nil {
			t.Fatal("alice opened a socket under bob's client id")
		}
		s.jsonError(*rep, http.StatusBadRequest, syncerr.InvalidClientID)

		if rep := upgrade(t, s, alice, "alices-tab"); rep != nil {
			t.Fatalf("alice's socket under a fresh id: %d %s", rep.status, rep.body)
		}
		s.jsonError(push(bob, "alices-tab", "p-bob-2"), http.StatusBadRequest, syncerr.InvalidClientID)
		if a, ok, err := s.store.ClientBinding(context.Background(), "default", "alices-tab"); err != nil || !ok || a != "alice" {
			t.Fatalf("binding after the upgrade: %q %v %v, want alice", a, ok, err)
		}
	})
}
