package round_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestClientIDBoundByFirstPull(t *testing.T) {
	e := roundtest.New(t, nil)
	pull := ssptest.Req{SchemaVersion: e.Schema.Version, Epoch: e.Epoch, Pull: true, SubTable: "projects"}
	// Without a pull service, a pull is refused before it binds.
	_, err := e.As("carol", "k", pull)
	roundtest.WantCode(t, err, syncerr.InternalError)
	if a, ok, _ := e.Store.ClientBinding(context.Background(), "p1", "k"); ok {
		t.Fatalf("a refused request bound the client to %s", a)
	}
	e.Round, _ = e.Build(roundtest.WithPull)
	if _, err := e.As("carol", "k", pull); err != nil {
		t.Fatal(err)
	}
	if a, ok, _ := e.Store.ClientBinding(context.Background(), "p1", "k"); !ok || a != "carol" {
		t.Fatalf("binding after carol's pull: %q, %v", a, ok)
	}
	_, err = e.As("alice", "k", e.Req(e.Own("k1", "p-alice", "alice")))
	roundtest.WantCode(t, err, syncerr.InvalidClientID)
	e.NoRow(t, "p-alice")
	if _, err := e.As("carol", "k", pull); err != nil {
		t.Fatalf("carol's next pull: %v", err)
	}
}
