package push_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// BenchmarkPushParallel measures concurrent pushes to one partition: 32
// goroutines (b.SetParallelism(16) on GOMAXPROCS 2), each its own client,
// one upsert per commit over 100 rows. On SQLite the pushes contend for
// the one writer connection, which is what group commit amortizes.
func BenchmarkPushParallel(b *testing.B) {
	for _, eng := range benchEngines {
		b.Run(eng.name, func(b *testing.B) {
			benchPushParallel(b, eng.open(b))
		})
	}
}

func benchPushParallel(b *testing.B, st ports.Storage) {
	ctx := context.Background()
	sch, svc, id, epoch := benchPushSetup(b, st)
	tbl := sch.Table("projects")
	body := func(client string, n int) []byte {
		rid := fmt.Sprintf("r%03d", n%100)
		op := ssptest.Upsert("projects", rid, ssptest.Sparse(b, tbl, ssptest.Cols{
			"id": rowcodec.String(rid), "owner": rowcodec.String("alice"), "name": rowcodec.String(fmt.Sprint("name ", n)),
			"locked": rowcodec.Bool(false),
		}), -1)
		return ssptest.Req{ClientID: client, SchemaVersion: sch.Version, Epoch: epoch,
			Commits: []*ssp2.PushCommit{ssptest.Commit(fmt.Sprint("cc", n), op)}}.Encode(b)
	}
	for i := range 100 {
		resp, err := svc.Handle(ctx, id, body("seed", i))
		if err != nil {
			b.Fatal(err)
		}
		resp.Release()
	}
	var clients, pushes atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := fmt.Sprint("c", clients.Add(1))
		n := 0
		for pb.Next() {
			resp, err := svc.Handle(ctx, id, body(client, n))
			n++
			if err != nil {
				b.Error(err)
				return
			}
			if pr, ok := resp.Frames[1].(*ssp2.PushResult); !ok || pr.Status != ssp2.PushApplied {
				b.Errorf("push: %+v", resp.Frames[1])
				return
			}
			resp.Release()
			pushes.Add(1)
		}
	})
	b.ReportMetric(float64(pushes.Load())/b.Elapsed().Seconds(), "pushes/s")
}
