package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

type welcomePlanner struct{}

func (welcomePlanner) PlanReactions(_ context.Context, c ports.CommitValidation) ([]ports.PlannedReaction, error) {
	var out []ports.PlannedReaction
	for _, op := range c.Operations {
		if op.Table == "projects" && op.Stored == nil && op.Row != nil {
			payload, _ := json.Marshal(map[string]any{"project": op.RowID})
			out = append(out, ports.PlannedReaction{Key: "welcome:" + op.RowID, Type: "project.welcome", Version: 1, Payload: payload})
		}
	}
	return out, nil
}

// TestReactionsEnqueuedWithTheCommit: planned reactions land in the push
// transaction, once, and never for a rejected commit or a replay.
func TestReactionsEnqueuedWithTheCommit(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{extra: []fx.Option{app.ProvideReactionPlanner(func() welcomePlanner { return welcomePlanner{} })}})
		c := call{}
		ep := s.epoch(c)
		req := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)),
			ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "alice", "Two"), -1),
				ssptest.Upsert("tasks", "t-1", []byte{0xff}, -1)),
		}}
		resp, _ := s.sync(c, req)
		if resp.Results[0].Status != ssp2.PushApplied || resp.Results[1].Status != ssp2.PushRejected {
			t.Fatalf("%+v %+v", resp.Results[0], resp.Results[1])
		}
		s.sync(c, req) // replay
		rs, err := s.store.ListReactions(context.Background(), "default", nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].IdempotencyKey != `["default","c1","k1","welcome:p-1"]` || rs[0].Status != ports.ReactionPending ||
			rs[0].Source.CommitSeq != 1 || rs[0].MaxAttempts != 10 || string(rs[0].Payload) != `{"project":"p-1"}` {
			t.Fatalf("reactions %+v", rs)
		}
	})
}
