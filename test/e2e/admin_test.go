package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestAdminAPI: a server started with --admin-api and a token file
// serves a pushed commit, the partition and the pulling client back
// through /admin/v1 to the token holder only, on both engines.
func TestAdminAPI(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		const token = "e2e-admin-token-0123456789"
		tokenFile := filepath.Join(t.TempDir(), "admin.token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, e, serverOpts{
			config: func(c *config.Config) { c.Admin.API, c.Admin.TokenFile = true, tokenFile },
			// The harness wraps the engine; hand its admin reads over as
			// a host that wraps its storage would.
			extra: []fx.Option{fx.Provide(func(st ports.Storage) ports.AdminReader {
				return st.(*gatedStore).Storage.(ports.AdminReader)
			})},
		})
		c := call{actor: "alice"}
		ep := s.epoch(c)
		s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
			ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)),
		}})
		s.sync(c, ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true, SubTable: "projects"})

		get := func(path, bearer string, into any) int {
			t.Helper()
			req, err := http.NewRequest(http.MethodGet, s.admin+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if into != nil && resp.StatusCode == http.StatusOK {
				if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
			}
			return resp.StatusCode
		}
		for _, tc := range []struct {
			bearer string
			want   int
		}{{"", 401}, {token + "x", 401}, {token, 200}} {
			if got := get("/admin/v1/partitions", tc.bearer, nil); got != tc.want {
				t.Fatalf("partitions with bearer %q: %d, want %d", tc.bearer, got, tc.want)
			}
		}
		if got := get("/readyz", "", nil); got != 200 {
			t.Fatalf("/readyz without a token: %d, want 200", got)
		}

		var parts struct {
			Items []struct {
				Partition    string `json:"partition"`
				Registered   bool   `json:"registered"`
				MaxCommitSeq int64  `json:"maxCommitSeq"`
				ClientCount  int64  `json:"clientCount"`
			} `json:"items"`
		}
		get("/admin/v1/partitions", token, &parts)
		if len(parts.Items) != 1 || !parts.Items[0].Registered || parts.Items[0].MaxCommitSeq != 1 || parts.Items[0].ClientCount != 1 {
			t.Fatalf("partitions = %+v", parts.Items)
		}
		p := parts.Items[0].Partition

		var commits struct {
			Items []struct {
				Seq            int64    `json:"seq"`
				ActorID        string   `json:"actorId"`
				ClientID       string   `json:"clientId"`
				ClientCommitID string   `json:"clientCommitId"`
				ChangeCount    int64    `json:"changeCount"`
				Tables         []string `json:"tables"`
				CreatedAt      string   `json:"createdAt"`
			} `json:"items"`
		}
		if code := get(fmt.Sprintf("/admin/v1/commits?partition=%s&after=0&limit=10", p), token, &commits); code != 200 {
			t.Fatalf("commits: %d", code)
		}
		if len(commits.Items) != 1 {
			t.Fatalf("commits = %+v, want the pushed one", commits.Items)
		}
		cm := commits.Items[0]
		if cm.Seq != 1 || cm.ActorID != "alice" || cm.ClientID != "c1" || cm.ClientCommitID != "k1" || cm.ChangeCount != 1 ||
			len(cm.Tables) != 1 || cm.Tables[0] != "projects" || cm.CreatedAt == "" {
			t.Fatalf("commit = %+v", cm)
		}

		var client struct {
			ClientID          string          `json:"clientId"`
			ActorID           string          `json:"actorId"`
			WireVersion       int             `json:"wireVersion"`
			SubscriptionCount int             `json:"subscriptionCount"`
			Subscriptions     json.RawMessage `json:"subscriptions"`
		}
		if code := get("/admin/v1/client?partition="+p+"&clientId=c1", token, &client); code != 200 {
			t.Fatalf("client: %d", code)
		}
		if client.ActorID != "alice" || client.WireVersion != 3 || client.SubscriptionCount != 1 || len(client.Subscriptions) == 0 {
			t.Fatalf("client = %+v", client)
		}
		if code := get("/admin/v1/commits?partition="+p+"&limit=0", token, nil); code != 400 {
			t.Fatalf("limit=0: %d, want 400", code)
		}
	})
}
