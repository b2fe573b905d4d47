// Command scopes-backend answers syncd's resolve-scopes callout
// (docs/callout.md, POST BASE/resolve-scopes) for the push-pull load of
// cmd/syncload on the tasks schema (scope variable project_id).
//
// syncload (--auth dev, its default dev headers) names client i's actor
// ACTOR_PREFIX+i and lets it write only project PROJECT_PREFIX+RUNID-i, so
// the backend grants actor ACTOR_PREFIX+i exactly that project when --run-id
// is given (pass the same --run-id to syncload), and every project ("*")
// without it. Any other actor is granted nothing ({"scopes": {}}).
//
// It also answers the validate callout (POST BASE/validate) with
// {"accept": true} after --validate-delay, a slow validator for measuring
// what one costs (docs/callout.md, "What a slow validator costs").
//
// It listens on 127.0.0.1 only, counts the callouts it answers and prints
// the counts on exit (SIGINT or SIGTERM).
//
//	scopes-backend --listen 127.0.0.1:9099 --run-id r1
//	syncd serve ... --scopes callout --callout-url http://127.0.0.1:9099
//	syncload ... --run-id r1 push-pull
//
//	scopes-backend --listen 127.0.0.1:9099 --validate-delay 50ms
//	syncd serve ... --callout-url http://127.0.0.1:9099 --callout-validate-tables tasks
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// request is the body of a resolve-scopes callout.
type request struct {
	ActorID   string `json:"actorId"`
	Partition string `json:"partition"`
	ClientID  string `json:"clientId"`
}

// answer is the reply: exactly one member, "scopes".
type answer struct {
	Scopes map[string][]string `json:"scopes"`
}

type backend struct {
	variable      string
	actorPrefix   string
	projectPrefix string
	runID         string
	validateDelay time.Duration
	calls         atomic.Int64
	validates     atomic.Int64
	bad           atomic.Int64
}

// validateKind is the one member of a validate callout read here; the
// rest of the row or commit is accepted unseen.
type validateKind struct {
	Kind string `json:"kind"`
}

// validate answers every row or commit validation with an accept after
// --validate-delay.
func (b *backend) validate(w http.ResponseWriter, r *http.Request) {
	b.validates.Add(1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		b.bad.Add(1)
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return
	}
	var k validateKind
	if err := json.Unmarshal(body, &k); err != nil || (k.Kind != "row" && k.Kind != "commit") {
		// A non-2xx status is an outage to syncd: the push fails retryable.
		b.bad.Add(1)
		http.Error(w, "want {\"kind\": \"row\" or \"commit\", ...}", http.StatusBadRequest)
		return
	}
	if b.validateDelay > 0 {
		t := time.NewTimer(b.validateDelay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"accept":true}`))
}

// grant is the actor's grant over the schema's scope variable.
func (b *backend) grant(actor string) map[string][]string {
	n, ok := strings.CutPrefix(actor, b.actorPrefix)
	if !ok {
		return map[string][]string{}
	}
	if _, err := strconv.Atoi(n); err != nil {
		return map[string][]string{}
	}
	if b.runID == "" {
		return map[string][]string{b.variable: {"*"}}
	}
	return map[string][]string{b.variable: {b.projectPrefix + b.runID + "-" + n}}
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/resolve-scopes" && r.URL.Path != "/validate" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/validate" {
		b.validate(w, r)
		return
	}
	b.calls.Add(1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		b.bad.Add(1)
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.ActorID == "" {
		// A non-2xx status is an outage to syncd, never a grant.
		b.bad.Add(1)
		http.Error(w, "want {\"actorId\", \"partition\", \"clientId\"}", http.StatusBadRequest)
		return
	}
	out, err := json.Marshal(answer{Scopes: b.grant(req.ActorID)})
	if err != nil {
		b.bad.Add(1)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9099", "address to listen on (a 127.0.0.1 address only)")
	b := &backend{}
	flag.StringVar(&b.variable, "variable", "project_id", "the schema's scope variable to grant")
	flag.StringVar(&b.actorPrefix, "actor-prefix", "load-", "syncload --actor-prefix: client i's actor is PREFIX+i")
	flag.StringVar(&b.projectPrefix, "project-prefix", "load-", "syncload --project-prefix: client i's project is PREFIX+RUNID-i")
	flag.StringVar(&b.runID, "run-id", "", "syncload --run-id: grant client i only its project (empty: grant \"*\")")
	flag.DurationVar(&b.validateDelay, "validate-delay", 0, "wait this long before answering each validate callout {\"accept\": true}")
	flag.Parse()
	if b.validateDelay < 0 {
		log.Fatalf("--validate-delay %v: want >= 0", b.validateDelay)
	}

	host, _, err := net.SplitHostPort(*listen)
	if err != nil || host != "127.0.0.1" {
		log.Fatalf("--listen %q: want 127.0.0.1:PORT", *listen)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Printf("scopes-backend listening on %s", ln.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Print(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	fmt.Printf("calls %d validates %d bad %d\n", b.calls.Load(), b.validates.Load(), b.bad.Load())
}
