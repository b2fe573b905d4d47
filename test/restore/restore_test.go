// Package restore runs the operator's restore procedure against real
// processes: an online backup of a running server, a restore of it after
// more writes, the log-epoch rotation SPEC §2.1 requires, and a client
// that resets and converges on the restored state instead of keeping
// commits the backup does not have.
package restore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, "syncd-restore-", &binary)) }

func TestRestoreAnOlderBackupUnderARunningClient(t *testing.T) {
	proctest.WatchSources(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "syncd.db")
	sch, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	n := serve(t, db, "127.0.0.1:0")
	c := newClient(t, n.BaseURL(), sch)
	u, err := url.Parse(n.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	write := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			op, err := c.Upsert("lists", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner_id": rowcodec.String("alice"),
				"title": rowcodec.String("list " + id), "updated_at_ms": rowcodec.Int(1)}, -1)
			if err != nil {
				t.Fatal(err)
			}
			c.Queue(op)
		}
		if _, err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PullUntilIdle(ctx, 20); err != nil {
			t.Fatal(err)
		}
	}
	write("l1", "l2", "l3")

	// The backup is taken while the server serves.
	backup := filepath.Join(dir, "backup.db")
	run(t, "backup", "--database", db, "--out", backup)
	write("l4", "l5")
	if got := c.RowIDs("lists"); len(got) != 5 {
		t.Fatalf("before the restore the client holds %v", got)
	}
	epoch := c.LogEpoch()

	// The restore: stop, put the backup in place, rotate every partition's
	// log epoch before serving again.
	if err := n.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, n.Tail())
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(db + suffix)
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "epoch", "rotate", "--database", db, "--all")
	n = serve(t, db, u.Host) // where the client knows it

	// The client is told to reset, re-bootstraps and holds exactly what
	// the restored server has: the two commits after the backup are gone
	// on both sides, not kept on the client.
	if _, err := c.PullUntilIdle(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if c.LogEpoch() == epoch || c.LogEpoch() == "" {
		t.Fatalf("log epoch %q after the restore, was %q", c.LogEpoch(), epoch)
	}
	if got := c.RowIDs("lists"); !slices.Equal(got, []string{"l1", "l2", "l3"}) {
		t.Fatalf("after the restore the client holds %v, want the backup's l1 l2 l3", got)
	}
	// And it syncs on from there.
	write("l6")
	fresh := newClient(t, n.BaseURL(), sch)
	if _, err := fresh.PullUntilIdle(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if a, b := c.RowIDs("lists"), fresh.RowIDs("lists"); !slices.Equal(a, b) || len(a) != 4 {
		t.Fatalf("the client holds %v, a fresh one %v", a, b)
	}
}

func serve(t *testing.T, db, listen string) *syncdproc.Node {
	t.Helper()
	n, err := syncdproc.Start(syncdproc.Options{Binary: binary, Args: []string{"--database", db, "--auth", "dev", "--log-level", "info",
		"--shutdown-delay", "0", "--listen", listen}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.WaitReady(ctx, 20*time.Millisecond); err != nil {
		t.Fatalf("%v\n%s", err, n.Tail())
	}
	return n
}

var clients int

func newClient(t *testing.T, base string, sch *schema.Schema) *client.Client {
	t.Helper()
	clients++
	h := http.Header{}
	h.Set("X-Syncd-Actor", "alice")
	c, err := client.New(client.Options{BaseURL: base, Schema: sch, ClientID: fmt.Sprintf("restore-%d", clients), Header: h})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("lists", "lists", map[string][]string{"owner_id": {"alice"}})
	return c
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("syncd %v: %v\n%s", args, err, out)
	}
}
