package callout_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/callout"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// everyType is a schema with a column of every type.
const everyType = `{"irVersion":1,"schemaVersion":1,"schemaVersions":[{"version":1,"migrations":["0001"]}],
"tables":[{"name":"items","primaryKey":"id","scopes":[{"pattern":"org:{org}","variable":"org","column":"org"}],"columns":[
{"name":"id","type":"string","nullable":false},{"name":"org","type":"string","nullable":false},
{"name":"n","type":"integer","nullable":true},{"name":"f","type":"float","nullable":true},
{"name":"ok","type":"boolean","nullable":true},{"name":"meta","type":"json","nullable":true},
{"name":"raw","type":"bytes","nullable":true},{"name":"file","type":"blob_ref","nullable":true},
{"name":"doc","type":"crdt","nullable":true,"crdtType":"yjs-doc"}]}],"subscriptions":[]}`

// validateBackend answers BASE/validate with the answer of the moment
// and keeps each request body.
type validateBackend struct {
	mu       sync.Mutex
	requests []map[string]any
	raw      []string
	status   int
	answer   string
	hang     bool
}

func (b *validateBackend) set(status int, answer string, hang bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.answer, b.hang = status, answer, hang
}

func (b *validateBackend) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	b.mu.Lock()
	b.requests = append(b.requests, in)
	b.raw = append(b.raw, string(body))
	status, answer, hang := b.status, b.answer, b.hang
	b.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func (b *validateBackend) last() map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[len(b.requests)-1]
}

func newValidators(t *testing.T, b *validateBackend) (*callout.Validators, *schema.Schema) {
	t.Helper()
	sch, err := schema.Load([]byte(everyType))
	if err != nil {
		t.Fatal(err)
	}
	srv := backend(t, map[string]http.HandlerFunc{"validate": b.handler})
	v, err := callout.NewValidators(callout.ValidateOptions{Client: newClient(t, srv.URL, nil), Schema: sch, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return v, sch
}

// TestValidateRowSendsTheSpecRowShapes: a row validation carries the
// operation and both rows as SPEC §11.1 renders row values: integers and
// floats as numbers (a non-finite one as null), json and blob_ref
// embedded parsed, bytes and crdt as base64, NULL as null; an insert's
// stored row and a delete's row are null.
func TestValidateRowSendsTheSpecRowShapes(t *testing.T) {
	b := &validateBackend{status: 200, answer: `{"accept":true}`}
	v, _ := newValidators(t, b)
	rows, err := v.Rows([]string{"items"})
	if err != nil || len(rows) != 1 || rows[0].Table() != "items" {
		t.Fatalf("rows %v, %v", rows, err)
	}
	if _, err := v.Rows([]string{"nope"}); err == nil {
		t.Fatal("an undeclared table was accepted")
	}
	row := ports.RowValues{"id": "i1", "org": "acme", "n": int64(9007199254740993), "f": 1.5, "ok": true,
		"meta": `{"b":[1,2],"a":null}`, "raw": []byte{0, 1, 255}, "file": `{"blobId":"x","size":3}`, "doc": []byte("yjs"), "unknown": "skipped"}
	err = rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "items", RowID: "i1", OpIndex: 2,
		Row: row, ActorID: "alice", Partition: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(b.last())
	want := `{"actorId":"alice","kind":"row","op":"upsert","opIndex":2,"partition":"acme",` +
		`"row":{"doc":"eWpz","f":1.5,"file":{"blobId":"x","size":3},"id":"i1","meta":{"a":null,"b":[1,2]},"n":9007199254740992,"ok":true,"org":"acme","raw":"AAH/"},` +
		`"rowId":"i1","stored":null,"table":"items"}`
	if string(got) != want {
		t.Fatalf("request\n%s\nwant\n%s", got, want)
	}
	if b.mu.Lock(); !strings.Contains(b.raw[0], `"n":9007199254740993`) {
		t.Fatalf("an integer past 2^53 lost digits on the wire: %s", b.raw[0])
	}
	b.mu.Unlock()
	err = rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpDelete, Table: "items", RowID: "i1",
		Stored: ports.RowValues{"id": "i1", "org": "acme", "n": nil, "f": math.Inf(1)}, ActorID: "alice", Partition: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	last := b.last()
	if last["op"] != "delete" || last["row"] != nil || !reflect.DeepEqual(last["stored"], map[string]any{"id": "i1", "org": "acme", "n": nil, "f": nil}) {
		t.Fatalf("delete request %v", last)
	}
}

// TestValidateAnswers: accept is nil; a rejection is the
// *ports.ValidationRejection a Go validator returns, details normalized;
// a rejection the pipeline cannot take (reserved code, invalid details)
// is a plain error (sync.constraint_violation, as a Go validator whose
// constructor failed); no usable answer is ports.ErrValidatorUnavailable.
func TestValidateAnswers(t *testing.T) {
	tests := []struct {
		name   string
		status int
		answer string
		hang   bool
		// want: "accept", "reject", "plain" or "unavailable".
		want string
	}{
		{"accept", 200, `{"accept":true}`, false, "accept"},
		{"reject with details", 200, `{"reject":{"code":"app.title_too_long","message":"at most 10","details":{"reason":"too_long","fieldPaths":["title"]}}}`, false, "reject"},
		{"reject without a message", 200, `{"reject":{"code":"app.no"}}`, false, "reject"},
		{"a reserved code", 200, `{"reject":{"code":"sync.forbidden","message":"x"}}`, false, "plain"},
		{"an empty code", 200, `{"reject":{"code":""}}`, false, "plain"},
		{"details outside §6.3.1", 200, `{"reject":{"code":"app.no","details":{"stack":"at line 3"}}}`, false, "plain"},
		{"accept false", 200, `{"accept":false}`, false, "unavailable"},
		{"accept and reject", 200, `{"accept":true,"reject":{"code":"app.no"}}`, false, "unavailable"},
		{"empty object", 200, `{}`, false, "unavailable"},
		{"unknown member", 200, `{"accept":true,"why":"x"}`, false, "unavailable"},
		{"a rejection's unknown member", 200, `{"reject":{"code":"app.no","detail":{}}}`, false, "unavailable"},
		{"garbage", 200, `OK`, false, "unavailable"},
		{"422", 422, `{"reject":{"code":"app.no"}}`, false, "unavailable"},
		{"500", 500, `{"accept":true}`, false, "unavailable"},
		{"no answer in time", 0, "", true, "unavailable"},
	}
	b := &validateBackend{}
	v, _ := newValidators(t, b)
	rows, err := v.Rows([]string{"items"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.set(tt.status, tt.answer, tt.hang)
			err := rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "items", RowID: "i1",
				Row: ports.RowValues{"id": "i1", "org": "acme"}, ActorID: "alice", Partition: "acme"})
			var rej *ports.ValidationRejection
			got := "plain"
			switch {
			case err == nil:
				got = "accept"
			case errors.As(err, &rej):
				got = "reject"
			case errors.Is(err, ports.ErrValidatorUnavailable):
				got = "unavailable"
			}
			if got != tt.want {
				t.Fatalf("ValidateRow = %v (%s), want %s", err, got, tt.want)
			}
			if tt.name == "reject with details" {
				want := &ports.ValidationRejection{Code: "app.title_too_long", Message: "at most 10",
					Details: &ssp2.RejectionDetails{FieldPaths: []string{"title"}, Reason: "too_long"}}
				if !reflect.DeepEqual(rej, want) {
					t.Fatalf("rejection %+v, want %+v", rej, want)
				}
			}
		})
	}
}

