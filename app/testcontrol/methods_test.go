package testcontrol

import (
	"net/http"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// commitOf is a commit of id upserting tasks (rowID, project, title, done).
func (p *plane) commitOf(id, commitID string, rows ...[4]any) *ssp2.PushCommit {
	p.t.Helper()
	inst, _ := p.m.get(id)
	codec := rowcodec.New(inst.spec.schema.Table("tasks"))
	c := &ssp2.PushCommit{ClientCommitID: commitID}
	for _, r := range rows {
		payload, err := codec.AppendSparse(nil, []rowcodec.Value{rowcodec.String(r[0].(string)), rowcodec.String(r[1].(string)),
			rowcodec.String(r[2].(string)), rowcodec.Bool(r[3].(bool))})
		if err != nil {
			p.t.Fatal(err)
		}
		c.Operations = append(c.Operations, ssp2.PushOperation{Op: ssp2.OpUpsert, Table: "tasks", RowID: r[0].(string), Payload: payload})
	}
	return c
}

// rejection is the code of the first rejected operation of the response's
// push result ("" when the commit applied).
func rejection(t *testing.T, m *ssp2.Message) string {
	t.Helper()
	for _, f := range m.Frames {
		if pr, ok := f.(*ssp2.PushResult); ok {
			if pr.Status == ssp2.PushApplied {
				return ""
			}
			for _, r := range pr.Results {
				if r.Code != "" {
					return r.Code
				}
			}
			t.Fatalf("push result %+v without a code", pr)
		}
	}
	t.Fatalf("no push result in %+v", m.Frames)
	return ""
}

// The validator methods judge pushes against the stored rows of the
// instance database: installValidators (maxLength, immutableWhen on the
// stored row), installCommitValidator (a sibling operation required),
// each cleared by an empty install; rejections carry the host code and
// store nothing.
func TestValidatorMethods(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		hdr := &ssp2.ReqHeader{ClientID: "c1", SchemaVersion: 1}
		push := func(commitID string, rows ...[4]any) string {
			t.Helper()
			return rejection(t, p.sync(id, "alice", hdr, p.commitOf(id, commitID, rows...)))
		}
		if code := push("k0", [4]any{"t1", "p1", "short", true}); code != "" {
			t.Fatalf("before any validator: %s", code)
		}
		p.call(id, "installValidators", nil, []map[string]any{
			{"table": "tasks", "rule": map[string]any{"kind": "maxLength", "column": "title", "max": 10, "code": "app.too_long"}},
			{"table": "tasks", "rule": map[string]any{"kind": "immutableWhen", "column": "title", "guardColumn": "done", "guardValue": true, "code": "app.locked"}},
		})
		steps := []struct {
			name, commit string
			row          [4]any
			want         string
		}{
			{"a title past the maximum", "k1", [4]any{"t2", "p1", "far too long a title", false}, "app.too_long"},
			{"a title change of a stored row that is done", "k2", [4]any{"t1", "p1", "renamed", false}, "app.locked"},
			{"a new row within the maximum", "k3", [4]any{"t3", "p1", "fine", false}, ""},
			{"a title change of a stored row not done", "k4", [4]any{"t3", "p1", "renamed", true}, ""},
		}
		for _, s := range steps {
			if code := push(s.commit, s.row); code != s.want {
				t.Fatalf("%s: code %q, want %q", s.name, code, s.want)
			}
		}
		p.call(id, "installValidators", nil, []any{})
		if code := push("k5", [4]any{"t1", "p1", "renamed", true}); code != "" {
			t.Fatalf("after clearing the validators: %s", code)
		}

		p.call(id, "installCommitValidator", nil, map[string]any{"kind": "requireSiblingWhen", "table": "tasks", "column": "done",
			"equals": true, "siblingRowIdSuffix": "-audit", "code": "app.needs_audit"})
		if code := push("k6", [4]any{"t4", "p1", "alone", true}); code != "app.needs_audit" {
			t.Fatalf("done without its sibling: %q", code)
		}
		if code := push("k7", [4]any{"t4", "p1", "paired", true}, [4]any{"t4-audit", "p1", "audit", false}); code != "" {
			t.Fatalf("done with its sibling: %q", code)
		}
		p.call(id, "installCommitValidator", nil)
		if code := push("k8", [4]any{"t5", "p1", "alone", true}); code != "" {
			t.Fatalf("after clearing the commit validator: %q", code)
		}

		var rows []rowState
		p.call(id, "readRows", &rows, "tasks")
		var got []string
		for _, r := range rows {
			got = append(got, r.RowID+"="+r.Values["title"].(string))
		}
		if want := "t1=renamed t3=renamed t4=paired t4-audit=audit t5=alone"; strings.Join(got, " ") != want {
			t.Fatalf("rows %v, want %s", got, want)
		}
	})
}

