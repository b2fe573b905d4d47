package client_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// A section's commits apply in arrival order at SUB_END: a row's last
// write in the response is the one the replica keeps, and rows that share
// the response's memory stay apart.
func TestSectionWritesApplyInOrder(t *testing.T) {
	sch := ssptest.Schema(t)
	tbl := sch.Table("tasks")
	scopes := ssp2.StoredScopesFromMap(map[string]string{"project_id": "p1"})
	row := func(id, title string) []byte {
		return ssptest.Full(t, tbl, ssptest.Cols{"id": rowcodec.String(id), "project_id": rowcodec.String("p1"),
			"title": rowcodec.String(title), "done": rowcodec.Bool(false), "estimate": rowcodec.Null(), "attachment": rowcodec.Null()})
	}
	type write struct {
		id    string
		title string // "" deletes
	}
	for _, tc := range []struct {
		name   string
		before []write // an earlier response
		writes []write // one commit each, in this response
		want   map[string]string
	}{
		{"upserts", nil, []write{{"a", "a1"}, {"b", "b1"}}, map[string]string{"a": "a1", "b": "b1"}},
		{"the last upsert wins", nil, []write{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}}, map[string]string{"a": "a3"}},
		{"a delete after an upsert", nil, []write{{"a", "a1"}, {"b", "b1"}, {"a", ""}}, map[string]string{"b": "b1"}},
		{"an upsert after a delete", nil, []write{{"a", "a1"}, {"a", ""}, {"a", "a2"}}, map[string]string{"a": "a2"}},
		{"a delete of an earlier row", []write{{"a", "a0"}, {"c", "c0"}}, []write{{"a", ""}, {"b", "b1"}}, map[string]string{"b": "b1", "c": "c0"}},
		{"many rows", nil, func() []write {
			var w []write
			for i := range 600 {
				w = append(w, write{"r" + strconv.Itoa(i%200), "t" + strconv.Itoa(i)})
			}
			return w
		}(), func() map[string]string {
			m := map[string]string{}
			for i := 400; i < 600; i++ {
				m["r"+strconv.Itoa(i%200)] = "t" + strconv.Itoa(i)
			}
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bodies [][]byte
			seq := int64(0)
			for _, ws := range [][]write{tc.before, tc.writes} {
				frames := []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e1"},
					&ssp2.SubStart{ID: "s", Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(map[string][]string{"project_id": {"p1"}})}}
				for _, w := range ws {
					seq++
					ch := ssp2.Change{RowID: w.id, Op: ssp2.OpDelete, Scopes: scopes}
					if w.title != "" {
						ch = ssp2.Change{RowID: w.id, Op: ssp2.OpUpsert, RowVersion: seq, Scopes: scopes, Row: row(w.id, w.title)}
					}
					frames = append(frames, &ssp2.Commit{CommitSeq: seq, ActorID: "w", Tables: []string{"tasks"}, Changes: []ssp2.Change{ch}})
				}
				frames = append(frames, &ssp2.SubEnd{NextCursor: seq})
				b, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: frames})
				if err != nil {
					t.Fatal(err)
				}
				bodies = append(bodies, b)
			}
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", client.ContentType)
				_, _ = w.Write(bodies[n])
				n++
			}))
			defer srv.Close()
			c, err := client.New(client.Options{BaseURL: srv.URL, Schema: sch, ClientID: "c1"})
			if err != nil {
				t.Fatal(err)
			}
			c.SetLogEpoch("e1")
			c.Subscribe("s", "tasks", map[string][]string{"project_id": {"p1"}})
			for range bodies {
				if _, err := c.Pull(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]string{}
			for id, r := range c.Rows("tasks") {
				got[id] = ssptest.DecodeRow(t, tbl, r.Payload)["title"].Text()
				// Appending to one row's payload must not reach another's.
				_ = append(r.Payload, 0xff)
			}
			for id, r := range c.Rows("tasks") {
				if title := ssptest.DecodeRow(t, tbl, r.Payload)["title"].Text(); title != got[id] {
					t.Fatalf("row %s changed to %q after an append to another row", id, title)
				}
			}
			if !maps.Equal(got, tc.want) {
				ids := slices.Sorted(maps.Keys(got))
				t.Fatalf("replica %v (ids %v), want %v", got, ids, tc.want)
			}
		})
	}
}
