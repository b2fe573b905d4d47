package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestPushMetrics(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		c := call{}
		ep := s.epoch(c)
		req := ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)),
			ssptest.Commit("k2", ssptest.Upsert("nope", "x", []byte{1}, -1)),
		}}
		s.sync(c, req)
		s.sync(c, req)
		b := scrape(t, s)
		for _, want := range []string{
			`syncd_push_commits_total{outcome="applied"} 1`,
			`syncd_push_commits_total{outcome="cached"} 1`,
			`syncd_push_commits_total{outcome="rejected"} 2`,
			`syncd_push_operations_applied_total 1`,
			`go_sql_open_connections{db_name="syncd_write"}`,
			`syncd_http_request_bytes_total{method="POST",route="/sync"}`,
		} {
			if !strings.Contains(b, want) {
				t.Fatalf("metrics lack %q", want)
			}
		}
	})
}

// scrape reads the server's metrics.
func scrape(t *testing.T, s *server) string {
	t.Helper()
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
