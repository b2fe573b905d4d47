package push_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// benchEngines are the storage engines the push benchmarks run on.
var benchEngines = []struct {
	name string
	open func(b *testing.B) ports.Storage
}{
	{"memory", func(*testing.B) ports.Storage { return memory.New() }},
	{"sqlite", func(b *testing.B) ports.Storage {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), "bench.db")})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}},
	{"postgres", func(b *testing.B) ports.Storage {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: pgtest.DSN(b), MaxConns: 4})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}},
}

// BenchmarkPushApply measures one POST /sync push through the use case
// (decode, plan, epoch check, scope resolution, the §6 pipeline, the
// storage transaction, the stored result), without HTTP: one commit of
// ops upserts of tasks rows (last-write-wins updates over 100 rows).
func BenchmarkPushApply(b *testing.B) {
	for _, eng := range benchEngines {
		for _, ops := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/ops=%d", eng.name, ops), func(b *testing.B) {
				benchPush(b, eng.open(b), ops)
			})
		}
	}
}

// benchPushSetup readies st (closed when b ends) with the ssptest schema,
// a round over a pipeline over it that allows every scope, and partition
// p1 for alice.
func benchPushSetup(b *testing.B, st ports.Storage) (*schema.Schema, *round.Service, ports.Identity, string) {
	ctx := context.Background()
	b.Cleanup(func() { _ = st.Close() })
	sch := ssptest.Schema(b)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		b.Fatal(err)
	}
	svc, _ := roundtest.Assemble(b, sch, roundtest.Options{Store: st, Now: time.Now,
		Round: round.Options{Resolver: roundtest.AllowAll}})
	id := ports.Identity{ActorID: "alice", Partition: "p1"}
	epoch, err := st.TouchPartition(ctx, "p1", time.Now().UnixMilli())
	if err != nil {
		b.Fatal(err)
	}
	return sch, svc, id, epoch
}

func benchPush(b *testing.B, st ports.Storage, ops int) {
	ctx := context.Background()
	sch, svc, id, epoch := benchPushSetup(b, st)
	tbl := sch.Table("projects")
	// Insert the rows first so the timed pushes are updates.
	body := func(n int) []byte {
		var opsl []ssp2.PushOperation
		for j := range ops {
			rid := fmt.Sprintf("r%03d", (n*ops+j)%100)
			opsl = append(opsl, ssptest.Upsert("projects", rid, ssptest.Sparse(b, tbl, ssptest.Cols{
				"id": rowcodec.String(rid), "owner": rowcodec.String("alice"), "name": rowcodec.String(fmt.Sprint("name ", n)),
				"locked": rowcodec.Bool(false),
			}), -1))
		}
		return ssptest.Req{ClientID: "c1", SchemaVersion: sch.Version, Epoch: epoch,
			Commits: []*ssp2.PushCommit{ssptest.Commit(fmt.Sprint("cc", n), opsl...)}}.Encode(b)
	}
	const pre = 64
	bodies := make([][]byte, pre)
	for i := range bodies {
		bodies[i] = body(i)
	}
	for i := range (100 + ops - 1) / ops {
		resp, err := svc.Handle(ctx, id, body(1_000_000+i))
		if err != nil {
			b.Fatal(err)
		}
		if pr, ok := resp.Frames[1].(*ssp2.PushResult); !ok || pr.Status != ssp2.PushApplied {
			b.Fatalf("insert: %+v", resp.Frames[1])
		}
		resp.Release()
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		var buf []byte
		if n < pre {
			buf = bodies[n]
		} else {
			b.StopTimer()
			buf = body(n)
			b.StartTimer()
		}
		n++
		resp, err := svc.Handle(ctx, id, buf)
		if err != nil {
			b.Fatal(err)
		}
		if pr, ok := resp.Frames[1].(*ssp2.PushResult); !ok || pr.Status != ssp2.PushApplied {
			b.Fatalf("push: %+v", pr)
		}
		resp.Release()
	}
	b.ReportMetric(float64(n*ops)/b.Elapsed().Seconds(), "ops/s")
}
