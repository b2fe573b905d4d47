package contract

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// adminGroups are the admin read cases (ports.AdminReader).
func adminGroups() []group {
	return []group{
		{"Admin", []testCase{
			{"PartitionsRegisteredOrLogged", testAdminPartitions},
			{"ClientsKeysetInByteOrder", testAdminClients},
			{"CommitsMetadataBySeqRange", testAdminCommits},
			{"ReactionCountsByStatus", testAdminReactionCounts},
			{"LimitRefused", testAdminLimits},
		}},
	}
}

func adminReader(t *testing.T, h Harness) (*env, ports.AdminReader) {
	t.Helper()
	e := open(t, h)
	a, ok := e.s.(ports.AdminReader)
	if !ok {
		t.Skip("storage does not implement ports.AdminReader")
	}
	return e, a
}

func (e *env) putClient(partition, clientID string, cursor, updatedAt int64, subs string) {
	e.t.Helper()
	_, err := e.s.BindClient(e.ctx, partition, clientID, "actor-"+clientID)
	must(e.t, err)
	must(e.t, e.s.PutClient(e.ctx, ports.ClientRecord{Partition: partition, ClientID: clientID, ActorID: "actor-" + clientID,
		WireVersion: 3, Cursor: cursor, Subscriptions: []byte(subs), UpdatedAtMs: updatedAt}))
}

func partitionNames(ps []ports.AdminPartition) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Partition
	}
	return out
}

// testAdminPartitions: a partition is listed once it is registered or has
// a commit, in byte order ("B" before "a"), with its epoch, log bounds
// and client count; pages continue after the last name.
func testAdminPartitions(t *testing.T, h Harness) {
	e, a := adminReader(t, h)
	epoch, err := e.s.TouchPartition(e.ctx, "a", 100)
	must(t, err)
	e.putClient("a", "c1", 0, 100, "[]")
	e.putClient("a", "c2", 0, 100, "[]")
	e.commitTasks("B", 10, []task{{id: "t1", project: "p", owner: "o"}}, nil)
	e.commitTasks("B", 11, []task{{id: "t2", project: "p", owner: "o"}}, nil)
	got, err := a.AdminPartitions(e.ctx, ports.AdminPage{Limit: 10})
	must(t, err)
	want := []ports.AdminPartition{
		{Partition: "B", MaxCommitSeq: 2},
		{Partition: "a", Registered: true, LogEpoch: epoch, LastAuthenticatedAtMs: 100, ClientCount: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("partitions = %+v, want %+v", got, want)
	}
	page, err := a.AdminPartitions(e.ctx, ports.AdminPage{Limit: 1})
	must(t, err)
	if !equalStrings(partitionNames(page), []string{"B"}) {
		t.Fatalf("first page = %v, want [B]", partitionNames(page))
	}
	page, err = a.AdminPartitions(e.ctx, ports.AdminPage{After: "B", Limit: 1})
	must(t, err)
	if !equalStrings(partitionNames(page), []string{"a"}) {
		t.Fatalf("page after B = %v, want [a]", partitionNames(page))
	}
	page, err = a.AdminPartitions(e.ctx, ports.AdminPage{After: "a", Limit: 1})
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("page after the last = %v, want none", partitionNames(page))
	}
	// Pruning shows as the horizon.
	bEpoch, err := e.s.TouchPartition(e.ctx, "B", 200)
	must(t, err)
	_, err = e.s.PruneCommitsThrough(e.ctx, "B", ports.PruneRequest{LogEpoch: bEpoch, ThroughSeq: 1})
	must(t, err)
	page, err = a.AdminPartitions(e.ctx, ports.AdminPage{Limit: 1})
	must(t, err)
	if len(page) != 1 || !page[0].Registered || page[0].HorizonSeq != 1 || page[0].MaxCommitSeq != 2 || page[0].LogEpoch != bEpoch {
		t.Fatalf("pruned partition = %+v", page)
	}
}

