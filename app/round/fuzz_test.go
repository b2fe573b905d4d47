package round_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// FuzzHandle: no request body makes the use case panic or answer an
// internal error; malformed input is always a catalog refusal or a
// commit-level rejection. Every wire version is admitted and pulls are
// served, so the older generations' seeds are read through too.
func FuzzHandle(f *testing.F) {
	e := roundtest.New(f, func(o *roundtest.Options) {
		o.Round.MinWireVersion = 1
		roundtest.WithPull(o)
	})
	tasks := e.Table("tasks")
	for _, b := range vectortest.Files("request", "push") {
		f.Add(b)
	}
	f.Add(e.Req(ssptest.Commit("k1",
		ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1),
		ssptest.Upsert("tasks", "t-1", e.Task("t-1", "p-1", "x"), 0),
		ssptest.Upsert("tasks", "t-1", ssptest.Sparse(f, tasks, ssptest.Cols{"id": rowcodec.String("t-1"), "done": rowcodec.Bool(true)}), 1),
		ssptest.Delete("projects", "p-1"))).Encode(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := e.Round.Handle(context.Background(), e.ID, body)
		if err != nil && syncerr.Public(err).Code == syncerr.InternalError {
			t.Fatalf("internal error for %x: %v", body, err)
		}
	})
}