// setResolverFailing fails every actor's scope resolution, loud and
// closed, until it is turned off.
func TestResolverFailing(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		hdr := &ssp2.ReqHeader{ClientID: "c1", SchemaVersion: 1}
		p.call(id, "setResolverFailing", nil, true)
		if code := rejection(t, p.sync(id, "alice", hdr, p.commitOf(id, "k1", [4]any{"t1", "p1", "x", false}))); code != "sync.forbidden" {
			t.Fatalf("a write while the resolver fails: %q, want sync.forbidden", code)
		}
		p.call(id, "setResolverFailing", nil, false)
		if code := rejection(t, p.sync(id, "alice", hdr, p.commitOf(id, "k2", [4]any{"t1", "p1", "x", false}))); code != "" {
			t.Fatalf("a write once it resolves again: %q", code)
		}
	})
}

// With signedUrls, a pull's segment carries a URL of this instance, and
// fetchSegmentUrl plays its host: the bytes while the URL lives on the
// virtual clock (with the SPEC's skew allowance), a refusal once it
// expired; setSignedUrlTtlSeconds(0) mints URLs born expired.
func TestSignedSegmentURLs(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create(`, "limits": {"inlineSegmentMaxBytes": 0}, "signedUrls": {"ttlSeconds": 60}`)
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		p.push(id, "alice", "writer", [2]string{"a", "p1"})
		pull := func(client string) *ssp2.SegmentRef {
			t.Helper()
			resp := p.sync(id, "alice", &ssp2.ReqHeader{ClientID: client, SchemaVersion: 1},
				&ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1,
					Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows | ssp2.AcceptSignedURLs},
				&ssp2.Subscription{ID: "s1", Table: "tasks", Cursor: -1,
					Scopes: ssp2.ScopeListsFromMap(map[string][]string{"project_id": {"p1"}})})
			for _, f := range resp.Frames {
				if r, ok := f.(*ssp2.SegmentRef); ok {
					if !r.URL.Present || !strings.HasPrefix(r.URL.Value, p.srv.URL+"/i/"+id+"/segments/") {
						t.Fatalf("segment URL %+v, want one of this instance", r.URL)
					}
					return r
				}
			}
			t.Fatalf("no SEGMENT_REF in %+v", resp.Frames)
			return nil
		}
		fetch := func(url string) blobResult {
			t.Helper()
			var r blobResult
			p.call(id, "fetchSegmentUrl", &r, url)
			return r
		}
		ref := pull("r1")
		if r := fetch(ref.URL.Value); !r.OK || int64(len(r.bytes(t))) != ref.ByteLength {
			t.Fatalf("a live URL: %+v, want the segment's %d bytes", r, ref.ByteLength)
		}
		if ref.URLExpiresAtMs.Value != 1000000+60_000 {
			t.Fatalf("URL expiry %d, want the virtual now and the TTL", ref.URLExpiresAtMs.Value)
		}
		// Past its expiry and the SPEC's clock-skew allowance, in whole
		// seconds: refused.
		p.call(id, "advanceClock", nil, 60_000+signedurl.Skew.Milliseconds())
		if r := fetch(ref.URL.Value); !r.OK {
			t.Fatalf("a URL within the skew allowance: %+v", r)
		}
		p.call(id, "advanceClock", nil, 1000)
		if r := fetch(ref.URL.Value); r.OK || r.code() != "sync.segment_expired" {
			t.Fatalf("an expired URL: %+v, want sync.segment_expired", r)
		}
		p.call(id, "setSignedUrlTtlSeconds", nil, 0)
		var now int64
		p.call(id, "nowMs", &now)
		if exp := pull("r2").URLExpiresAtMs.Value; exp != now {
			t.Fatalf("a URL minted with TTL 0 expires at %d, want now %d (born expired)", exp, now)
		}
		if code, _ := p.do("POST", "/control/instances/"+id+"/call", `{"method": "setSignedUrlTtlSeconds", "args": [-1]}`, nil); code != http.StatusInternalServerError {
			t.Fatalf("a negative TTL: %d", code)
		}
	})
}