// testAdminClients: the partition's records in byte order of their ids,
// with every field; other partitions' records stay out.
func testAdminClients(t *testing.T, h Harness) {
	e, a := adminReader(t, h)
	subs := `[{"id":"s1","table":"tasks"},{"id":"s2","table":"tasks"}]`
	e.putClient("p1", "c2", 7, 300, subs)
	e.putClient("p1", "c1", 5, 200, "[]")
	e.putClient("p1", "C3", 9, 400, "[]")
	e.putClient("p2", "c0", 1, 100, "[]")
	got, err := a.AdminClients(e.ctx, "p1", ports.AdminPage{Limit: 10})
	must(t, err)
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ClientID)
	}
	if !equalStrings(ids, []string{"C3", "c1", "c2"}) {
		t.Fatalf("clients = %v, want [C3 c1 c2]", ids)
	}
	c := got[2]
	if c.Partition != "p1" || c.ActorID != "actor-c2" || c.WireVersion != 3 || c.Cursor != 7 || c.UpdatedAtMs != 300 || !jsonEqual(c.Subscriptions, subs) {
		t.Fatalf("client c2 = %+v (subscriptions %s)", c, c.Subscriptions)
	}
	page, err := a.AdminClients(e.ctx, "p1", ports.AdminPage{After: "c1", Limit: 1})
	must(t, err)
	if len(page) != 1 || page[0].ClientID != "c2" {
		t.Fatalf("page after c1 = %+v, want c2", page)
	}
	none, err := a.AdminClients(e.ctx, "missing", ports.AdminPage{Limit: 10})
	must(t, err)
	if len(none) != 0 {
		t.Fatalf("clients of an unknown partition = %+v", none)
	}
}

// testAdminCommits: commit metadata (no payloads) by seq range, with the
// change count and the distinct tables; an empty commit has neither;
// pruned commits are gone.
func testAdminCommits(t *testing.T, h Harness) {
	e, a := adminReader(t, h)
	e.commitTasks("p1", 10, []task{{id: "t1", project: "p", owner: "o"}, {id: "t2", project: "p", owner: "o"}}, nil)
	must(t, e.push("p1", func(tx ports.PushTx) error {
		if err := tx.UpsertRow(e.ctx, "notes", noteWrite(1, "p")); err != nil {
			return err
		}
		k := task{id: "t3", project: "p", owner: "o"}
		if err := tx.UpsertRow(e.ctx, "tasks", k.write(1)); err != nil {
			return err
		}
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 20, ActorID: "u2", ClientID: "cl2", ClientCommitID: "cc2",
			Changes: []commit.Change{noteUpsert(1, "p"), k.upsert()}})
		return err
	}))
	must(t, e.push("p1", func(tx ports.PushTx) error {
		_, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 30, ActorID: "u3", ClientID: "cl3", ClientCommitID: "cc3"})
		return err
	}))
	got, err := a.AdminCommits(e.ctx, "p1", ports.AdminCommitRange{Limit: 10})
	must(t, err)
	want := []ports.AdminCommit{
		{Seq: 1, CreatedAtMs: 10, ActorID: "actor", ClientID: "client", ClientCommitID: "cc-10-2", ChangeCount: 2, Tables: []string{"tasks"}},
		{Seq: 2, CreatedAtMs: 20, ActorID: "u2", ClientID: "cl2", ClientCommitID: "cc2", ChangeCount: 2, Tables: []string{"notes", "tasks"}},
		{Seq: 3, CreatedAtMs: 30, ActorID: "u3", ClientID: "cl3", ClientCommitID: "cc3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("commits =\n%+v\nwant\n%+v", got, want)
	}
	for _, tc := range []struct {
		q    ports.AdminCommitRange
		want []int64
	}{
		{ports.AdminCommitRange{AfterSeq: 1, Limit: 10}, []int64{2, 3}},
		{ports.AdminCommitRange{AfterSeq: 0, ThroughSeq: 2, Limit: 10}, []int64{1, 2}},
		{ports.AdminCommitRange{AfterSeq: 0, Limit: 1}, []int64{1}},
		{ports.AdminCommitRange{AfterSeq: 3, Limit: 10}, nil},
	} {
		got, err := a.AdminCommits(e.ctx, "p1", tc.q)
		must(t, err)
		var seqs []int64
		for _, c := range got {
			seqs = append(seqs, c.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.want) {
			t.Fatalf("commits %+v = %v, want %v", tc.q, seqs, tc.want)
		}
	}
	epoch, err := e.s.TouchPartition(e.ctx, "p1", 100)
	must(t, err)
	_, err = e.s.PruneCommitsThrough(e.ctx, "p1", ports.PruneRequest{LogEpoch: epoch, ThroughSeq: 2})
	must(t, err)
	got, err = a.AdminCommits(e.ctx, "p1", ports.AdminCommitRange{Limit: 10})
	must(t, err)
	if len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("commits after pruning through 2 = %+v, want only 3", got)
	}
}

