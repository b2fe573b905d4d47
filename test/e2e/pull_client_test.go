package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// Two replicas of the project's Go client bootstrap (referenced and
// inline pages, compressed), write, and converge through push and pull.
func TestPullProjectClientsConverge(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		seedRows(t, s.store, s.sch, "proj", "alice", "s", 1500, 500)
		newClient := func(id string) *client.Client {
			h := http.Header{}
			h.Set("X-Syncd-Actor", "alice")
			h.Set("X-Syncd-Partition", "proj")
			h.Set("X-Syncd-Scopes", `{"owner":["alice"],"project_id":["*"]}`)
			c, err := client.New(client.Options{BaseURL: strings.TrimSuffix(s.url, "/sync"), Schema: s.sch, ClientID: id, Header: h,
				Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows, LimitSnapshotRows: 400, MaxSnapshotPages: 2, RequestEncoding: "gzip"})
			if err != nil {
				t.Fatal(err)
			}
			c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			return c
		}
		a, b := newClient("a"), newClient("b")
		ctx := t.Context()
		for _, c := range []*client.Client{a, b} {
			if _, err := c.PullUntilIdle(ctx, 50); err != nil {
				t.Fatal(err)
			}
			if n := len(c.RowIDs("projects")); n != 1500 {
				t.Fatalf("%s bootstrapped %d rows", c.ClientID(), n)
			}
		}
		writeAndConverge(t, a, b, 10, 1509)
	})
}

// writeAndConverge has a write n new projects (a-0 …), b edit s-000007 and
// delete s-000008, then syncs and pulls both twice and checks that they
// hold the same want rows, b's edit among them.
func writeAndConverge(t *testing.T, a, b *client.Client, n, want int) {
	t.Helper()
	ctx := t.Context()
	upsert := func(c *client.Client, id, name string, base int64) {
		op, err := c.Upsert("projects", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner": rowcodec.String("alice"),
			"name": rowcodec.String(name), "locked": rowcodec.Bool(false)}, base)
		if err != nil {
			t.Fatal(err)
		}
		c.Queue(op)
	}
	for i := range n {
		upsert(a, fmt.Sprintf("a-%d", i), "from a", -1)
	}
	_, ver, _ := b.Get("projects", "s-000007")
	upsert(b, "s-000007", "edited by b", ver)
	b.Queue(b.Delete("projects", "s-000008", -1))
	for range 2 {
		for _, c := range []*client.Client{a, b} {
			if _, err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PullUntilIdle(ctx, 50); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(a.Pending())+len(b.Pending()) != 0 {
		t.Fatalf("pending %v %v", a.Pending(), b.Pending())
	}
	ra, rb := a.Rows("projects"), b.Rows("projects")
	if len(ra) != want || fmt.Sprint(ra) != fmt.Sprint(rb) {
		t.Fatalf("diverged: %d vs %d rows", len(ra), len(rb))
	}
	if v, _, _ := a.Get("projects", "s-000007"); fmt.Sprint(v["name"]) != fmt.Sprint(rowcodec.String("edited by b")) {
		t.Fatalf("edit not converged: %v", v)
	}
}
