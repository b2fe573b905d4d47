package e2e

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestStaleStorageReadFailsTheCombinedRound is SPEC §7 and §10.2: when the
// pull of a combined round reads a log maximum below a commit the same
// request applied, the round fails with sync.storage_stale_read (500,
// not retryable, inspectServer) before any byte of the SSP2 response,
// over HTTP and on a socket alike. The commit stays durable under its
// idempotency key: once storage reads fresh again, a retry gets the
// cached result and the pull delivers the commit.
func TestStaleStorageReadFailsTheCombinedRound(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s := start(t, e, serverOpts{})
		c := alice("stale")
		r := newReplica(t, s, c, "c1")
		sub := r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		insert := func(ccid, id string) *ssp2.PushCommit {
			return ssptest.Commit(ccid, ssptest.Upsert("projects", id, project(t, s.sch, id, "alice", id), -1))
		}
		// Fresh storage: the combined round is served.
		if resp := r.pull(insert("k1", "p-1")); resp.Results[0].Status != ssp2.PushApplied || sub.cursor != 1 {
			t.Fatalf("fresh round: %+v, cursor %d", resp.Results[0], sub.cursor)
		}
		wantLog := func(max int64) {
			t.Helper()
			if b, err := s.store.Storage.LogBounds(ctx, "stale"); err != nil || b.MaxSeq != max {
				t.Fatalf("log max %d, %v: want %d", b.MaxSeq, err, max)
			}
		}

		// Storage one commit behind: the pull reads max 1 after k2 applied as 2.
		s.store.staleBy.Store(1)
		rep := s.post(c, r.request(insert("k2", "p-2")))
		body := s.jsonError(rep, http.StatusInternalServerError, syncerr.StorageStaleRead)
		if body["category"] != "internal" || body["retryable"] != false || body["recommendedAction"] != "inspectServer" {
			t.Fatalf("error body %s", rep.body)
		}
		if ct := rep.header.Get("Content-Type"); ct != httpapi.ContentTypeJSON || bytes.Contains(rep.body, []byte("SSP2")) {
			t.Fatalf("a partial SSP2 response escaped: %s %q", ct, rep.body)
		}
		if len(s.logs.FilterMessageSnippet("sync storage read is stale").All()) != 1 {
			t.Fatal("the stale read was not logged for the operator")
		}
		// The push is durable; the client record kept the cursor the client holds.
		wantLog(2)
		if row, err := s.store.GetRow(ctx, "stale", "projects", "p-2"); err != nil || row == nil || row.Version != 1 {
			t.Fatalf("pushed row %+v %v", row, err)
		}
		if rec, err := s.store.GetClient(ctx, "stale", "c1"); err != nil || rec == nil || rec.Cursor != 1 {
			t.Fatalf("client record %+v %v", rec, err)
		}
		// A socket round runs the same round: an in-band ERROR frame
		// instead of its sections, and the socket stays usable. (Its
		// client has no subscription registered yet, so no delta of the
		// commit can come between the rounds.)
		rt := newReplica(t, s, c, "rt")
		rt.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		k := dial(t, s, c, "rt")
		if _, ok := k.event().(*realtime.Hello); !ok {
			t.Fatal("hello first")
		}
		got := ssptest.DecodeResponse(t, k.round(rt.request(insert("k3", "p-3")), 1<<16))
		if got.Error == nil || got.Error.Code != string(syncerr.StorageStaleRead) || got.Error.Retryable ||
			got.Error.RecommendedAction != "inspectServer" || len(got.Results) != 0 || len(got.Msg.Frames) != 2 {
			t.Fatalf("socket round: error %+v, frames %+v", got.Error, got.Msg.Frames)
		}
		wantLog(3)

		// Storage repaired: each retry of its original key is the cached
		// result, nothing is applied again, and the pull catches up.
		s.store.staleBy.Store(0)
		resp := r.pull(insert("k2", "p-2"))
		if res := resp.Results[0]; res.Status != ssp2.PushCached || res.CommitSeq != 2 || len(res.Results) != 1 ||
			res.Results[0].Status != ssp2.OpApplied || sub.cursor != 3 {
			t.Fatalf("HTTP retry: %+v, cursor %d", res, sub.cursor)
		}
		got = ssptest.DecodeResponse(t, k.round(rt.request(insert("k3", "p-3")), 1<<16))
		if got.Error != nil || len(got.Results) != 1 || got.Results[0].Status != ssp2.PushCached || got.Results[0].CommitSeq != 3 {
			t.Fatalf("socket retry: error %+v, results %+v", got.Error, got.Results)
		}
		wantLog(3)
		if rows := r.table("projects"); len(rows) != 3 {
			t.Fatalf("replica rows %+v", rows)
		}
	})
}