// testAdminReactionCounts: counts by status, per partition and overall.
func testAdminReactionCounts(t *testing.T, h Harness) {
	e, a := adminReader(t, h)
	enqueue := func(partition string, keys ...string) {
		must(t, e.push(partition, func(tx ports.PushTx) error {
			seq, err := tx.AppendCommit(e.ctx, ports.NewCommit{CreatedAtMs: 10, ActorID: "a", ClientID: "c", ClientCommitID: "cc"})
			if err != nil {
				return err
			}
			var rs []ports.Reaction
			for _, k := range keys {
				rs = append(rs, reaction(k, "email", 10))
			}
			return tx.EnqueueReactions(e.ctx, ports.ReactionSource{ClientID: "c", ClientCommitID: "cc", CommitSeq: seq, CreatedAtMs: 10}, rs)
		}))
	}
	enqueue("p1", "a", "b", "c")
	enqueue("p2", "d")
	wantP1 := map[ports.ReactionStatus]int64{ports.ReactionPending: 3}
	if q, ok := e.s.(ports.ReactionQueue); ok {
		got, err := q.ClaimReactions(e.ctx, "p1", ports.ReactionClaim{LeaseOwner: "w", Types: []string{"email"}, NowMs: 10, LeaseDurationMs: 100, Limit: 1})
		must(t, err)
		if len(got) != 1 {
			t.Fatalf("claimed %d, want 1", len(got))
		}
		wantP1 = map[ports.ReactionStatus]int64{ports.ReactionPending: 2, ports.ReactionLeased: 1}
	}
	for _, tc := range []struct {
		partition string
		want      map[ports.ReactionStatus]int64
	}{
		{"p1", wantP1},
		{"p2", map[ports.ReactionStatus]int64{ports.ReactionPending: 1}},
		{"", map[ports.ReactionStatus]int64{ports.ReactionPending: wantP1[ports.ReactionPending] + 1, ports.ReactionLeased: wantP1[ports.ReactionLeased]}},
		{"none", map[ports.ReactionStatus]int64{}},
	} {
		got, err := a.AdminReactionCounts(e.ctx, tc.partition)
		must(t, err)
		for k, v := range tc.want {
			if v == 0 {
				delete(tc.want, k)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("reaction counts of %q = %v, want %v", tc.partition, got, tc.want)
		}
	}
}

// testAdminLimits: every list refuses a limit below 1.
func testAdminLimits(t *testing.T, h Harness) {
	e, a := adminReader(t, h)
	_, err := a.AdminPartitions(e.ctx, ports.AdminPage{Limit: 0})
	wantCode(t, err, syncerr.StorageInvalidLimit)
	_, err = a.AdminClients(e.ctx, "p1", ports.AdminPage{Limit: -1})
	wantCode(t, err, syncerr.StorageInvalidLimit)
	_, err = a.AdminCommits(e.ctx, "p1", ports.AdminCommitRange{Limit: 0})
	wantCode(t, err, syncerr.StorageInvalidLimit)
}
