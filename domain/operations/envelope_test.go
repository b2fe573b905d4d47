package operations_test

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

const (
	rev1    = `["revision",{"t":"number","v":1}]`
	kindQ   = `["kind",{"t":"string","v":"query"}]`
	kindC   = `["kind",{"t":"string","v":"command"}]`
	client  = `["clientId",{"t":"string","v":"c1"}]`
	opID    = `["operationId",{"t":"string","v":"tasks.byOwner"}]`
	reqID   = `["requestId",{"t":"string","v":"r1"}]`
	noParam = `["params",{"t":"null"}]`
)

func obj(pairs ...string) string {
	out := `{"t":"object","v":[`
	for i, p := range pairs {
		if i > 0 {
			out += ","
		}
		out += p
	}
	return out + `]}`
}

func TestDecodeRequest(t *testing.T) {
	t.Run("query", func(t *testing.T) {
		r, err := operations.DecodeRequest([]byte(obj(rev1, kindQ, client, opID, noParam)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != operations.KindQuery || r.ClientID != "c1" || r.OperationID != "tasks.byOwner" || r.Params.Kind() != operations.KindNull {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("command", func(t *testing.T) {
		r, err := operations.DecodeRequest([]byte(obj(rev1, kindC, client, opID, reqID, noParam)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != operations.KindCommand || r.RequestID != "r1" {
			t.Fatalf("got %+v", r)
		}
	})
	refusals := []struct{ name, body string }{
		{"not an object", `{"t":"null"}`},
		{"no revision", obj(kindQ, client, opID, noParam)},
		{"revision 2", obj(`["revision",{"t":"number","v":2}]`, kindQ, client, opID, noParam)},
		{"revision as integer", obj(`["revision",{"t":"integer","v":"1"}]`, kindQ, client, opID, noParam)},
		{"unknown kind", obj(rev1, `["kind",{"t":"string","v":"watch"}]`, client, opID, noParam)},
		{"no clientId", obj(rev1, kindQ, opID, noParam)},
		{"empty clientId", obj(rev1, kindQ, `["clientId",{"t":"string","v":""}]`, opID, noParam)},
		{"clientId not a string", obj(rev1, kindQ, `["clientId",{"t":"integer","v":"1"}]`, opID, noParam)},
		{"no operationId", obj(rev1, kindQ, client, noParam)},
		{"empty operationId", obj(rev1, kindQ, client, `["operationId",{"t":"string","v":""}]`, noParam)},
		{"command without requestId", obj(rev1, kindC, client, opID, noParam)},
		{"command with empty requestId", obj(rev1, kindC, client, opID, `["requestId",{"t":"string","v":""}]`, noParam)},
		{"no params", obj(rev1, kindQ, client, opID)},
		{"malformed value", `{"t":"object","v":[["revision",{"t":"number"}]]}`},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := operations.DecodeRequest([]byte(tt.body)); syncerr.CodeOf(err) != syncerr.OperationInvalid {
				t.Fatalf("got %v, want operation.invalid_request", err)
			}
		})
	}
}

func TestEncodeResponses(t *testing.T) {
	t.Run("query success", func(t *testing.T) {
		got, err := operations.EncodeQueryResult(operations.QueryResult{
			OperationID:  "q",
			Rows:         []operations.Row{{{Key: "id", Value: str("t1")}, {Key: "n", Value: must(operations.Number(2))}}},
			MaxCommitSeq: 7,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := obj(rev1, kindQ, `["operationId",{"t":"string","v":"q"}]`,
			`["rows",{"t":"array","v":[`+obj(`["id",{"t":"string","v":"t1"}]`, `["n",{"t":"number","v":2}]`)+`]}]`,
			`["maxCommitSeq",{"t":"number","v":7}]`)
		if string(got) != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("query with an unsafe maxCommitSeq", func(t *testing.T) {
		if _, err := operations.EncodeQueryResult(operations.QueryResult{OperationID: "q", MaxCommitSeq: 1 << 53}); syncerr.CodeOf(err) != syncerr.OperationQueryFailed {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("command success", func(t *testing.T) {
		got, err := operations.EncodeCommandResult(operations.CommandResult{OperationID: "c", RequestID: "r1", Status: operations.CommandApplied, CommitSeq: 3})
		if err != nil {
			t.Fatal(err)
		}
		want := obj(rev1, kindC, `["operationId",{"t":"string","v":"c"}]`, `["requestId",{"t":"string","v":"r1"}]`,
			`["status",{"t":"string","v":"applied"}]`, `["commitSeq",{"t":"number","v":3}]`, `["results",{"t":"array","v":[]}]`)
		if string(got) != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("command without a commit seq omits it", func(t *testing.T) {
		got, _ := operations.EncodeCommandResult(operations.CommandResult{OperationID: "c", RequestID: "r1", Status: operations.CommandRejected})
		want := obj(rev1, kindC, `["operationId",{"t":"string","v":"c"}]`, `["requestId",{"t":"string","v":"r1"}]`,
			`["status",{"t":"string","v":"rejected"}]`, `["results",{"t":"array","v":[]}]`)
		if string(got) != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
	errs := []struct {
		name string
		err  error
		want string
	}{
		{"catalog error", syncerr.New(syncerr.OperationUnknown), obj(rev1, `["kind",{"t":"string","v":"error"}]`,
			`["code",{"t":"string","v":"operation.unknown"}]`, `["message",{"t":"string","v":"unknown operation"}]`,
			`["retryable",{"t":"boolean","v":false}]`)},
		{"retryable catalog error", syncerr.New(syncerr.SchemaNotReady), obj(rev1, `["kind",{"t":"string","v":"error"}]`,
			`["code",{"t":"string","v":"sync.schema_not_ready"}]`, `["message",{"t":"string","v":"`+syncerr.Lookup(syncerr.SchemaNotReady).Message+`"}]`,
			`["retryable",{"t":"boolean","v":true}]`)},
		{"host-only code is internal", syncerr.New(syncerr.StorageInvalidLimit), obj(rev1, `["kind",{"t":"string","v":"error"}]`,
			`["code",{"t":"string","v":"sync.internal_error"}]`, `["message",{"t":"string","v":"`+syncerr.Lookup(syncerr.InternalError).Message+`"}]`,
			`["retryable",{"t":"boolean","v":true}]`)},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if got := operations.EncodeError(tt.err); string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
