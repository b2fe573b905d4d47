package blobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
)

func (f *fixture) stored(id string) bool {
	_, ok, _ := f.blobs.Stat(context.Background(), "p1", id)
	return ok
}

func TestGC(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	oldOrphan := f.upload(alice, []byte("abandoned upload"))
	oldReferenced := f.upload(alice, []byte("attached long ago"))
	oldUnreferenced := f.upload(alice, []byte("attached, then detached"))
	f.attach("t1", "pa", oldReferenced)
	f.attach("t2", "pa", oldUnreferenced)
	f.attach("t2", "pa", "") // the row drops its attachment
	f.now = f.now.Add(DefaultOrphanGrace - time.Minute)
	young := f.upload(alice, []byte("uploaded a minute before the sweep"))
	f.now = f.now.Add(time.Minute + time.Millisecond)

	res, err := f.svc.CollectAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0] != (GCResult{Partition: "p1", Claimed: 2, Deleted: 2}) {
		t.Fatalf("sweep = %+v", res)
	}
	for id, want := range map[string]bool{oldOrphan: false, oldUnreferenced: false, oldReferenced: true, young: true} {
		if f.stored(id) != want {
			t.Errorf("blob %s stored = %v, want %v", id[:16], !want, want)
		}
	}
	if claims, _ := f.store.ListBlobClaims(ctx, "p1"); len(claims) != 0 {
		t.Fatalf("claims left after the sweep: %v", claims)
	}
	// A second pass finds nothing more; the young blob goes once it is old.
	if r, _ := f.svc.CollectPartition(ctx, "p1"); r.Deleted != 0 {
		t.Fatalf("second pass = %+v", r)
	}
	f.now = f.now.Add(DefaultOrphanGrace)
	if r, _ := f.svc.CollectPartition(ctx, "p1"); r.Deleted != 1 || f.stored(young) {
		t.Fatalf("pass after the young blob aged = %+v", r)
	}
	if len(f.m.collected) != 3 {
		t.Fatalf("sweep metrics %+v", f.m.collected)
	}
}

func TestGCPagesAndGrace(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.GCPage, o.OrphanGrace = 2, time.Hour })
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		ids = append(ids, f.upload(alice, fmt.Appendf(nil, "orphan %d", i)))
	}
	f.attach("t1", "pa", ids[2])
	f.now = f.now.Add(time.Hour + time.Millisecond)
	r, err := f.svc.CollectPartition(ctx, "p1")
	if err != nil || r.Deleted != 4 {
		t.Fatalf("sweep over pages of two = %+v %v", r, err)
	}
	if f.blobs.Len() != 1 || !f.stored(ids[2]) {
		t.Fatalf("%d blobs kept, want only the referenced one", f.blobs.Len())
	}
}

