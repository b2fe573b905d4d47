package pull_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/adapters/segments/imagebuilder"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/storage/postgres"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// BenchmarkBootstrapLanes serves one 100,000-row bootstrap per iteration
// on each engine and lane, server side only (no HTTP): "rows" is the rows
// lane in 50,000-row pages (two stored SEGMENT_REF pages), "image" the
// whole table as one sqlite image. "build" gives every iteration a fresh
// segment store (scan, encode or write the image, hash, store); "reuse"
// answers from the stored segments. Reported per bootstrap: the process's
// CPU (user+system, so PostgreSQL's own server CPU is not in it), the
// uncompressed segment bytes, and those bytes zstd-compressed at the
// download endpoint's default level (what a client accepting zstd reads).
// PostgreSQL runs when SYNCD_TEST_POSTGRES_URL is set.
func BenchmarkBootstrapLanes(b *testing.B) {
	const n = 100_000
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, lane := range []string{"rows", "image"} {
			for _, mode := range []string{"build", "reuse"} {
				b.Run(fmt.Sprintf("%s/%s/%s", engine, lane, mode), func(b *testing.B) {
					benchLane(b, engine, n, lane == "image", mode == "reuse")
				})
			}
		}
	}
}

func openBenchStore(b testing.TB, engine string) (pull.Store, func(context.Context, string, string, []ports.RowWrite, sqlstore.SeedOptions) (int64, error), func(context.Context, string, int64) (string, error)) {
	ctx := context.Background()
	sch := ssptest.Schema(b)
	switch engine {
	case "sqlite":
		st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.TempDir(), "lanes.db")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		if err := st.EnsureSchema(ctx, sch, nil); err != nil {
			b.Fatal(err)
		}
		return st, st.SeedRows, st.TouchPartition
	default:
		st, err := postgres.Open(ctx, postgres.Options{DSN: pgtest.DSN(b), MaxConns: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		if err := st.EnsureSchema(ctx, sch, nil); err != nil {
			b.Fatal(err)
		}
		return st, st.SeedRows, st.TouchPartition
	}
}

func benchLane(b *testing.B, engine string, n int, image, reuse bool) {
	ctx := context.Background()
	st, seed, touch := openBenchStore(b, engine)
	sch := ssptest.Schema(b)
	epoch, err := touch(ctx, part, 1)
	if err != nil {
		b.Fatal(err)
	}
	tbl := sch.Table("projects")
	rows := make([]ports.RowWrite, n)
	for i := range rows {
		id := fmt.Sprintf("p-%07d", i)
		name := fmt.Sprintf("project %d lorem ipsum dolor sit amet", i)
		rows[i] = ports.RowWrite{RowID: id, Version: 1, Scopes: map[string]string{"owner": "alice"},
			Payload: ssptest.Full(b, tbl, ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String("alice"),
				"name": rowcodec.String(name), "locked": rowcodec.Bool(i%2 == 0)}),
			Values: []any{id, "alice", name, i%2 == 0}}
	}
	if _, err := seed(ctx, part, "projects", rows, sqlstore.SeedOptions{WriterVersion: sch.Version, ActorID: "a", ClientID: "seed"}); err != nil {
		b.Fatal(err)
	}
	m, err := pull.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	images, err := imagebuilder.New(imagebuilder.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	var segs *memseg.Store
	newSvc := func() *pull.Service {
		segs = memseg.New()
		svc, err := pull.New(pull.Options{Store: st, Segments: segs, Images: images, Metrics: m})
		if err != nil {
			b.Fatal(err)
		}
		return svc
	}
	svc := newSvc()
	h := ssp2.PullHeader{Accept: ssp2.AcceptExternalRows, LimitSnapshotRows: 50_000, MaxSnapshotPages: 50}
	if image {
		h = ssp2.PullHeader{Accept: ssp2.AcceptExternalRows | ssp2.AcceptSQLite}
	}
	r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c1", WireVersion: 3, LogEpoch: epoch, Schema: sch, Header: &h,
		Scopes: scopes.Granted(scopes.Allowed{"owner": {"alice"}}), Subscriptions: []*ssp2.Subscription{{ID: "s", Table: "projects",
			Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: -1}}}
	serve := func() []byte {
		sp := svc.NewSpool()
		defer sp.Close()
		if err := svc.Pull(ctx, r, sp); err != nil {
			b.Fatal(err)
		}
		out, err := sp.Bytes()
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	// One untimed bootstrap: the stored segments for "reuse", their sizes
	// for both.
	raw, packed := segmentSizes(b, segs, serve(), image)
	if !reuse {
		svc = newSvc()
	}
	var before, after syscall.Rusage
	b.ReportAllocs()
	b.ResetTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		if !reuse {
			b.StopTimer()
			svc = newSvc()
			b.StartTimer()
		}
		serve()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := float64(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / 1e6
	b.ReportMetric(cpu/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(raw), "seg-bytes/op")
	b.ReportMetric(float64(packed), "zstd-bytes/op")
}

// segmentSizes decodes a pull's frames and totals the bytes of the
// segments it referenced, raw and zstd-compressed.
func segmentSizes(b *testing.B, segs *memseg.Store, frames []byte, image bool) (raw, packed int) {
	body := ssp2.AppendHeader(nil, 3, ssp2.KindResponse)
	body, _ = ssp2.AppendFrame(body, ssp2.KindResponse, 3, &ssp2.RespHeader{LogEpoch: "e"})
	body = append(append(body, frames...), 0, 0, 0, 0, 0)
	msg, err := ssp2.Decode(body)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	refs := 0
	for _, f := range msg.Frames {
		ref, ok := f.(*ssp2.SegmentRef)
		if !ok {
			continue
		}
		if (ref.MediaType == ssp2.MediaSQLite) != image {
			b.Fatalf("lane served media %v", ref.MediaType)
		}
		refs++
		rc, _, err := segs.Open(context.Background(), ref.SegmentID)
		if err != nil {
			b.Fatal(err)
		}
		seg, _ := io.ReadAll(rc)
		_ = rc.Close()
		raw += len(seg)
		packed += len(enc.EncodeAll(seg, nil))
	}
	if refs == 0 {
		b.Fatal("no segment references")
	}
	return raw, packed
}
