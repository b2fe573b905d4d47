package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// Rows builds n item writes for one org.
func Rows(n int, org string) []ports.RowWrite {
	out := make([]ports.RowWrite, n)
	for i := range out {
		out[i] = Item(fmt.Sprintf("row-%07d", i), org, i)
	}
	return out
}

// BenchRequestHead measures the read every pull starts with: the request
// head of a known client with the optimistic idempotency lookup, on a
// store whose partition touch is not due (e must open its stores with a
// touch interval, as a server does; without one every call also writes).
func BenchRequestHead(b *testing.B, e Engine) {
	ctx := context.Background()
	s := e.open(b)
	if err := benchPush(ctx, s, 1); err != nil {
		b.Fatal(err)
	}
	q := ports.HeadQuery{Partition: "p", ClientID: "c", Running: 1, NowMs: 1_000, PushClientID: "c", PushClientCommitID: "cc1"}
	if _, err := s.TouchPartitionHead(ctx, q); err != nil { // the touch, due once
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h, err := s.TouchPartitionHead(ctx, q)
		if err != nil || !h.PushFound {
			b.Fatalf("head %+v, %v", h, err)
		}
	}
}

// BenchPushAppend measures one typical single-operation push: lock, read
// the row, upsert it, append the commit and store the result.
func BenchPushAppend(b *testing.B, e Engine) {
	ctx := context.Background()
	s := e.open(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := benchPush(ctx, s, int64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPush is one push of the push path's statements: the locked replay
// check, the row read, the upsert, the commit and the result, as push i.
func benchPush(ctx context.Context, s ports.Storage, i int64) error {
	w := Item(fmt.Sprintf("r%d", i%1000), "a", 0)
	w.Version = i
	cc := fmt.Sprint("cc", i)
	return s.Push(ctx, "p", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
		if _, ok, err := tx.GetPushResult(ctx, "c", cc); err != nil || ok {
			return fmt.Errorf("replay check: %v %v", ok, err)
		}
		if _, err := tx.GetRow(ctx, "items", w.RowID); err != nil {
			return err
		}
		if err := tx.UpsertRow(ctx, "items", w); err != nil {
			return err
		}
		if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: 1, ActorID: "a", ClientID: "c", ClientCommitID: cc,
			Changes: []commit.Change{Change(w)}}); err != nil {
			return err
		}
		_, err := tx.PutPushResult(ctx, "c", cc, []byte(`{"status":"applied"}`))
		return err
	})
}

// BenchPushAppendParallel is BenchPushAppend from 16 goroutines per
// GOMAXPROCS at once, all to one partition: what group commit buys when
// pushes queue behind each other.
func BenchPushAppendParallel(b *testing.B, e Engine) {
	ctx := context.Background()
	s := e.open(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := benchPush(ctx, s, n.Add(1))
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchWindowRead measures commit-window reads over a 2,000-commit log:
// an incremental page of 100 changes where every other commit is the
// scope's (candidates from the scope index), and a catch-up page of 1,000
// where every commit is (read by seq range after the probe page).
func BenchWindowRead(b *testing.B, e Engine) {
	for _, bc := range []struct {
		name   string
		orgs   []string
		w      ports.CommitWindow
		expect int
	}{
		{"alternating/limit100", []string{"a", "b"}, ports.CommitWindow{AfterSeq: 500, ThroughSeq: 2000, LimitChanges: 100}, 100},
		{"one scope/limit1000", []string{"a"}, ports.CommitWindow{AfterSeq: 0, ThroughSeq: 2000, LimitChanges: 1000}, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s := e.open(b)
			seedLog(b, s, 2000, bc.orgs...)
			w := bc.w
			w.Table, w.ScopeFilter = "items", map[string][]string{"org": {"a"}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cs, err := s.ReadCommitWindow(ctx, "p", w)
				if err != nil || len(cs) != bc.expect {
					b.Fatalf("window: %d commits, %v", len(cs), err)
				}
			}
		})
	}
}

// BenchScanRows measures a bootstrap page of 1000 rows of one scope.
func BenchScanRows(b *testing.B, e Engine) {
	ctx := context.Background()
	s := e.open(b)
	if _, err := s.SeedRows(ctx, "p", "items", Rows(5000, "a"), sqlstore.SeedOptions{WriterVersion: 1, ActorID: "a", ClientID: "seed"}); err != nil {
		b.Fatal(err)
	}
	q := ports.RowScan{Table: "items", ScopeFilter: map[string][]string{"org": {"a"}}, AfterRowID: "row-0002000", Limit: 1000}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := s.ScanRows(ctx, "p", q)
		if err != nil || len(rows) != 1000 {
			b.Fatalf("scan: %d rows, %v", len(rows), err)
		}
	}
}

// BenchSeed measures seeding n rows of one scope through SeedRows.
func BenchSeed(b *testing.B, e Engine, n int) {
	ctx := context.Background()
	rows := Rows(n, "big")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := e.open(b)
		b.StartTimer()
		if _, err := s.SeedRows(ctx, "p", "items", rows, sqlstore.SeedOptions{WriterVersion: 1, ActorID: "a", ClientID: "seed"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// seedLog pushes n one-item commits, their orgs taking turns.
func seedLog(b *testing.B, s *sqlstore.Store, n int, orgs ...string) {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		w := Item(fmt.Sprintf("l%d", i), orgs[i%len(orgs)], 0)
		if _, err := PushItems(ctx, s, "p", []ports.RowWrite{w}, fmt.Sprint("l", i)); err != nil {
			b.Fatal(err)
		}
	}
}
