package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestOperationAnswers: the client reads what POST /operations answers
// and refuses answers that break the envelope, never passing them off
// as results.
func TestOperationAnswers(t *testing.T) {
	const rev = `{"t":"number","v":1}`
	str := func(s string) string { return `{"t":"string","v":"` + s + `"}` }
	obj := func(fields ...string) string { return `{"t":"object","v":[` + strings.Join(fields, ",") + `]}` }
	kv := func(k, v string) string { return `["` + k + `",` + v + `]` }
	rows := `{"t":"array","v":[` + obj(kv("id", str("t1"))) + `]}`
	for _, tt := range []struct {
		name, answer string
		status       int
		code         string // the error's code ("" for a success)
		malformed    bool
	}{
		{"a query result", obj(kv("revision", rev), kv("kind", str("query")), kv("operationId", str("q")), kv("rows", rows),
			kv("maxCommitSeq", `{"t":"number","v":7}`)), 200, "", false},
		{"an operation error", obj(kv("revision", rev), kv("kind", str("error")), kv("code", str("operation.forbidden")),
			kv("message", str("no")), kv("retryable", `{"t":"boolean","v":false}`)), 200, "operation.forbidden", false},
		{"a transport refusal", `{"code":"operation.invalid_request","message":"unsupported content type"}`, 415, "operation.invalid_request", false},
		{"another revision", obj(kv("revision", `{"t":"number","v":2}`), kv("kind", str("query"))), 200, "", true},
		{"a command answer to a query", obj(kv("revision", rev), kv("kind", str("command"))), 200, "", true},
		{"an error without a code", obj(kv("revision", rev), kv("kind", str("error"))), 200, "", true},
		{"a fractional maxCommitSeq", obj(kv("revision", rev), kv("kind", str("query")), kv("operationId", str("q")), kv("rows", rows),
			kv("maxCommitSeq", `{"t":"number","v":1.5}`)), 200, "", true},
		{"a row that is not an object", obj(kv("revision", rev), kv("kind", str("query")), kv("operationId", str("q")),
			kv("rows", `{"t":"array","v":[`+str("x")+`]}`), kv("maxCommitSeq", `{"t":"number","v":1}`)), 200, "", true},
		{"not the tagged encoding", `{"kind":"query"}`, 200, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got *http.Request
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				body, _ = io.ReadAll(r.Body)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.answer))
			}))
			defer srv.Close()
			c, err := client.New(client.Options{BaseURL: srv.URL + "/api", Schema: ssptest.Schema(t), ClientID: "c1", BearerToken: "tok"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Query(context.Background(), "q", operations.Null())
			if got.URL.Path != "/api/operations" || got.Header.Get("Content-Type") != client.OperationsContentType || got.Header.Get("Authorization") != "Bearer tok" {
				t.Fatalf("request %s %v", got.URL.Path, got.Header)
			}
			req, derr := operations.DecodeRequest(body)
			if derr != nil || req.Kind != operations.KindQuery || req.ClientID != "c1" || req.OperationID != "q" || req.Params.Kind() != operations.KindNull {
				t.Fatalf("request body %s: %+v %v", body, req, derr)
			}
			switch {
			case tt.malformed:
				if err == nil || client.CodeOf(err) != "" || !strings.Contains(err.Error(), "malformed") {
					t.Fatalf("accepted %s: %+v %v", tt.answer, res, err)
				}
			case tt.code != "":
				var oe *client.OperationError
				var he *client.HTTPError
				if client.CodeOf(err) != tt.code || (tt.status == 200) != errors.As(err, &oe) || (tt.status != 200) != errors.As(err, &he) {
					t.Fatalf("error %v, want %s", err, tt.code)
				}
			default:
				if err != nil || res.OperationID != "q" || res.MaxCommitSeq != 7 || len(res.Rows) != 1 || res.Rows[0][0].Key != "id" {
					t.Fatalf("result %+v %v", res, err)
				}
			}
		})
	}
}
