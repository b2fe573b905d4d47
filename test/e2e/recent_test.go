package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// The stock server on each engine: a pull a few commits behind the push
// it follows is answered from the recent log, with the pushed row; a
// push-only request reusing a head at an epoch rotated since is answered
// with the reset, and nothing of it is applied.
func TestRecentLogAndHeadReuse(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		r := newReplica(t, s, alice("recent"), "c1")
		r.subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		r.pull() // bootstrap; reads the partition's head
		pushOnly := func(id string) ssptest.Resp {
			resp, _ := s.sync(r.c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: r.epoch,
				Commits: []*ssp2.PushCommit{ssptest.Commit("k-"+id, ssptest.Upsert("projects", id, project(t, s.sch, id, "alice", id), -1))}})
			return resp
		}
		if resp := pushOnly("p-1"); len(resp.Results) != 1 || resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("push %+v", resp.Msg.Frames)
		}
		resp := r.pull()
		if _, _, commits, _ := sections(resp); commits != 1 || r.table("projects")["p-1"].label != "p-1" {
			t.Fatalf("incremental pull: %d commits, rows %+v", commits, r.table("projects"))
		}
		if b := scrape(t, s); !strings.Contains(b, `syncd_pull_windows_total{source="memory"} 1`) {
			t.Fatalf("the window was not answered from memory:\n%s", grepLines(b, "syncd_pull_windows_total"))
		}

		rotated, err := s.store.RotateLogEpoch(context.Background(), "recent")
		if err != nil {
			t.Fatal(err)
		}
		resp = pushOnly("p-2")
		if resp.Header == nil || !resp.Header.ResetRequired || resp.Header.LogEpoch != rotated || len(resp.Results) != 0 {
			t.Fatalf("push at the rotated epoch: %+v", resp.Msg.Frames)
		}
		if row, _ := s.store.GetRow(context.Background(), "recent", "projects", "p-2"); row != nil {
			t.Fatal("a push at a rotated epoch was applied")
		}
	})
}

// grepLines returns the lines of b that contain sub.
func grepLines(b, sub string) string {
	var out []string
	for _, l := range strings.Split(b, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