func TestGCFinishesLeftClaims(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.upload(alice, []byte("claimed by a sweep that stopped"))
	// A claim without its deletion: a sweep stopped between the two.
	if err := f.store.Push(ctx, "p1", ports.PushOptions{}, func(tx ports.PushTx) error {
		_, err := tx.ClaimOrphanBlobs(ctx, []string{a}, 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r, err := f.svc.CollectPartition(ctx, "p1")
	if err != nil || r.Deleted != 1 || f.stored(a) {
		t.Fatalf("sweep = %+v %v; the claimed blob (not yet past its grace) must go", r, err)
	}
	if claims, _ := f.store.ListBlobClaims(ctx, "p1"); len(claims) != 0 {
		t.Fatalf("claims left: %v", claims)
	}
}

type deleteFails struct {
	ports.BlobStore
	bad string
}

func (d deleteFails) Delete(ctx context.Context, partition, id string) error {
	if id == d.bad {
		return errors.New("store unavailable")
	}
	return d.BlobStore.Delete(ctx, partition, id)
}

func TestGCKeepsTheClaimOfAFailedDeletion(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Blobs = deleteFails{BlobStore: o.Blobs, bad: contentaddr.Of([]byte("stuck"))} })
	ctx := context.Background()
	bad := f.upload(alice, []byte("stuck"))
	fine := f.upload(alice, []byte("fine"))
	f.now = f.now.Add(DefaultOrphanGrace + time.Millisecond)
	r, err := f.svc.CollectPartition(ctx, "p1")
	if err == nil || r.Deleted != 1 || f.stored(fine) || !f.stored(bad) {
		t.Fatalf("sweep = %+v %v", r, err)
	}
	// The claim stays: pushes keep refusing the blob the store still holds.
	if claims, _ := f.store.ListBlobClaims(ctx, "p1"); len(claims) != 1 || claims[0] != bad {
		t.Fatalf("claims = %v, want the failed one", claims)
	}
}

// TestGCRacesPushes: pushes that reference old orphans (checking, under
// the partition lock, that the blob exists and is not claimed, as the push
// pipeline does) race collections. Every orphan ends one way or the
// other, never both and never neither: referenced by a committed row and
// still stored, or swept and referenced by nothing. Rounds repeat until
// one has ended both ways, so the race was run, not one side alone.
func TestGCRacesPushes(t *testing.T) {
	const n, maxRounds = 30, 1000
	for round := 1; ; round++ {
		referenced, swept := gcRace(t, n)
		if referenced > 0 && swept > 0 {
			t.Logf("round %d: %d of %d orphans referenced before a sweep claimed them, %d swept", round, referenced, n, swept)
			return
		}
		if round == maxRounds {
			t.Fatalf("%d rounds, none with orphans both referenced and swept: the race never ran", maxRounds)
		}
	}
}

// gcRace runs one race of n pushes and three collections over n old
// orphans and returns how many ended referenced and how many swept. The
// collections claim in pages of two, each page its own transaction, so
// their claims interleave with the pushes; all start together.
func gcRace(t *testing.T, n int) (referenced, swept int) {
	t.Helper()
	f := newFixture(t, func(o *Options) { o.GCPage = 2 })
	ctx := context.Background()
	ids := make([]string, n)
	for i := range n {
		ids[i] = f.upload(alice, fmt.Appendf(nil, "orphan %d", i))
	}
	f.now = f.now.Add(DefaultOrphanGrace + time.Millisecond)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			rowID := fmt.Sprint("t", i)
			err := f.store.Push(ctx, "p1", ports.PushOptions{}, func(tx ports.PushTx) error {
				ok, err := f.svc.BlobExists(ctx, "p1", ids[i])
				if err != nil || !ok {
					return err
				}
				if claimed, err := tx.BlobClaimed(ctx, ids[i]); err != nil || claimed {
					return err
				}
				if err := tx.UpsertRow(ctx, "tasks", taskWrite(rowID)); err != nil {
					return err
				}
				return tx.SetBlobRefs(ctx, "tasks", rowID, []string{ids[i]})
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			<-start
			if _, err := f.svc.CollectPartition(ctx, "p1"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	refs, err := f.store.ListReferencedBlobIDs(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	isRef := map[string]bool{}
	for _, id := range refs {
		isRef[id] = true
	}
	for _, id := range ids {
		switch stored := f.stored(id); {
		case isRef[id] && stored:
			referenced++
		case !isRef[id] && !stored:
			swept++
		case isRef[id]:
			t.Fatalf("blob %s is referenced but was swept", id)
		default:
			t.Fatalf("blob %s is neither referenced nor swept", id)
		}
	}
	return referenced, swept
}

func taskWrite(rowID string) ports.RowWrite {
	return ports.RowWrite{RowID: rowID, Version: 1, Scopes: map[string]string{"project_id": "pa"},
		Payload: []byte{0}, Values: []any{rowID, "pa", rowID, false, nil, nil}}
}

// TestGCPass: the scheduled pass collects every partition and counts
// itself.
func TestGCPass(t *testing.T) {
	f := newFixture(t)
	f.upload(alice, []byte("orphan"))
	f.now = f.now.Add(DefaultOrphanGrace + time.Millisecond)
	if err := f.svc.GC.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if len(f.m.collected) != 1 || f.m.collected[0].Deleted != 1 {
		t.Fatalf("swept %+v, want one orphan deleted", f.m.collected)
	}
	if f.m.passes[false] != 1 {
		t.Fatalf("passes %v, want one ok", f.m.passes)
	}
}
