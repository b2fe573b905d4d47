package callout_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/callout"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// commandBackend answers BASE/commands/<name> with the answers given, one
// per callout (the last repeats), and keeps each request body.
type commandBackend struct {
	mu       sync.Mutex
	paths    []string
	requests []map[string]any
	answers  []string
}

func (b *commandBackend) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	b.mu.Lock()
	b.paths = append(b.paths, r.URL.EscapedPath())
	b.requests = append(b.requests, in)
	answer := b.answers[min(len(b.requests), len(b.answers))-1]
	b.mu.Unlock()
	_, _ = io.WriteString(w, answer)
}

func (b *commandBackend) seen() ([]string, []map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.paths...), append([]map[string]any(nil), b.requests...)
}

func newCommands(t *testing.T, h http.HandlerFunc, timeout time.Duration, mut func(*callout.Options)) (*callout.Commands, *observer.ObservedLogs) {
	t.Helper()
	sch, err := schema.Load([]byte(everyType))
	if err != nil {
		t.Fatal(err)
	}
	srv := backend(t, map[string]http.HandlerFunc{"commands/{name}": h})
	core, logs := observer.New(zap.DebugLevel)
	cmds, err := callout.NewCommands(callout.CommandOptions{Client: newClient(t, srv.URL, mut), Schema: sch, Timeout: timeout, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	return cmds, logs
}

// stored is the candidate state a command reads: i1 is the caller's, i2
// is not (GetRow answers nil, as for an absent row).
func stored(_ context.Context, table, rowID string) (ports.RowValues, error) {
	if table == "items" && rowID == "i1" {
		return ports.RowValues{"id": "i1", "org": "acme", "n": int64(9007199254740993), "raw": []byte{0, 1}}, nil
	}
	return nil, nil
}

func call(name string) callout.CommandCall {
	id, _ := opdomain.String("i1")
	params, _ := opdomain.Object(opdomain.Field{Key: "id", Value: id}, opdomain.Field{Key: "n", Value: opdomain.Integer(7)})
	return callout.CommandCall{Name: name, RequestID: "r-1", ActorID: "alice", Partition: "acme", ClientID: "phone",
		Params: params, GetRow: stored}
}

// fullRow is an items row naming every column, each as the contract
// renders it.
const fullRow = `{"id":"i1","org":"acme","n":9007199254740993,"f":1.5,"ok":true,"meta":{"b":[1, 2]},"raw":"AAH/",` +
	`"file":{"blobId":"sha256:` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `","byteLength":3},"doc":null}`

// TestCommandReadsThenWrites: the backend asks for rows, is asked again
// with them rendered as SPEC §11.1 renders rows (null for a row the
// caller may not write), and answers writes that come back in a Go
// command's mutation shapes, every value typed for its column.
func TestCommandReadsThenWrites(t *testing.T) {
	b := &commandBackend{answers: []string{
		`{"read":[{"table":"items","rowId":"i1"},{"table":"items","rowId":"i2"}]}`,
		`{"read":[{"table":"items","rowId":"i1"}]}`,
		`{"writes":[{"table":"items","rowId":"i1","values":` + fullRow + `},{"table":"items","delete":true,"rowId":"i2"}]}`,
	}}
	cmds, _ := newCommands(t, b.handler, bound, nil)
	writes, err := cmds.Run(context.Background(), call("items/fix"))
	if err != nil {
		t.Fatal(err)
	}
	want := []callout.CommandWrite{
		{Table: "items", RowID: "i1", Values: ports.RowValues{"id": "i1", "org": "acme", "n": int64(9007199254740993), "f": 1.5, "ok": true,
			"meta": `{"b":[1,2]}`, "raw": []byte{0, 1, 255},
			"file": `{"blobId":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","byteLength":3}`, "doc": nil}},
		{Table: "items", Delete: true, RowID: "i2"},
	}
	if !reflect.DeepEqual(writes, want) {
		t.Fatalf("writes\n%+v\nwant\n%+v", writes, want)
	}
	paths, reqs := b.seen()
	if len(reqs) != 3 || paths[0] != "/commands/items%2Ffix" {
		t.Fatalf("%d callouts, paths %v", len(reqs), paths)
	}
	first, _ := json.Marshal(reqs[0])
	if string(first) != `{"actorId":"alice","clientId":"phone","operationId":"items/fix",`+
		`"params":{"t":"object","v":[["id",{"t":"string","v":"i1"}],["n",{"t":"integer","v":"7"}]]},"partition":"acme","requestId":"r-1","rows":[]}` {
		t.Fatalf("first request %s", first)
	}
	// Each row once, in the order asked; the integer past 2^53 is
	// rendered with every digit (json.Unmarshal here rounds it).
	rows, _ := json.Marshal(reqs[2]["rows"])
	if string(rows) != `[{"row":{"id":"i1","n":9007199254740992,"org":"acme","raw":"AAE="},"rowId":"i1","table":"items"},{"row":null,"rowId":"i2","table":"items"}]` {
		t.Fatalf("rows %s", rows)
	}
}

// TestCommandAnswers: a refusal with an operation code reaches the client
// as a Go command's error would; any other code is
// operation.execution_failed, logged; every answer not of the contract's
// shape, and every hostile backend, is the retryable sync.rate_limited.
func TestCommandAnswers(t *testing.T) {
	write := func(values string) string { return `{"writes":[{"table":"items","values":` + values + `}]}` }
	reads := func(n int) string {
		refs := make([]string, n)
		for i := range refs {
			refs[i] = `{"table":"items","rowId":"i1"}`
		}
		return `{"read":[` + strings.Join(refs, ",") + `]}`
	}
	tests := []struct {
		name    string
		answers []string
		code    syncerr.Code
		message string
	}{
		{"forbidden", []string{`{"reject":{"code":"operation.forbidden","message":"not your project"}}`}, syncerr.OperationForbidden, "not your project"},
		{"invalid without a message", []string{`{"reject":{"code":"operation.invalid_request"}}`}, syncerr.OperationInvalid, "invalid operation request"},
		{"an app code", []string{`{"reject":{"code":"app.nope","message":"x"}}`}, syncerr.OperationExecFailed, "operation execution failed"},
		{"a sync code", []string{`{"reject":{"code":"sync.forbidden"}}`}, syncerr.OperationExecFailed, ""},

		{"two decisions", []string{`{"writes":[],"reject":{"code":"operation.forbidden"}}`}, syncerr.RateLimited, ""},
		{"no decision", []string{`{}`}, syncerr.RateLimited, ""},
		{"no writes", []string{`{"writes":[]}`}, syncerr.RateLimited, ""},
		{"an unknown member of a write", []string{`{"writes":[{"table":"items","rowid":"i1","values":` + fullRow + `}]}`}, syncerr.RateLimited, ""},
		{"a column twice", []string{write(strings.Replace(fullRow, `"org":"acme"`, `"org":"acme","org":"evil"`, 1))}, syncerr.RateLimited, ""},
		{"an unknown table", []string{`{"writes":[{"table":"nope","values":{}}]}`}, syncerr.RateLimited, ""},
		{"an unknown column", []string{write(strings.Replace(fullRow, `"ok":true`, `"ok":true,"extra":1`, 1))}, syncerr.RateLimited, ""},
		{"a missing column", []string{write(strings.Replace(fullRow, `"ok":true,`, ``, 1))}, syncerr.RateLimited, ""},
		{"a string for an integer", []string{write(strings.Replace(fullRow, `"n":9007199254740993`, `"n":"5"`, 1))}, syncerr.RateLimited, ""},
		{"a fraction for an integer", []string{write(strings.Replace(fullRow, `"n":9007199254740993`, `"n":1.5`, 1))}, syncerr.RateLimited, ""},
		{"a float out of range", []string{write(strings.Replace(fullRow, `"f":1.5`, `"f":1e999`, 1))}, syncerr.RateLimited, ""},
		{"bytes not base64", []string{write(strings.Replace(fullRow, `"AAH/"`, `"AAH"`, 1))}, syncerr.RateLimited, ""},
		{"a blob_ref that is none", []string{write(strings.Replace(fullRow, `"byteLength":3`, `"size":3`, 1))}, syncerr.RateLimited, ""},
		{"a primary key unlike its rowId", []string{`{"writes":[{"table":"items","rowId":"i9","values":` + fullRow + `}]}`}, syncerr.RateLimited, ""},
		{"a null primary key", []string{write(strings.Replace(fullRow, `"id":"i1"`, `"id":null`, 1))}, syncerr.RateLimited, ""},
		{"a delete without a rowId", []string{`{"writes":[{"table":"items","delete":true}]}`}, syncerr.RateLimited, ""},
		{"a delete with values", []string{`{"writes":[{"table":"items","delete":true,"rowId":"i1","values":{}}]}`}, syncerr.RateLimited, ""},
		{"a read of an unknown table", []string{`{"read":[{"table":"nope","rowId":"x"}]}`}, syncerr.RateLimited, ""},
		{"an empty read", []string{`{"read":[]}`}, syncerr.RateLimited, ""},
		{"reads past the rounds", []string{reads(1)}, syncerr.RateLimited, ""},
		{"reads past the rows", []string{reads(callout.MaxCommandReads + 1)}, syncerr.RateLimited, ""},
		{"a 4xx", []string{`{"reject":{"code":"operation.forbidden"}}`}, syncerr.RateLimited, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &commandBackend{answers: tt.answers}
			h := b.handler
			if tt.name == "a 4xx" {
				h = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden); b.handler(w, r) }
			}
			cmds, logs := newCommands(t, h, bound, nil)
			writes, err := cmds.Run(context.Background(), call("c"))
			var e *syncerr.Error
			if !errors.As(err, &e) || e.Code != tt.code || writes != nil {
				t.Fatalf("Run = %v, %v; want %s", writes, err, tt.code)
			}
			if tt.message != "" && e.Body().Message != tt.message {
				t.Fatalf("message %q, want %q", e.Body().Message, tt.message)
			}
			if tt.code == syncerr.RateLimited && logs.FilterMessage("callout got no usable answer").Len() != 0 {
				t.Fatalf("the outage was logged on the commands' logger, not the client's")
			}
			if tt.code == syncerr.OperationExecFailed && logs.FilterMessageSnippet("rejection code").Len() != 1 {
				t.Fatalf("the unusable code was not logged: %v", logs.All())
			}
		})
	}
	for _, h := range hostileBackends() {
		t.Run(h.name, func(t *testing.T) {
			cmds, _ := newCommands(t, h.handler, 500*time.Millisecond, nil)
			_, err := cmds.Run(context.Background(), call("c"))
			var o *callout.Outage
			if syncerr.CodeOf(err) != syncerr.RateLimited || !errors.As(err, &o) || o.Outcome != h.want || !syncerr.Public(err).Entry().Retryable {
				t.Fatalf("Run = %v, want a retryable outage %s", err, h.want)
			}
		})
	}
}

// TestCommandTimeoutCoversEveryRound: --callout-command-timeout bounds the
// command's callouts together, on the client's clock: a backend that
// keeps asking for rows runs out of it between rounds.
func TestCommandTimeoutCoversEveryRound(t *testing.T) {
	var now atomic.Int64
	b := &commandBackend{answers: []string{`{"read":[{"table":"items","rowId":"i1"}]}`, `{"read":[{"table":"items","rowId":"i2"}]}`}}
	cmds, _ := newCommands(t, func(w http.ResponseWriter, r *http.Request) {
		now.Add(int64(time.Second)) // each answer takes a second of the clock's
		b.handler(w, r)
	}, 1500*time.Millisecond, func(o *callout.Options) { o.Now = func() time.Time { return time.Unix(0, now.Load()) } })
	_, err := cmds.Run(context.Background(), call("c"))
	var o *callout.Outage
	if _, reqs := b.seen(); syncerr.CodeOf(err) != syncerr.RateLimited || !errors.As(err, &o) || o.Outcome != callout.OutcomeTimeout || len(reqs) != 2 {
		t.Fatalf("Run = %v after %d callouts", err, len(reqs))
	}
}
