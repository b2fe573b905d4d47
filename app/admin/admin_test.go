package admin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/admin"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/ports"
)

const ir = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{"version": 1, "migrations": []}],
  "tables": [{"name": "tasks", "primaryKey": "id", "materialize": false,
    "columns": [{"name": "id", "type": "string", "nullable": false},
                {"name": "project_id", "type": "string", "nullable": false}],
    "scopes": ["project:{project_id}"]}],
  "subscriptions": []
}`

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a memory storage with partition p1 (two commits, two
// clients, reactions) and a segment store with one segment.
func fixture(t *testing.T) (*memory.Store, *memseg.Store) {
	t.Helper()
	ctx := context.Background()
	st := memory.New()
	sc, err := schema.Load([]byte(ir))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureSchema(ctx, sc, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchPartition(ctx, "p1", t0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	for i, rows := range [][]string{{"a", "b"}, {"c"}} {
		err := st.Push(ctx, "p1", ports.PushOptions{WriterVersion: 1}, func(tx ports.PushTx) error {
			var chs []commit.Change
			for _, id := range rows {
				chs = append(chs, commit.Change{Table: "tasks", RowID: id, Op: commit.OpDelete, Scopes: map[string]string{"project": "x"}})
			}
			seq, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: t0.UnixMilli() + int64(i), ActorID: "u1", ClientID: "c1",
				ClientCommitID: "cc" + rows[0], Changes: chs})
			if err != nil || i > 0 {
				return err
			}
			return tx.EnqueueReactions(ctx, ports.ReactionSource{ClientID: "c1", ClientCommitID: "cca", CommitSeq: seq, CreatedAtMs: 1},
				[]ports.Reaction{{IdempotencyKey: "r1", Type: "email", Version: 1, Payload: []byte(`{"secret":1}`), MaxAttempts: 1},
					{IdempotencyKey: "r2", Type: "sms", Version: 2, Payload: []byte(`{}`), MaxAttempts: 1, AvailableAtMs: 1 << 50}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []ports.ClientRecord{
		{Partition: "p1", ClientID: "c1", ActorID: "u1", WireVersion: 3, Cursor: 1, Subscriptions: []byte(`[{"id":"s1"},{"id":"s2"}]`), UpdatedAtMs: t0.UnixMilli()},
		{Partition: "p1", ClientID: "c2", ActorID: "u2", WireVersion: 3, Cursor: 2, UpdatedAtMs: t0.UnixMilli()},
	} {
		if err := st.PutClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	segs := memseg.New()
	b := []byte("segment bytes")
	if _, err := segs.Put(ctx, b, ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p1", Table: "tasks"},
		SegmentID: contentaddr.Of(b), ExpiresAtMs: t0.Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	return st, segs
}

func handler(t *testing.T) http.Handler {
	st, segs := fixture(t)
	return admin.New(admin.Options{Reader: st, Logs: st, Clients: st, Reactions: st, Segments: segs,
		Readiness: func() any { return map[string]any{"ready": true, "phase": "ready"} },
		Now:       func() time.Time { return t0 }})
}

func get(t *testing.T, h http.Handler, target string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", target, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: not JSON: %s", target, rec.Body)
	}
	return rec.Code, body
}

// at walks a decoded JSON document by keys and indexes ("items.0.seq").
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := 0
			for _, c := range k {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func TestRoutes(t *testing.T) {
	h := handler(t)
	c1 := base64.RawURLEncoding.EncodeToString([]byte("c1"))
	tests := []struct {
		name   string
		target string
		want   map[string]any // path → value (JSON numbers are float64)
	}{
		{"partitions", "/admin/v1/partitions", map[string]any{
			"items.0.partition": "p1", "items.0.registered": true, "items.0.maxCommitSeq": 2.0, "items.0.horizonSeq": 0.0,
			"items.0.retainedCommits": 2.0, "items.0.clientCount": 2.0, "items.0.lastAuthenticatedAt": "2025-03-01T12:00:00.000Z",
			"nextCursor": nil}},
		{"partitions page of one has a cursor", "/admin/v1/partitions?limit=1", map[string]any{
			"items.0.partition": "p1", "nextCursor": base64.RawURLEncoding.EncodeToString([]byte("p1"))}},
		{"clients", "/admin/v1/clients?partition=p1", map[string]any{
			"partition": "p1", "maxCommitSeq": 2.0,
			"items.0.clientId": "c1", "items.0.actorId": "u1", "items.0.cursor": 1.0, "items.0.lagCommits": 1.0,
			"items.0.wireVersion": 3.0, "items.0.subscriptionCount": 2.0, "items.0.updatedAt": "2025-03-01T12:00:00.000Z",
			"items.0.subscriptions": nil,
			"items.1.clientId":      "c2", "items.1.subscriptionCount": 0.0, "items.1.lagCommits": 0.0}},
		{"clients after a cursor", "/admin/v1/clients?partition=p1&limit=1&cursor=" + c1, map[string]any{
			"items.0.clientId": "c2", "items.1": nil}},
		{"one client with its subscriptions", "/admin/v1/client?partition=p1&clientId=c1", map[string]any{
			"partition": "p1", "clientId": "c1", "subscriptionCount": 2.0, "subscriptions.1.id": "s2"}},
		{"commits", "/admin/v1/commits?partition=p1", map[string]any{
			"items.0.seq": 1.0, "items.0.actorId": "u1", "items.0.clientId": "c1", "items.0.clientCommitId": "cca",
			"items.0.changeCount": 2.0, "items.0.tables.0": "tasks", "items.0.createdAt": "2025-03-01T12:00:00.000Z",
			"items.1.seq": 2.0, "items.1.changeCount": 1.0, "nextAfter": nil}},
		{"commits by range with a continuation", "/admin/v1/commits?partition=p1&after=0&limit=1", map[string]any{
			"items.0.seq": 1.0, "items.1": nil, "nextAfter": 1.0}},
		{"commits through a seq", "/admin/v1/commits?partition=p1&after=1&through=2", map[string]any{
			"items.0.seq": 2.0, "items.1": nil}},
		{"reactions of a partition", "/admin/v1/reactions?partition=p1", map[string]any{
			"partition": "p1", "counts.pending": 2.0, "counts.leased": 0.0, "counts.completed": 0.0, "counts.dead-letter": 0.0, "total": 2.0}},
		{"reactions overall", "/admin/v1/reactions", map[string]any{"counts.pending": 2.0, "total": 2.0}},
		{"reaction list", "/admin/v1/reactions/list?partition=p1", map[string]any{
			"partition": "p1", "items.0.idempotencyKey": "r1", "items.0.type": "email", "items.0.status": "pending",
			"items.0.attempts": 0.0, "items.0.maxAttempts": 1.0, "items.0.clientCommitId": "cca", "items.0.commitSeq": 1.0,
			"items.0.lastFailure": nil, "items.0.payload": nil, "items.1.idempotencyKey": "r2", "items.2": nil, "nextCursor": nil}},
		{"reaction list by type and status", "/admin/v1/reactions/list?partition=p1&type=sms,fax&status=pending", map[string]any{
			"items.0.idempotencyKey": "r2", "items.0.version": 2.0, "items.1": nil}},
		{"reaction list of dead letters", "/admin/v1/reactions/list?partition=p1&status=dead-letter", map[string]any{"items.0": nil}},
		{"reaction list page", "/admin/v1/reactions/list?partition=p1&limit=1", map[string]any{
			"items.0.idempotencyKey": "r1", "items.1": nil, "nextCursor": "eyJ0IjoxLCJrIjoicjEifQ"}},
		{"reaction list continued", "/admin/v1/reactions/list?partition=p1&limit=1&cursor=eyJ0IjoxLCJrIjoicjEifQ", map[string]any{
			"items.0.idempotencyKey": "r2", "items.1": nil}},
		{"segments", "/admin/v1/segments", map[string]any{
			"available": true, "segments": 1.0, "bytes": 13.0, "publications": 1.0, "expiredPublications": 0.0}},
		{"readiness", "/admin/v1/readiness", map[string]any{"ready": true, "phase": "ready"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, h, tc.target)
			if code != http.StatusOK {
				t.Fatalf("status %d: %v", code, body)
			}
			for path, want := range tc.want {
				if got := at(body, path); !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v (body %v)", path, got, want, body)
				}
			}
		})
	}
}

// TestBadRequests: every malformed query is a JSON 400 naming the
// parameter, never a 500.
func TestBadRequests(t *testing.T) {
	h := handler(t)
	long := strings.Repeat("p", 1025)
	tests := []struct {
		name, target, param string
	}{
		{"limit zero", "/admin/v1/partitions?limit=0", "limit"},
		{"limit above the bound", "/admin/v1/partitions?limit=501", "limit"},
		{"limit not a number", "/admin/v1/clients?partition=p1&limit=ten", "limit"},
		{"cursor not base64", "/admin/v1/partitions?cursor=%%%", ""},
		{"cursor garbage", "/admin/v1/partitions?cursor=***", "cursor"},
		{"unknown parameter", "/admin/v1/partitions?offset=5", "offset"},
		{"parameter twice", "/admin/v1/clients?partition=p1&partition=p2", "partition"},
		{"clients without a partition", "/admin/v1/clients", "partition"},
		{"partition too long", "/admin/v1/clients?partition=" + long, "partition"},
		{"client without an id", "/admin/v1/client?partition=p1", "clientId"},
		{"commits with a negative after", "/admin/v1/commits?partition=p1&after=-1", "after"},
		{"commits with a non-numeric through", "/admin/v1/commits?partition=p1&through=x", "through"},
		{"commits through not above after", "/admin/v1/commits?partition=p1&after=5&through=5", "through"},
		{"empty reaction partition", "/admin/v1/reactions?partition=", "partition"},
		{"reaction list without a partition", "/admin/v1/reactions/list", "partition"},
		{"reaction list with an unknown status", "/admin/v1/reactions/list?partition=p1&status=done", "status"},
		{"reaction list with a bad cursor", "/admin/v1/reactions/list?partition=p1&cursor=eyJ9", "cursor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, h, tc.target)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %v", code, body)
			}
			if body["error"] == "" || body["error"] == nil {
				t.Fatalf("400 without an error message: %v", body)
			}
			if tc.param != "" && body["param"] != tc.param {
				t.Fatalf("param = %v, want %s", body["param"], tc.param)
			}
		})
	}
}

func TestMissingAndUnsupported(t *testing.T) {
	h := handler(t)
	bare := admin.New(admin.Options{})
	tests := []struct {
		name   string
		h      http.Handler
		method string
		target string
		want   int
	}{
		{"unknown client", h, http.MethodGet, "/admin/v1/client?partition=p1&clientId=nobody", 404},
		{"unknown route", h, http.MethodGet, "/admin/v1/nope", 404},
		{"writes are refused", h, http.MethodPost, "/admin/v1/partitions", 405},
		{"no admin reader", bare, http.MethodGet, "/admin/v1/partitions", 501},
		{"no client store", bare, http.MethodGet, "/admin/v1/client?partition=p&clientId=c", 501},
		{"no segment totals", bare, http.MethodGet, "/admin/v1/segments", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("not JSON: %s", rec.Body)
			}
		})
	}
	_, body := get(t, bare, "/admin/v1/segments")
	if body["available"] != false {
		t.Fatalf("segments without a stats reader = %v, want available false", body)
	}
}
