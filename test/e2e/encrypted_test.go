package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// vaultIR is the test schema plus a table with a client-side encrypted
// column (SPEC §5.11) that claims to hold JSON.
func vaultIR(t *testing.T) []byte {
	var ir map[string]any
	if err := json.Unmarshal(ssptest.IR(), &ir); err != nil {
		t.Fatal(err)
	}
	var vault map[string]any
	if err := json.Unmarshal([]byte(`{"name": "vault", "primaryKey": "id", "columns": [
		{"name": "id", "type": "string", "nullable": false},
		{"name": "owner", "type": "string", "nullable": false},
		{"name": "title", "type": "string", "nullable": false},
		{"name": "secret", "type": "bytes", "nullable": true, "encrypted": true, "declaredType": "json"}],
		"scopes": [{"pattern": "user:{owner}", "variable": "owner", "column": "owner"}]}`), &vault); err != nil {
		t.Fatal(err)
	}
	ir["tables"] = append(ir["tables"].([]any), vault)
	b, err := json.Marshal(ir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ciphertext is row i's opaque value: mostly pseudo-random bytes of a
// kilobyte or two, and a few that a server parsing the declared type (or
// merging, or normalizing) would change or refuse.
func ciphertext(i int) rowcodec.Value {
	switch i {
	case 0:
		return rowcodec.Bytes([]byte(`{ "a" : 1.0 }`)) // JSON that normalizes
	case 1:
		return rowcodec.Bytes([]byte{0xff, 0xfe, 0x00, '"'}) // neither UTF-8 nor JSON
	case 2:
		return rowcodec.Bytes([]byte{1, 1, 1, 0, 4, 1, 1, 't', 2, 'a', 'b', 0}) // a Yjs update
	case 3:
		return rowcodec.Bytes([]byte{})
	case 4:
		return rowcodec.Null()
	}
	var b []byte
	for k := 0; len(b) < 1200+i%900; k++ {
		s := sha256.Sum256(fmt.Appendf(nil, "%d/%d", i, k))
		b = append(b, s[:]...)
	}
	return rowcodec.Bytes(b)
}

// secretsSeen records what the row validator was shown.
type secretsSeen struct {
	mu   sync.Mutex
	seen map[string]any
}

func (s *secretsSeen) Table() string { return "vault" }

func (s *secretsSeen) ValidateRow(_ context.Context, v ports.RowValidation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[v.RowID] = v.Row["secret"]
	return nil
}

func sameValue(a, b rowcodec.Value) bool {
	if a.IsNull() || b.IsNull() {
		return a.IsNull() && b.IsNull()
	}
	return bytes.Equal(a.Raw(), b.Raw())
}

// TestEncryptedColumnsPassThroughByteExact: the server never decrypts or
// parses an encrypted column (SPEC §5.11): whatever bytes a client writes
// are what validators see, what storage holds, what a conflict's serverRow
// carries, and what other replicas receive through commits, inline
// segments and downloaded (external) segments. A replica that accepts
// sqlite images gets one for an ordinary table but the rows lane for the
// encrypted one, which the image lane must exclude.
func TestEncryptedColumnsPassThroughByteExact(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		seen := &secretsSeen{seen: map[string]any{}}
		s := start(t, e, serverOpts{ir: vaultIR(t), extra: []fx.Option{
			app.ProvideRowValidator(func() ports.RowValidator { return seen })}})
		base := strings.TrimSuffix(s.url, "/sync")
		newClient := func(accept uint8, snapshotRows int32) *client.Client {
			h := map[string][]string{"X-Syncd-Actor": {"alice"}}
			c, err := client.New(client.Options{BaseURL: base, Schema: s.sch, Header: h, Accept: accept, LimitSnapshotRows: snapshotRows})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		ctx := context.Background()
		const n = 240
		want := map[string]rowcodec.Value{}
		w := newClient(ssp2.AcceptInlineRows|ssp2.AcceptExternalRows, 0)
		var ops []ssp2.PushOperation
		for i := range n {
			id := fmt.Sprintf("v-%03d", i)
			want[id] = ciphertext(i)
			op, err := w.Upsert("vault", id, map[string]rowcodec.Value{"id": rowcodec.String(id),
				"owner": rowcodec.String("alice"), "title": rowcodec.String("t"), "secret": want[id]}, -1)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		for i := range 20 {
			id := fmt.Sprintf("p-%02d", i)
			op, err := w.Upsert("projects", id, map[string]rowcodec.Value{"id": rowcodec.String(id),
				"owner": rowcodec.String("alice"), "name": rowcodec.String("project " + id), "locked": rowcodec.Bool(false)}, -1)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		w.Queue(ops...)
		if _, err := w.Push(ctx); err != nil || len(w.Pending()) != 0 {
			t.Fatalf("push: %v, pending %v", err, w.Pending())
		}

		// Validators and storage hold the client's bytes.
		for id, v := range want {
			got, _ := seen.seen[id].([]byte)
			if v.IsNull() != (seen.seen[id] == nil) || (!v.IsNull() && !bytes.Equal(got, v.Raw())) {
				t.Fatalf("validator saw %v for %s, want %x", seen.seen[id], id, v.Raw())
			}
			row, err := s.store.GetRow(ctx, "default", "vault", id)
			if err != nil || row == nil {
				t.Fatalf("row %s: %v", id, err)
			}
			if got := ssptest.DecodeRow(t, s.sch.Table("vault"), row.Payload)["secret"]; !sameValue(got, v) {
				t.Fatalf("stored %s: %x, want %x", id, got.Raw(), v.Raw())
			}
		}

		// Replicas bootstrap through inline segments and through
		// downloaded ones, then follow commits.
		inline := newClient(ssp2.AcceptInlineRows|ssp2.AcceptExternalRows, 60)
		external := newClient(ssp2.AcceptExternalRows, 60)
		// Pages of 10 rows, so the 20 projects do not fit one page and are
		// eligible for an image.
		images := newClient(ssp2.AcceptInlineRows|ssp2.AcceptExternalRows|ssp2.AcceptSQLite, 10)
		check := func(c *client.Client, what string) {
			t.Helper()
			for id, v := range want {
				vals, _, ok := c.Get("vault", id)
				if !ok || !sameValue(vals["secret"], v) {
					t.Fatalf("%s: %s holds %x, want %x", what, id, vals["secret"].Raw(), v.Raw())
				}
			}
		}
		for _, c := range []*client.Client{inline, external, images} {
			c.Subscribe("v", "vault", map[string][]string{"owner": {"alice"}})
			if _, err := c.PullUntilIdle(ctx, 200); err != nil {
				t.Fatal(err)
			}
		}
		if st := inline.Stats(); st.InlineSegments == 0 {
			t.Fatalf("no inline segment: %+v", st)
		}
		if st := external.Stats(); st.SegmentRefs == 0 || st.InlineSegments != 0 {
			t.Fatalf("no downloaded segment: %+v", st)
		}
		if st := images.Stats(); st.Images != 0 {
			t.Fatalf("the encrypted table went the image lane: %+v", st)
		}
		images.Subscribe("p", "projects", map[string][]string{"owner": {"alice"}})
		if _, err := images.PullUntilIdle(ctx, 200); err != nil {
			t.Fatal(err)
		}
		if st := images.Stats(); st.Images == 0 {
			t.Fatalf("the ordinary table did not go the image lane: %+v", st)
		}
		check(inline, "inline segments")
		check(external, "downloaded segments")
		check(images, "the rows lane beside images")

		ops = ops[:0]
		for i := range 6 {
			id := fmt.Sprintf("v-%03d", i)
			want[id] = ciphertext(1000 + i)
			op, err := w.Upsert("vault", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "secret": want[id]}, -1)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		w.Queue(ops...)
		if _, err := w.Push(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*client.Client{inline, external, images} {
			if _, err := c.PullUntilIdle(ctx, 200); err != nil {
				t.Fatal(err)
			}
		}
		check(inline, "commits")
		check(external, "commits")
		check(images, "commits")

		// A stale write conflicts; its serverRow carries the stored bytes.
		op, err := w.Upsert("vault", "v-001", map[string]rowcodec.Value{"id": rowcodec.String("v-001"),
			"secret": rowcodec.Bytes([]byte("other"))}, 1)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := s.sync(call{}, ssptest.Req{ClientID: "c9", SchemaVersion: s.sch.Version, Epoch: s.epoch(call{}),
			Commits: []*ssp2.PushCommit{ssptest.Commit("stale", op)}})
		r := resp.Results[0]
		if r.Status != ssp2.PushRejected || len(r.Results) != 1 || r.Results[0].Code != "sync.version_conflict" {
			t.Fatalf("stale write %+v", r)
		}
		if got := ssptest.DecodeRow(t, s.sch.Table("vault"), r.Results[0].ServerRow)["secret"]; !sameValue(got, want["v-001"]) {
			t.Fatalf("serverRow secret %x, want %x", got.Raw(), want["v-001"].Raw())
		}
	})
}
