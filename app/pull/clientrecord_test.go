package pull_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

func (e *env) record() ports.ClientRecord {
	e.t.Helper()
	rec, err := e.st.GetClient(context.Background(), part, "c1")
	if err != nil || rec == nil {
		e.t.Fatalf("client record %+v %v", rec, err)
	}
	return *rec
}

func (e *env) skips() float64 { return e.m.Value("syncd_pull_client_record_skips_total") }

// §4.5, §4.6: a pull that only moved its cursor leaves a fresh stored
// record as it is; anything else the stored record says is rewritten.
func TestClientRecordRefresh(t *testing.T) {
	const refresh = time.Minute
	cases := []struct {
		name string
		// edit changes the stored record before the second pull (nil: none).
		edit func(*ports.ClientRecord)
		// second is the second pull's subscriptions (seq 2 is then the head).
		second []subSpec
		after  time.Duration
		write  bool
		cursor int64
	}{
		{name: "cursor moved, fresh", second: []subSpec{sub("s", 1)}, after: refresh - time.Millisecond, cursor: 1},
		{name: "nothing moved, fresh", second: []subSpec{sub("s", 2)}, after: time.Second, cursor: 1},
		{name: "stale", second: []subSpec{sub("s", 1)}, after: refresh, write: true, cursor: 2},
		{name: "clock went back", second: []subSpec{sub("s", 1)}, after: -time.Second, write: true, cursor: 2},
		{name: "subscription added", second: []subSpec{sub("s", 1), sub("t", 2)}, after: time.Second, write: true, cursor: 2},
		{name: "subscription dropped", second: nil, after: time.Second, write: true, cursor: 1},
		{name: "scopes changed", second: []subSpec{{id: "s", table: "projects", scopes: map[string][]string{"owner": {"alice", "bob"}}, cursor: 1}},
			after: time.Second, write: true, cursor: 2},
		{name: "status changed", second: []subSpec{{id: "s", table: "projects", scopes: map[string][]string{"owner": {"bob"}}, cursor: 1}},
			after: time.Second, write: true, cursor: 1},
		{name: "bootstrap section", second: []subSpec{sub("s", -1)}, after: time.Second, write: true, cursor: 2},
		{name: "cursor moved back", second: []subSpec{sub("s", 1)}, after: time.Second, write: true,
			edit: func(r *ports.ClientRecord) { r.Cursor = 5 }, cursor: 2},
		{name: "stored cursor -1", second: []subSpec{sub("s", 1)}, after: time.Second, write: true,
			edit: func(r *ports.ClientRecord) { r.Cursor = -1 }, cursor: 2},
		{name: "wire version changed", second: []subSpec{sub("s", 1)}, after: time.Second, write: true,
			edit: func(r *ports.ClientRecord) { r.WireVersion = 2 }, cursor: 2},
		{name: "stored subscriptions unreadable", second: []subSpec{sub("s", 1)}, after: time.Second, write: true,
			edit: func(r *ports.ClientRecord) { r.Subscriptions = []byte(`{`) }, cursor: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(o *pull.Options) { o.ClientRefresh = refresh })
			e.seed("alice", "a", 1)
			e.ok(inlineOnly, aliceGrant, sub("s", 0))
			if c.edit != nil {
				rec := e.record()
				c.edit(&rec)
				if err := e.st.PutClient(context.Background(), rec); err != nil {
					t.Fatal(err)
				}
			}
			first := e.record()
			e.seed("alice", "b", 1)
			e.now = e.now.Add(c.after)
			e.ok(inlineOnly, aliceGrant, c.second...)
			got := e.record()
			wrote := got.UpdatedAtMs != first.UpdatedAtMs || got.Cursor != first.Cursor || string(got.Subscriptions) != string(first.Subscriptions)
			if wrote != c.write || got.Cursor != c.cursor {
				t.Fatalf("wrote %v cursor %d (%+v), want wrote %v cursor %d", wrote, got.Cursor, got, c.write, c.cursor)
			}
			if c.write && (got.UpdatedAtMs != e.now.UnixMilli() || got.WireVersion != 3) {
				t.Fatalf("rewritten record %+v", got)
			}
			if skipped := e.skips() == 1; skipped == c.write {
				t.Fatalf("skip counter %v with write %v", e.skips(), c.write)
			}
		})
	}
}

// A negative ClientRefresh writes every pull (the test-control plane).
func TestClientRecordAlwaysWritten(t *testing.T) {
	e := newEnv(t, func(o *pull.Options) { o.ClientRefresh = -1 })
	e.seed("alice", "a", 1)
	e.ok(inlineOnly, aliceGrant, sub("s", 0))
	e.now = e.now.Add(time.Millisecond)
	e.ok(inlineOnly, aliceGrant, sub("s", 1))
	if rec := e.record(); rec.UpdatedAtMs != e.now.UnixMilli() || e.skips() != 0 {
		t.Fatalf("record %+v, %v skips", rec, e.skips())
	}
}

// §4.6: a client that pulls every minute, its record written at most every
// refresh interval (a tenth of the active window), stays in the active
// floor; the floor never passes the cursor it holds, so pruning never
// resets it, and lags it by at most what the refresh interval allows.
func TestFrequentPullerHoldsTheFloor(t *testing.T) {
	const window, refresh = time.Hour, 6 * time.Minute
	e := newEnv(t, func(o *pull.Options) { o.ClientRefresh = refresh })
	pr, err := retention.New(retention.Options{Store: e.st, Unfloored: true, Now: func() time.Time { return e.now },
		Policy: retention.Policy{ActiveWindow: window, ForceAge: 1000 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cursor := int64(0)
	pulls, writes := 0, 0
	var seenAt []int64 // cursor the client held at each pull, by minute
	for minute := range 180 {
		e.now = e.now.Add(time.Minute)
		e.seed("alice", fmt.Sprintf("m%03d", minute), 1)
		prev, _ := e.st.GetClient(ctx, part, "c1")
		r := e.ok(inlineOnly, aliceGrant, sub("s", cursor))
		if r.starts[0].Status != ssp2.SubActive {
			t.Fatalf("minute %d: section %v after pruning", minute, r.starts[0].Status)
		}
		cursor = r.ends[0].NextCursor
		seenAt = append(seenAt, cursor)
		pulls++
		if rec := e.record(); prev == nil || rec.UpdatedAtMs != prev.UpdatedAtMs {
			writes++
		}
		floor, ok, err := e.st.ActiveClientCursorFloor(ctx, part, e.now.Add(-window).UnixMilli())
		if err != nil || !ok {
			t.Fatalf("minute %d: client not active (%v, %v)", minute, ok, err)
		}
		lagLimit := seenAt[max(0, len(seenAt)-1-int(refresh/time.Minute))]
		if floor > cursor || floor < lagLimit {
			t.Fatalf("minute %d: floor %d, client holds %d, lag limit %d", minute, floor, cursor, lagLimit)
		}
		if _, err := pr.PrunePartition(ctx, part); err != nil {
			t.Fatal(err)
		}
	}
	if writes*5 > pulls {
		t.Fatalf("%d writes for %d pulls", writes, pulls)
	}
}
