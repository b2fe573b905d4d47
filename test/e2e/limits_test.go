package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestUnusableIdentityCannotPoisonAScope: with development authentication
// a request names its own actor. One that is not well-formed UTF-8 used to
// be accepted and stored with the commit; from then on every incremental
// pull of the scope failed, because the server cannot encode that actor in
// a COMMIT frame. The identity is now refused at authentication, nothing is
// stored, and the scope keeps being served.
func TestUnusableIdentityCannotPoisonAScope(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		alice := newReplica(t, s, call{actor: "alice"}, "alice-1")
		sub := alice.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		alice.pull()
		if sub.status != ssp2.SubActive || sub.cursor < 0 {
			t.Fatalf("bootstrap: %+v", sub)
		}
		planted := ssptest.Req{ClientID: "mallory-1", SchemaVersion: s.sch.Version,
			Epoch: alice.epoch, Commits: []*ssp2.PushCommit{ssptest.Commit("m1",
				ssptest.Upsert("projects", "p-bad", project(t, s.sch, "p-bad", "alice", "planted"), -1))}}.Encode(t)
		for _, bad := range []string{"m\xffllory", strings.Repeat("m", limits.DefaultMaxIDBytes+1)} {
			s.jsonError(s.post(call{actor: bad}, planted), http.StatusUnauthorized, syncerr.AuthRequired)
		}
		// A control character cannot travel in a header; the query names it.
		req, err := http.NewRequest(http.MethodPost, s.url+"?actor="+url.QueryEscape("mal\x1blory"), bytes.NewReader(planted))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", httpapi.ContentTypeSync)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		s.jsonError(reply{status: res.StatusCode, body: body}, http.StatusUnauthorized, syncerr.AuthRequired)
		// A valid actor writes into the same scope; the incremental pulls
		// keep working and never saw the refused write.
		bob := call{actor: "bob"}
		resp, _ := s.sync(bob, ssptest.Req{ClientID: "bob-1", SchemaVersion: s.sch.Version, Epoch: alice.epoch,
			Commits: []*ssp2.PushCommit{ssptest.Commit("b1",
				ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "shared"), -1))}})
		if resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("bob's push: %+v", resp.Results[0])
		}
		for range 2 {
			alice.pull()
		}
		rows := alice.table("projects")
		if _, planted := rows["p-bad"]; planted || rows["p-1"].label != "shared" || len(rows) != 1 {
			t.Fatalf("alice's replica: %+v", rows)
		}
	})
}

// TestIdentifierAndShapeLimits: ids, scope values and subscription counts
// past the limits are refused with catalog errors on every engine, and a
// row whose scope value is past the limit is rejected before it is stored.
func TestIdentifierAndShapeLimits(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{actor: "alice"}
		ep := s.epoch(c)
		long := strings.Repeat("x", limits.DefaultMaxIDBytes+1)

		rep := s.post(c, ssptest.Req{ClientID: long, SchemaVersion: s.sch.Version, Epoch: ep,
			Commits: []*ssp2.PushCommit{ssptest.Commit("k1", ssptest.Delete("projects", "p-1"))}}.Encode(t))
		s.jsonError(rep, http.StatusBadRequest, syncerr.InvalidClientID)
		rep = s.post(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep,
			Commits: []*ssp2.PushCommit{ssptest.Commit(long, ssptest.Delete("projects", "p-1"))}}.Encode(t))
		s.jsonError(rep, http.StatusBadRequest, syncerr.InvalidRequest)

		pull := func(subs ...*pullSub) reply {
			r := newReplica(t, s, c, "c1")
			r.subs = subs
			return s.post(c, r.request())
		}
		sub := func(id string, values ...string) *pullSub {
			return &pullSub{id: id, table: "projects", scopes: map[string][]string{"owner": values}, cursor: -1}
		}
		s.jsonError(pull(sub(long, "alice")), http.StatusBadRequest, syncerr.InvalidSubscription)
		s.jsonError(pull(sub("s", strings.Repeat("a", limits.DefaultMaxScopeValueBytes+1))), http.StatusBadRequest, syncerr.InvalidSubscription)
		many := make([]string, limits.DefaultMaxScopeValues+1)
		for i := range many {
			many[i] = "v" + strings.Repeat("0", i%7) + string(rune('a'+i%26))
		}
		s.jsonError(pull(sub("s", many...)), http.StatusBadRequest, syncerr.InvalidSubscription)
		subs := make([]*pullSub, limits.DefaultMaxSubscriptions+1)
		for i := range subs {
			subs[i] = sub("s"+strings.Repeat("i", i), "alice")
		}
		s.jsonError(pull(subs...), http.StatusBadRequest, syncerr.InvalidRequest)
		if rep := pull(subs[:limits.DefaultMaxSubscriptions]...); rep.status != http.StatusOK {
			t.Fatalf("%d subscriptions: %d %s", limits.DefaultMaxSubscriptions, rep.status, rep.body)
		}

		// A stored scope value past the limit: that commit is rejected, the
		// batch goes on, and nothing of it is stored.
		owner := strings.Repeat("o", 3000)
		resp, _ := s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep,
			Commits: []*ssp2.PushCommit{
				ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", owner, "big"), -1)),
				ssptest.Commit("k3", ssptest.Upsert("projects", "p-3", project(t, s.sch, "p-3", "alice", "ok"), -1)),
			}})
		rejected(t, resp.Results[0], 0, string(syncerr.InvalidRequest))
		if resp.Results[1].Status != ssp2.PushApplied {
			t.Fatalf("the next commit: %+v", resp.Results[1])
		}
	})
}
