package contract

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// clientGroups are the client case groups, in run order.
func clientGroups() []group {
	return []group{
		{"Partitions", []testCase{
			{"TouchRegistersAndRefreshes", testTouch},
			{"RotateEpochDeletesClientRecords", testRotate},
			{"RequestHeadAgreesWithSeparateReads", testRequestHead},
			{"BoundsAndGateAgreeWithSeparateReads", testBoundsAndGate},
		}},
		{"Clients", []testCase{
			{"PutGetReplace", testClientPutGet},
			{"AdvanceCursorRules", testAdvanceCursor},
			{"ActiveCursorFloor", testCursorFloor},
		}},
		{"Bindings", bindingCases()},
	}
}

func testTouch(t *testing.T, h Harness) {
	e := open(t, h)
	if _, ok, err := e.s.LogEpoch(e.ctx, "p1"); err != nil || ok {
		t.Fatalf("epoch before touch: %v, %v", ok, err)
	}
	ep, err := e.s.TouchPartition(e.ctx, "p1", 10)
	must(t, err)
	if ep == "" {
		t.Fatal("empty log epoch")
	}
	again, err := e.s.TouchPartition(e.ctx, "p1", 20)
	must(t, err)
	if again != ep {
		t.Fatalf("touch changed the epoch: %q → %q", ep, again)
	}
	other, err := e.s.TouchPartition(e.ctx, "a0", 5)
	must(t, err)
	if other == ep {
		t.Fatal("two partitions share an epoch")
	}
	got, ok, err := e.s.LogEpoch(e.ctx, "p1")
	must(t, err)
	if !ok || got != ep {
		t.Fatalf("LogEpoch = %q, %v", got, ok)
	}
	list, err := e.s.ListPartitions(e.ctx)
	must(t, err)
	if len(list) != 2 || list[0].Partition != "a0" || list[1].Partition != "p1" {
		t.Fatalf("partitions = %+v", list)
	}
	if list[1].LogEpoch != ep || list[1].EpochRequired || list[1].LastAuthenticatedAtMs != 20 {
		t.Fatalf("registry entry = %+v", list[1])
	}
	// Pushing does not register a partition; only authentication does.
	e.commitTasks("p9", 1, []task{{id: "a", project: "p1", owner: "o"}}, nil)
	if _, ok, _ := e.s.LogEpoch(e.ctx, "p9"); ok {
		t.Fatal("a push registered its partition")
	}
}

func testRotate(t *testing.T, h Harness) {
	e := open(t, h)
	ep, err := e.s.TouchPartition(e.ctx, "p1", 10)
	must(t, err)
	_, err = e.s.TouchPartition(e.ctx, "p2", 10)
	must(t, err)
	for _, p := range []string{"p1", "p2"} {
		must(t, e.s.PutClient(e.ctx, ports.ClientRecord{Partition: p, ClientID: "c1", ActorID: "u", WireVersion: 3, Cursor: 4, Subscriptions: []byte(`[]`), UpdatedAtMs: 10}))
	}
	e.commitTasks("p1", 1, []task{{id: "a", project: "p1", owner: "o"}}, nil)
	rotated, err := e.s.RotateLogEpoch(e.ctx, "p1")
	must(t, err)
	if rotated == "" || rotated == ep {
		t.Fatalf("rotated epoch %q (was %q)", rotated, ep)
	}
	got, _, err := e.s.LogEpoch(e.ctx, "p1")
	must(t, err)
	if got != rotated {
		t.Fatalf("LogEpoch after rotation = %q", got)
	}
	list, err := e.s.ListPartitions(e.ctx)
	must(t, err)
	if !list[0].EpochRequired || list[1].EpochRequired {
		t.Fatalf("epochRequired after rotation = %+v", list)
	}
	if c, err := e.s.GetClient(e.ctx, "p1", "c1"); err != nil || c != nil {
		t.Fatalf("client record survived rotation: %+v, %v", c, err)
	}
	if c, err := e.s.GetClient(e.ctx, "p2", "c1"); err != nil || c == nil {
		t.Fatalf("rotation deleted another partition's client: %v", err)
	}
	// The log and rows stay; only continuity changes.
	if b := e.bounds("p1"); b.MaxSeq != 1 {
		t.Fatalf("bounds after rotation = %+v", b)
	}
	if r, _ := e.s.GetRow(e.ctx, "p1", "tasks", "a"); r == nil {
		t.Fatal("rotation removed rows")
	}
	// Only a registered partition rotates: a restore of a partition no
	// request ever named has no continuity to break.
	if _, err := e.s.RotateLogEpoch(e.ctx, "p9"); syncerr.CodeOf(err) != syncerr.StoragePartitionUnregistered {
		t.Fatalf("rotating an unregistered partition: %v, want %s", err, syncerr.StoragePartitionUnregistered)
	}
	if _, ok, _ := e.s.LogEpoch(e.ctx, "p9"); ok {
		t.Fatal("a refused rotation registered the partition")
	}
}

