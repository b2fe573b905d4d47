package pull_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// BenchmarkSegmentBuild serves a bootstrap of rows rows of one scope from
// SQLite as one SEGMENT_REF page: "build" gives every iteration a fresh
// segment store, so each one scans the rows, encodes the SSG2 segment,
// hashes and stores it; "reuse" keeps the store, so after the first
// iteration the page is answered from the stored publication.
func BenchmarkSegmentBuild(b *testing.B) {
	for _, rows := range []int{20_000, 100_000} {
		for _, mode := range []string{"build", "reuse"} {
			b.Run(fmt.Sprintf("sqlite/rows=%d/%s", rows, mode), func(b *testing.B) {
				benchSegment(b, rows, mode == "reuse")
			})
		}
	}
}

func benchSegment(b *testing.B, n int, reuse bool) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.TempDir(), "seg.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	sch := ssptest.Schema(b)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		b.Fatal(err)
	}
	epoch, err := st.TouchPartition(ctx, part, 1)
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
	if _, err := st.SeedRows(ctx, part, "projects", rows, sqlstore.SeedOptions{WriterVersion: sch.Version, ActorID: "a", ClientID: "seed"}); err != nil {
		b.Fatal(err)
	}
	m, err := pull.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	newSvc := func() *pull.Service {
		svc, err := pull.New(pull.Options{Store: st, Segments: memseg.New(), Metrics: m})
		if err != nil {
			b.Fatal(err)
		}
		return svc
	}
	svc := newSvc()
	h := ssp2.PullHeader{Accept: ssp2.AcceptExternalRows, LimitSnapshotRows: int32(min(n, 50_000)), MaxSnapshotPages: 50}
	r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c1", WireVersion: 3, LogEpoch: epoch, Schema: sch, Header: &h,
		Scopes: scopes.Granted(scopes.Allowed{"owner": {"alice"}}), Subscriptions: []*ssp2.Subscription{{ID: "s", Table: "projects",
			Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: -1}}}
	if reuse { // build and store the pages once, untimed
		sp := svc.NewSpool()
		if err := svc.Pull(ctx, r, sp); err != nil {
			b.Fatal(err)
		}
		_ = sp.Close()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if !reuse {
			b.StopTimer()
			svc = newSvc()
			b.StartTimer()
		}
		sp := svc.NewSpool()
		if err := svc.Pull(ctx, r, sp); err != nil {
			b.Fatal(err)
		}
		_ = sp.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
