package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestEmbeddedServer(t *testing.T) {
	var ready *platform.Readiness
	var ls *platform.Listeners
	cfg := Config("127.0.0.1:0", "127.0.0.1:0")
	cfg.ShutdownDelay = 0
	a := fx.New(app.Options(cfg, platform.BuildInfo{}, zaptest.NewLogger(t),
		Options(filepath.Join(t.TempDir(), "embed.db")), fx.Populate(&ready, &ls)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop(context.Background()) }()
	for !ready.Ready() {
		if ctx.Err() != nil {
			t.Fatalf("not ready: %+v", ready.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	url := "http://" + ls.Addr(platform.ServerSync).String() + "/sync"
	sch, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	post := func(user string, r ssptest.Req) ssptest.Resp {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(r.Encode(t)))
		req.Header.Set("Content-Type", httpapi.ContentTypeSync)
		req.Header.Set("Authorization", "Bearer "+user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return ssptest.DecodeResponse(t, b)
	}
	epoch := post("alice", ssptest.Req{ClientID: "a", SchemaVersion: sch.Version, NoEpoch: true, Pull: true}).Header.LogEpoch
	list := ssptest.Sparse(t, sch.Table("lists"), ssptest.Cols{"id": rowcodec.String("l1"), "owner_id": rowcodec.String("alice"),
		"title": rowcodec.String("Groceries"), "updated_at_ms": rowcodec.Int(1)})
	todo := func(id string) []byte {
		return ssptest.Sparse(t, sch.Table("todos"), ssptest.Cols{"id": rowcodec.String(id), "list_id": rowcodec.String("l1"),
			"title": rowcodec.String("milk"), "done": rowcodec.Bool(false), "position": rowcodec.Int(0), "updated_at_ms": rowcodec.Int(1)})
	}
	// The list is staged by op 0; the validator of op 1 reads it in the transaction.
	resp := post("alice", ssptest.Req{ClientID: "a", SchemaVersion: sch.Version, Epoch: epoch, Commits: []*ssp2.PushCommit{
		ssptest.Commit("c1", ssptest.Upsert("lists", "l1", list, -1), ssptest.Upsert("todos", "t1", todo("t1"), -1))}})
	if resp.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("alice: %+v", resp.Results[0])
	}
	resp = post("bob", ssptest.Req{ClientID: "b", SchemaVersion: sch.Version, Epoch: epoch, Commits: []*ssp2.PushCommit{
		ssptest.Commit("c1", ssptest.Upsert("todos", "t2", todo("t2"), -1))}})
	if r := resp.Results[0]; r.Status != ssp2.PushRejected || r.Results[0].Code != "todos.list_not_owned" {
		t.Fatalf("bob: %+v", r)
	}
}
