package nodes

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

// A rolling upgrade (SPEC §2.4, schema upgrade writer fence): node A
// serves schema version 1; node B starts on the same database with
// version 2 (one nullable column appended) and migrates it while A still
// runs. A then stores nothing: its client's push is refused by the serve
// gate with sync.schema_not_ready, the code the client retries on, and
// the rows stay as B migrated them. B serves on. (The fence's own refusal
// of a gate-less append, sync.storage.writer_fence_rejected, has no HTTP
// path in the server: the storage contract suite and the e2e suite's
// TestOldNodeAfterUpgrade run it.)
func TestRollingUpgradeStopsTheOldNode(t *testing.T) {
	proctest.WatchSources(t)
	engines := []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	}
	v1IR, v2IR := todos.IR(), appendListColor(t, todos.IR())
	dir := t.TempDir()
	v1Path, v2Path := filepath.Join(dir, "v1.ir.json"), filepath.Join(dir, "v2.ir.json")
	for p, b := range map[string][]byte{v1Path: v1IR, v2Path: v2IR} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	v1, v2 := loadSchema(t, v1IR), loadSchema(t, v2IR)
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			ctx := t.Context()
			db := e.database(t)
			a := serveSchema(t, db, v1Path)
			ca := listClient(t, a.BaseURL(), v1, "client-a")
			queueList(t, ca, "l1", nil)
			res, err := ca.Sync(ctx)
			if err != nil || len(res.Pushes) != 1 || res.Pushes[0].Status != ssp2.PushApplied {
				t.Fatalf("push to A before the upgrade: %+v, %v", res, err)
			}

			b := serveSchema(t, db, v2Path)

			queueList(t, ca, "l2", nil)
			if _, err := ca.Push(ctx); client.CodeOf(err) != string(syncerr.SchemaNotReady) {
				t.Fatalf("push to A after the upgrade: %v, want %s", err, syncerr.SchemaNotReady)
			}
			cb := listClient(t, b.BaseURL(), v2, "client-b")
			if _, err := cb.PullUntilIdle(ctx, 20); err != nil {
				t.Fatal(err)
			}
			if got := cb.RowIDs("lists"); !slices.Equal(got, []string{"l1"}) {
				t.Fatalf("B serves %v, want l1 alone", got)
			}
			if row, _, _ := cb.Get("lists", "l1"); !row["color"].IsNull() {
				t.Fatalf("migrated l1 = %v, want a null color", row)
			}
			color := rowcodec.String("teal")
			queueList(t, cb, "l3", &color)
			res, err = cb.Sync(ctx)
			if err != nil || len(res.Pushes) != 1 || res.Pushes[0].Status != ssp2.PushApplied {
				t.Fatalf("push to B: %+v, %v", res, err)
			}
		})
	}
}

// appendListColor is ir at schema version 2 with a nullable color column
// appended to lists.
func appendListColor(t *testing.T, ir []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ir, &m); err != nil {
		t.Fatal(err)
	}
	m["schemaVersion"] = 2
	m["schemaVersions"] = append(m["schemaVersions"].([]any), map[string]any{"version": 2, "migrations": []string{"0002_list_color"}})
	for _, tb := range m["tables"].([]any) {
		if tb := tb.(map[string]any); tb["name"] == "lists" {
			tb["columns"] = append(tb["columns"].([]any), map[string]any{"name": "color", "type": "string", "nullable": true})
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func loadSchema(t *testing.T, ir []byte) *schema.Schema {
	t.Helper()
	s, err := schema.Load(ir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveSchema starts a node on db with the schema file and waits until
// it is ready (its schema work done).
func serveSchema(t *testing.T, db, schemaPath string) *syncdproc.Node {
	t.Helper()
	n, err := syncdproc.Start(syncdproc.Options{Binary: binary, Args: []string{"--database", db, "--schema", schemaPath,
		"--auth", "dev", "--log-level", "info", "--shutdown-delay", "0"}})
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

func listClient(t *testing.T, base string, sch *schema.Schema, id string) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("X-Syncd-Actor", "alice")
	c, err := client.New(client.Options{BaseURL: base, Schema: sch, ClientID: id, Header: h})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("lists", "lists", map[string][]string{"owner_id": {"alice"}})
	return c
}

// queueList queues an insert of list id (with color, when the schema has
// the column and color is set).
func queueList(t *testing.T, c *client.Client, id string, color *rowcodec.Value) {
	t.Helper()
	cols := map[string]rowcodec.Value{"id": rowcodec.String(id), "owner_id": rowcodec.String("alice"),
		"title": rowcodec.String("list " + id), "updated_at_ms": rowcodec.Int(1)}
	if color != nil {
		cols["color"] = *color
	}
	op, err := c.Upsert("lists", id, cols, -1)
	if err != nil {
		t.Fatal(err)
	}
	c.Queue(op)
}
