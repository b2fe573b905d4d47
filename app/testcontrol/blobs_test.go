package testcontrol

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

const attachmentsSchema = `{"version": 1, "tables": [{"name": "attachments", "primaryKey": "id",
  "columns": [{"name": "id", "type": "string", "nullable": false},
              {"name": "project_id", "type": "string", "nullable": false},
              {"name": "file", "type": "blob_ref", "nullable": true}],
  "scopes": [{"pattern": "project:{project_id}"}]}]}`

// blobResult is a blob method's driver result.
type blobResult struct {
	OK    bool
	Bytes *struct {
		B64 string `json:"$b64"`
	}
	URL            string
	URLExpiresAtMs int64
	Grant          *struct {
		Kind           string
		URL            string
		URLExpiresAtMs int64
	}
	Error *struct{ Code, Message string }
}

func (r blobResult) bytes(t *testing.T) string {
	t.Helper()
	if !r.OK || r.Bytes == nil {
		t.Fatalf("no bytes in %+v", r)
	}
	b, err := base64.StdEncoding.DecodeString(r.Bytes.B64)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (r blobResult) code() string {
	if r.OK || r.Error == nil {
		return ""
	}
	return r.Error.Code
}

func b64arg(s string) map[string]string {
	return map[string]string{"$b64": base64.StdEncoding.EncodeToString([]byte(s))}
}

func (p *plane) attach(id, actor, rowID, project, blobID string, n int) ssp2.PushStatus {
	p.t.Helper()
	inst, _ := p.m.get(id)
	payload, err := rowcodec.New(inst.spec.schema.Table("attachments")).AppendSparse(nil, []rowcodec.Value{
		rowcodec.String(rowID), rowcodec.String(project),
		rowcodec.BlobRef(`{"blobId":"` + blobID + `","byteLength":` + jsonInt(n) + `}`)})
	if err != nil {
		p.t.Fatal(err)
	}
	c := &ssp2.PushCommit{ClientCommitID: "c-" + rowID, Operations: []ssp2.PushOperation{
		{Op: ssp2.OpUpsert, Table: "attachments", RowID: rowID, Payload: payload}}}
	return pushStatus(p.sync(id, actor, &ssp2.ReqHeader{ClientID: "client-" + actor, SchemaVersion: 1}, c))
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestBlobMethods(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		code, b := p.do("POST", "/control/instances", `{"schema": `+attachmentsSchema+`, "partition": "part-1", "nowMs": 1000000}`, nil)
		var created struct{ ID string }
		if code != http.StatusOK || json.Unmarshal(b, &created) != nil {
			t.Fatalf("create: %d %s", code, b)
		}
		id := created.ID
		p.call(id, "setAllowedScopes", nil, "author", map[string][]string{"project_id": {"p1"}})
		p.call(id, "setAllowedScopes", nil, "reader", map[string][]string{"project_id": {"p1"}})
		p.call(id, "setAllowedScopes", nil, "intruder", map[string][]string{"project_id": {"p2"}})

		data := "hello, this is an attached file"
		blobID := contentaddr.Of([]byte(data))
		var r blobResult
		p.call(id, "uploadBlob", &r, "author", blobID, b64arg(data), "text/plain")
		if !r.OK {
			t.Fatalf("uploadBlob: %+v", r)
		}
		r = blobResult{}
		p.call(id, "uploadBlob", &r, "author", contentaddr.Of([]byte("some bytes")), b64arg("other bytes"))
		if r.code() != "blob.hash_mismatch" {
			t.Fatalf("upload of other bytes: %+v", r)
		}
		if st := p.attach(id, "author", "att-bad", "p1", contentaddr.Of([]byte("never uploaded")), 3); st != ssp2.PushRejected {
			t.Fatalf("push of an absent blob: %v", st)
		}
		if st := p.attach(id, "author", "att1", "p1", blobID, len(data)); st != ssp2.PushApplied {
			t.Fatalf("push of the uploaded blob: %v", st)
		}

		download := func(actor, blob string) blobResult {
			var r blobResult
			p.call(id, "downloadBlob", &r, actor, blob)
			return r
		}
		if got := download("reader", blobID).bytes(t); got != data {
			t.Fatalf("reader downloaded %q", got)
		}
		if c := download("intruder", blobID).code(); c != "blob.forbidden" {
			t.Fatalf("intruder: %s", c)
		}
		if c := download("reader", contentaddr.Of([]byte("unknown"))).code(); c != "blob.not_found" {
			t.Fatalf("unknown blob: %s", c)
		}

		// Presigned: the download answers a URL on this listener, fetched
		// without an actor, expiring on the virtual clock.
		p.call(id, "setBlobPresign", nil, true)
		u := download("reader", blobID)
		if !u.OK || !strings.HasPrefix(u.URL, p.srv.URL+"/i/"+id+"/blob-objects/"+blobID+"?op=get") || u.URLExpiresAtMs != 1_000_000+900_000 {
			t.Fatalf("presigned download: %+v", u)
		}
		if c := download("intruder", blobID).code(); c != "blob.forbidden" {
			t.Fatalf("intruder with presign: %s", c)
		}
		r = blobResult{}
		p.call(id, "fetchBlobUrl", &r, u.URL)
		if got := r.bytes(t); got != data {
			t.Fatalf("fetched %q", got)
		}
		p.call(id, "advanceClock", nil, 900_000+61_000)
		r = blobResult{}
		p.call(id, "fetchBlobUrl", &r, u.URL)
		if r.code() != "blob.forbidden" {
			t.Fatalf("expired URL: %+v", r)
		}

		// Upload grants: a presigned PUT, present, none with presign off.
		fresh := "direct-to-storage bytes"
		freshID := contentaddr.Of([]byte(fresh))
		r = blobResult{}
		p.call(id, "uploadBlobGrant", &r, "author", freshID, len(fresh), "text/plain")
		if !r.OK || r.Grant == nil || r.Grant.Kind != "url" || !strings.Contains(r.Grant.URL, "/blob-objects/"+freshID+"?") {
			t.Fatalf("grant: %+v", r)
		}
		grantURL := r.Grant.URL
		r = blobResult{}
		p.call(id, "putBlobUrl", &r, grantURL, b64arg("not the granted bytes"))
		if r.OK {
			t.Fatalf("PUT of other bytes accepted: %+v", r)
		}
		r = blobResult{}
		p.call(id, "putBlobUrl", &r, grantURL, b64arg(fresh))
		if !r.OK {
			t.Fatalf("putBlobUrl: %+v", r)
		}
		r = blobResult{}
		p.call(id, "uploadBlobGrant", &r, "author", freshID, len(fresh))
		if r.Grant == nil || r.Grant.Kind != "present" {
			t.Fatalf("grant of a stored blob: %+v", r)
		}
		r = blobResult{}
		p.call(id, "uploadBlobGrant", &r, "author", freshID, 1<<30)
		if r.code() != "blob.too_large" {
			t.Fatalf("grant over the cap: %+v", r)
		}
		p.call(id, "setBlobPresign", nil, false)
		r = blobResult{}
		p.call(id, "uploadBlobGrant", &r, "author", contentaddr.Of([]byte("later")), 5)
		if r.Grant == nil || r.Grant.Kind != "none" {
			t.Fatalf("grant without presign: %+v", r)
		}
		if got := download("reader", blobID).bytes(t); got != data {
			t.Fatalf("download with presign off again: %q", got)
		}
	})
}