func testClientPutGet(t *testing.T, h Harness) {
	e := open(t, h)
	if c, err := e.s.GetClient(e.ctx, "p1", "c1"); err != nil || c != nil {
		t.Fatalf("absent client = %+v, %v", c, err)
	}
	rec := ports.ClientRecord{Partition: "p1", ClientID: "c1", ActorID: "u1", WireVersion: 3, Cursor: 7, Subscriptions: []byte(`[{"id":"s1","table":"tasks"}]`), UpdatedAtMs: 100}
	must(t, e.s.PutClient(e.ctx, rec))
	got, err := e.s.GetClient(e.ctx, "p1", "c1")
	must(t, err)
	if got == nil || got.ActorID != "u1" || got.WireVersion != 3 || got.Cursor != 7 || got.UpdatedAtMs != 100 || got.Partition != "p1" || got.ClientID != "c1" ||
		!jsonEqual(got.Subscriptions, `[{"id":"s1","table":"tasks"}]`) {
		t.Fatalf("client = %+v", got)
	}
	rec.Cursor, rec.UpdatedAtMs, rec.Subscriptions = 3, 200, []byte(`[]`)
	must(t, e.s.PutClient(e.ctx, rec))
	got, err = e.s.GetClient(e.ctx, "p1", "c1")
	must(t, err)
	if got.Cursor != 3 || got.UpdatedAtMs != 200 || !jsonEqual(got.Subscriptions, `[]`) {
		t.Fatalf("replaced client = %+v", got)
	}
	if c, _ := e.s.GetClient(e.ctx, "p2", "c1"); c != nil {
		t.Fatal("client record leaked across partitions")
	}
}

func testAdvanceCursor(t *testing.T, h Harness) {
	e := open(t, h)
	ep, err := e.s.TouchPartition(e.ctx, "p1", 1)
	must(t, err)
	must(t, e.s.PutClient(e.ctx, ports.ClientRecord{Partition: "p1", ClientID: "c1", ActorID: "u1", WireVersion: 3, Cursor: 5, Subscriptions: []byte(`[]`), UpdatedAtMs: 10}))
	adv := func(a ports.CursorAdvance) bool {
		t.Helper()
		ok, err := e.s.AdvanceClientCursor(e.ctx, a)
		must(t, err)
		return ok
	}
	base := ports.CursorAdvance{Partition: "p1", ClientID: "c1", ActorID: "u1", LogEpoch: ep, Cursor: 8, NowMs: 20}
	tests := []struct {
		name   string
		change func(a *ports.CursorAdvance)
	}{
		{"other actor", func(a *ports.CursorAdvance) { a.ActorID = "u2" }},
		{"stale epoch", func(a *ports.CursorAdvance) { a.LogEpoch = ep + "x" }},
		{"unknown client", func(a *ports.CursorAdvance) { a.ClientID = "c9" }},
		{"unknown partition", func(a *ports.CursorAdvance) { a.Partition = "p9" }},
	}
	for _, tt := range tests {
		a := base
		tt.change(&a)
		if adv(a) {
			t.Errorf("%s: advanced", tt.name)
		}
	}
	if c, _ := e.s.GetClient(e.ctx, "p1", "c9"); c != nil {
		t.Fatal("advance created a record")
	}
	c, _ := e.s.GetClient(e.ctx, "p1", "c1")
	if c.Cursor != 5 || c.UpdatedAtMs != 10 {
		t.Fatalf("refused advances changed the record: %+v", c)
	}
	// An older ack marks the client active but never moves the cursor back.
	back := base
	back.Cursor, back.NowMs = 4, 15
	if !adv(back) {
		t.Fatal("matching ack refused")
	}
	c, _ = e.s.GetClient(e.ctx, "p1", "c1")
	if c.Cursor != 5 || c.UpdatedAtMs != 15 {
		t.Fatalf("after an older ack = %+v, want cursor 5 seen 15", c)
	}
	if !adv(base) {
		t.Fatal("valid advance refused")
	}
	c, _ = e.s.GetClient(e.ctx, "p1", "c1")
	if c.Cursor != 8 || c.UpdatedAtMs != 20 || c.ActorID != "u1" || c.WireVersion != 3 || !jsonEqual(c.Subscriptions, `[]`) {
		t.Fatalf("advanced record = %+v", c)
	}
	// Timestamps never move back either.
	late := base
	late.Cursor, late.NowMs = 9, 12
	if !adv(late) {
		t.Fatal("matching ack refused")
	}
	c, _ = e.s.GetClient(e.ctx, "p1", "c1")
	if c.Cursor != 9 || c.UpdatedAtMs != 20 {
		t.Fatalf("after a late ack = %+v, want cursor 9 seen 20", c)
	}
}

func testCursorFloor(t *testing.T, h Harness) {
	e := open(t, h)
	if _, ok, err := e.s.ActiveClientCursorFloor(e.ctx, "p1", 0); err != nil || ok {
		t.Fatalf("floor without clients: %v, %v", ok, err)
	}
	for _, c := range []struct {
		id     string
		cursor int64
		seen   int64
	}{{"a", 10, 100}, {"b", 3, 50}, {"c", 7, 200}, {"none", -1, 300}} {
		must(t, e.s.PutClient(e.ctx, ports.ClientRecord{Partition: "p1", ClientID: c.id, ActorID: "u", WireVersion: 3, Cursor: c.cursor, Subscriptions: []byte(`[]`), UpdatedAtMs: c.seen}))
	}
	for _, tt := range []struct {
		cutoff int64
		want   int64
		ok     bool
	}{{0, 3, true}, {50, 3, true}, {51, 7, true}, {200, 7, true}, {201, 0, false}, {301, 0, false}} {
		got, ok, err := e.s.ActiveClientCursorFloor(e.ctx, "p1", tt.cutoff)
		must(t, err)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("floor(cutoff %d) = %d, %v; want %d, %v", tt.cutoff, got, ok, tt.want, tt.ok)
		}
	}
}
