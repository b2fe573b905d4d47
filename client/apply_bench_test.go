package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// BenchmarkPullCatchUpPage is the load tool's catch-up client: one pull
// answered by a page of 1,000 one-upsert commits (the server's default
// change limit), read, decoded, checked and applied to the replica.
func BenchmarkPullCatchUpPage(b *testing.B) {
	sch := ssptest.Schema(b)
	tbl := sch.Table("tasks")
	frames := []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
		&ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(map[string][]string{"project_id": {"p1"}})}}
	scopes := ssp2.StoredScopesFromMap(map[string]string{"project_id": "p1"})
	for i := range 1000 {
		id := "task-" + strconv.Itoa(i)
		row := ssptest.Full(b, tbl, ssptest.Cols{"id": rowcodec.String(id), "project_id": rowcodec.String("p1"),
			"title": rowcodec.String(fmt.Sprintf("title of task %d, long enough to be a real one", i)), "done": rowcodec.Bool(i%2 == 0),
			"estimate": rowcodec.Int(int64(i)), "attachment": rowcodec.Null()})
		frames = append(frames, &ssp2.Commit{CommitSeq: int64(i + 1), CreatedAtMs: 1_700_000_000_000 + int64(i), ActorID: "writer",
			Tables: []string{"tasks"}, Changes: []ssp2.Change{{RowID: id, Op: ssp2.OpUpsert, RowVersion: int64(i + 1), Scopes: scopes, Row: row}}})
	}
	frames = append(frames, &ssp2.SubEnd{NextCursor: 1000})
	body, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: frames})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", client.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c, err := client.New(client.Options{BaseURL: srv.URL, Schema: sch, ClientID: "c1"})
	if err != nil {
		b.Fatal(err)
	}
	c.SetLogEpoch("e1")
	c.Subscribe("s", "tasks", map[string][]string{"project_id": {"p1"}})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		res, err := c.Pull(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if s := res.Sections["s"]; s.Commits != 1000 || s.Err != nil {
			b.Fatalf("section %+v", s)
		}
	}
	if n := len(c.Rows("tasks")); n != 1000 {
		b.Fatalf("replica holds %d rows", n)
	}
}
