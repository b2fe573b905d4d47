package callout_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/callout"
	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/ports"
)

// delivery is a claimed reaction as the runner hands it over.
func delivery(key string) ports.ReactionDelivery {
	return ports.ReactionDelivery{Partition: "acme", IdempotencyKey: key, Type: "mail/send", Version: 2,
		Payload: json.RawMessage(`{"to":"alice"}`), Attempt: 3, MaxAttempts: 10,
		Source: ports.ReactionSource{ClientID: "phone", ClientCommitID: "c-1", CommitSeq: 7, CreatedAtMs: 1_800_000_000_000}}
}

func newReactionHandler(t *testing.T, h http.HandlerFunc, timeout time.Duration, mut func(*callout.Options)) ports.ReactionHandler {
	t.Helper()
	srv := backend(t, map[string]http.HandlerFunc{"reactions/{type}": h})
	hs, err := callout.NewReactionHandlers(callout.ReactionOptions{Client: newClient(t, srv.URL, mut), Timeout: timeout, Lease: time.Minute},
		[]string{"mail/send"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Type() != "mail/send" {
		t.Fatalf("handlers %v", hs)
	}
	return hs[0]
}

// TestReactionWebhookCarriesTheDelivery: the webhook posts the delivery
// to BASE/reactions/<type> with the idempotency key (escaped for a
// header) and the attempt in headers, signed like every callout; an empty
// 2xx or {} completes it.
func TestReactionWebhookCarriesTheDelivery(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	now := time.Unix(1_800_000_000, 0)
	type seen struct {
		path, key, attempt string
		verified           bool
		body               string
	}
	got := make(chan seen, 3)
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) },
		func(w http.ResponseWriter) { _, _ = io.WriteString(w, " {} ") },
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) },
	}
	h := newReactionHandler(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k, _ := url.PathUnescape(r.Header.Get(contract.HeaderIdempotencyKey))
		got <- seen{path: r.URL.EscapedPath(), key: k, attempt: r.Header.Get(contract.HeaderReactionAttempt), body: string(body),
			verified: contract.Verify(r.Header.Get(contract.HeaderSignature), body, [][]byte{key}, now, time.Minute) == nil}
		answers[len(got)-1](w)
	}, bound, func(o *callout.Options) { o.Keys, o.Now = [][]byte{key}, func() time.Time { return now } })
	idem := `["acme","phone","c-1","welcome é 100%"]`
	for range answers {
		if err := h.HandleReaction(context.Background(), delivery(idem)); err != nil {
			t.Fatal(err)
		}
	}
	s := <-got
	want := `{"type":"mail/send","version":2,"idempotencyKey":"[\"acme\",\"phone\",\"c-1\",\"welcome é 100%\"]","partition":"acme",` +
		`"attempt":3,"maxAttempts":10,"payload":{"to":"alice"},` +
		`"source":{"clientId":"phone","clientCommitId":"c-1","commitSeq":7,"createdAtMs":1800000000000}}`
	if s.path != "/reactions/mail%2Fsend" || s.key != idem || s.attempt != "3" || !s.verified || s.body != want {
		t.Fatalf("webhook %+v\nwant body %s", s, want)
	}
}

// TestReactionWebhookFailures: every answer but a completing 2xx fails
// the attempt with a *ports.ReactionError the runner records and retries
// (permanent only when the backend classifies it so); a hostile backend
// costs the attempt its timeout.
func TestReactionWebhookFailures(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		code      string
		details   string
		permanent bool
	}{
		{"a 2xx with another body", 200, `{"ok":true}`, "callout.malformed", `{"status":200}`, false},
		{"a 2xx with text", 200, `OK`, "callout.malformed", `{"status":200}`, false},
		{"a 4xx", 404, `not found`, "callout.bad_status", `{"status":404}`, false},
		{"a 3xx", 302, ``, "callout.bad_status", `{"status":302}`, false},
		{"a classified failure", 422, `{"code":"mail.bounced","details":{"to":"alice"}}`, "mail.bounced", `{"to":"alice"}`, false},
		{"a permanent failure", 400, `{"code":"mail.unknown_version","permanent":true}`, "mail.unknown_version", "", true},
		{"a failure code that is none", 500, `{"code":"1 bad","permanent":true}`, "callout.bad_status", `{"status":500}`, false},
		{"a failure with an unknown member", 500, `{"code":"x","retry":false}`, "callout.bad_status", `{"status":500}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newReactionHandler(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}, bound, nil)
			err := h.HandleReaction(context.Background(), delivery("k"))
			var re *ports.ReactionError
			if !errors.As(err, &re) || re.Code != tt.code || string(re.Details) != tt.details || re.Permanent != tt.permanent {
				t.Fatalf("HandleReaction = %#v", err)
			}
		})
	}
	for _, hb := range hostileBackends() {
		t.Run(hb.name, func(t *testing.T) {
			h := newReactionHandler(t, hb.handler, 500*time.Millisecond, nil)
			err := h.HandleReaction(context.Background(), delivery("k"))
			var re *ports.ReactionError
			if !errors.As(err, &re) || re.Code != "callout."+string(hb.want) || re.Permanent {
				t.Fatalf("HandleReaction = %#v, want callout.%s", err, hb.want)
			}
		})
	}
}

// TestReactionWebhookKeepsItsLease: a timeout that does not fit in the
// runner's lease extends the lease to cover it before the webhook; a lost
// lease fails the attempt without calling the backend.
func TestReactionWebhookKeepsItsLease(t *testing.T) {
	called := make(chan struct{}, 2)
	srv := backend(t, map[string]http.HandlerFunc{"reactions/{type}": func(w http.ResponseWriter, _ *http.Request) {
		called <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}})
	hs, err := callout.NewReactionHandlers(callout.ReactionOptions{Client: newClient(t, srv.URL, nil), Timeout: time.Minute, Lease: 30 * time.Second},
		[]string{"mail/send"})
	if err != nil {
		t.Fatal(err)
	}
	var extended []time.Duration
	held := true
	d := delivery("k")
	d.ExtendLease = func(_ context.Context, by time.Duration) (bool, error) {
		extended = append(extended, by)
		return held, nil
	}
	if err := hs[0].HandleReaction(context.Background(), d); err != nil || len(extended) != 1 || extended[0] <= time.Minute || len(called) != 1 {
		t.Fatalf("HandleReaction = %v, extended %v, %d webhooks", err, extended, len(called))
	}
	held = false
	var re *ports.ReactionError
	if err := hs[0].HandleReaction(context.Background(), d); !errors.As(err, &re) || len(called) != 1 {
		t.Fatalf("with the lease lost: %v, %d webhooks", err, len(called))
	}
	if _, err := callout.NewReactionHandlers(callout.ReactionOptions{Client: newClient(t, srv.URL, nil), Timeout: time.Second, Lease: time.Minute},
		[]string{"ok", "not a type"}); err == nil {
		t.Fatal("a type that is none was accepted")
	}
}