// TestValidateCommitSendsTheOperations: a whole-commit validation
// carries the commit's evidence and attributes a rejection to the
// operation the backend names (the first when it names none).
func TestValidateCommitSendsTheOperations(t *testing.T) {
	b := &validateBackend{status: 200, answer: `{"reject":{"code":"app.total","opIndex":1}}`}
	v, _ := newValidators(t, b)
	cv := ports.CommitValidation{ClientID: "phone", ClientCommitID: "k1", ActorID: "alice", Partition: "acme", Operations: []ports.OperationEvidence{
		{OpIndex: 0, Op: commit.OpUpsert, Table: "items", RowID: "i1", Row: ports.RowValues{"id": "i1", "org": "acme", "n": int64(2)}, NextServerVersion: 1},
		{OpIndex: 1, Op: commit.OpDelete, Table: "items", RowID: "i2", Stored: ports.RowValues{"id": "i2", "org": "acme"}, StoredServerVersion: 4},
		{OpIndex: 2, Op: commit.OpDelete, Table: "items", RowID: "absent"},
	}}
	err := v.Commit().ValidateCommit(context.Background(), cv)
	var rej *ports.ValidationRejection
	if !errors.As(err, &rej) || rej.OpIndex != 1 || rej.Code != "app.total" {
		t.Fatalf("ValidateCommit = %v", err)
	}
	got, _ := json.Marshal(b.last())
	want := `{"actorId":"alice","clientCommitId":"k1","clientId":"phone","kind":"commit","operations":[` +
		`{"nextServerVersion":1,"op":"upsert","opIndex":0,"row":{"id":"i1","n":2,"org":"acme"},"rowId":"i1","stored":null,"table":"items"},` +
		`{"op":"delete","opIndex":1,"row":null,"rowId":"i2","stored":{"id":"i2","org":"acme"},"storedServerVersion":4,"table":"items"},` +
		`{"op":"delete","opIndex":2,"row":null,"rowId":"absent","stored":null,"table":"items"}],"partition":"acme"}`
	if string(got) != want {
		t.Fatalf("request\n%s\nwant\n%s", got, want)
	}
	b.set(200, `{"reject":{"code":"app.total"}}`, false)
	if err := v.Commit().ValidateCommit(context.Background(), cv); !errors.As(err, &rej) || rej.OpIndex != 0 {
		t.Fatalf("unattributed rejection: %v", err)
	}
}
