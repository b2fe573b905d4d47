package callout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/callout"
	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// stagedTx stands for the push transaction the queries must run on.
type stagedTx struct{ ports.TxReader }

// fakeQueries are the registered queries of the tests, on items:
// openItems answers two rows (one of them staged by the commit),
// bigItems more than its maxRows, brokenItems a storage failure.
// Every run is recorded; each advances the clock by step, when set.
type fakeQueries struct {
	mu    sync.Mutex
	runs  []queryRun
	clock *atomic.Int64
	step  time.Duration
}

type queryRun struct {
	tx     ports.TxReader
	id     string
	params map[string]any
}

func (f *fakeQueries) QueryTable(id string) (string, bool) {
	switch id {
	case "openItems", "bigItems", "brokenItems":
		return "items", true
	}
	return "", false
}

func (f *fakeQueries) QueryInTx(_ context.Context, tx ports.TxReader, id string, params map[string]any) ([]ports.CandidateRow, error) {
	f.mu.Lock()
	f.runs = append(f.runs, queryRun{tx: tx, id: id, params: params})
	f.mu.Unlock()
	if f.clock != nil {
		f.clock.Add(int64(f.step))
	}
	switch id {
	case "openItems":
		if _, ok := params["org"].(string); !ok {
			return nil, syncerr.Newf(syncerr.OperationInvalid, "parameter %q: want a string", "org")
		}
		return []ports.CandidateRow{
			{RowID: "i1", Version: 3, Values: ports.RowValues{"id": "i1", "org": "acme", "n": int64(9007199254740993), "meta": `{"k":1}`}},
			{RowID: "i9", Version: 1, Values: ports.RowValues{"id": "i9", "org": "acme", "raw": []byte{0, 1, 255}, "ok": nil}},
		}, nil
	case "bigItems":
		return nil, syncerr.Newf(syncerr.OperationResultTooLarge, "query %q has more than %d rows", id, 50)
	case "brokenItems":
		return nil, syncerr.Wrap(syncerr.InternalError, errors.New("storage: connection reset"))
	}
	return nil, syncerr.Newf(syncerr.OperationUnknown, "no query operation %q", id)
}

func (f *fakeQueries) seen() []queryRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]queryRun(nil), f.runs...)
}

// scriptedValidate answers BASE/validate with its answers in turn (the
// last repeats), each after its delay, and keeps the requests.
type scriptedValidate struct {
	mu       sync.Mutex
	answers  []string
	delays   []time.Duration
	clock    *atomic.Int64 // advanced by delays instead of sleeping, when set
	requests []map[string]any
	raw      []string
	features []string
}

func (b *scriptedValidate) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	b.mu.Lock()
	b.requests = append(b.requests, in)
	b.raw = append(b.raw, string(body))
	b.features = append(b.features, r.Header.Get(contract.HeaderFeatures))
	n := len(b.requests)
	answer := b.answers[min(n, len(b.answers))-1]
	var delay time.Duration
	if n <= len(b.delays) {
		delay = b.delays[n-1]
	}
	b.mu.Unlock()
	if b.clock != nil {
		b.clock.Add(int64(delay))
	} else if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	_, _ = io.WriteString(w, answer)
}

func (b *scriptedValidate) seen() ([]map[string]any, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.requests...), append([]string(nil), b.raw...)
}

// queryValidators are validators against b, with q (when not nil) and
// timeout; mut adjusts the client.
func queryValidators(t *testing.T, b *scriptedValidate, q ports.TxQueries, timeout time.Duration, mut func(*callout.Options)) *callout.Validators {
	t.Helper()
	sch, err := schema.Load([]byte(everyType))
	if err != nil {
		t.Fatal(err)
	}
	srv := backend(t, map[string]http.HandlerFunc{"validate": b.handler})
	v, err := callout.NewValidators(callout.ValidateOptions{Client: newClient(t, srv.URL, mut), Schema: sch, Timeout: timeout, Queries: q})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// verdict names what a validator returned: accept, reject (a
// *ports.ValidationRejection), unavailable (ports.ErrValidatorUnavailable)
// or plain (any other error: sync.constraint_violation in the pipeline).
func verdict(err error) string {
	var rej *ports.ValidationRejection
	switch {
	case err == nil:
		return "accept"
	case errors.As(err, &rej):
		return "reject"
	case errors.Is(err, ports.ErrValidatorUnavailable):
		return "unavailable"
	}
	return "plain"
}

func ask(queries ...string) string {
	return `{"queries":[` + strings.Join(queries, ",") + `]}`
}

const openAcme = `{"id":"openItems","params":{"org":"acme","min":2,"ratio":0.5,"all":true}}`

// TestValidateAsksForQueries: instead of deciding, a backend may ask for
// up to eight registered queries; they run on the push transaction and
// the backend is asked again with the same request and their results, in
// the order asked (rows in SPEC §11.1's shape, or the operation.* code of
// a query whose ask is wrong), and that answer decides. Asking again, too
// many or no queries, a query without an id or queries beside a decision
// are outages; a storage failure ends the validation as it would a Go
// validator's.
func TestValidateAsksForQueries(t *testing.T) {
	nine := make([]string, 9)
	for i := range nine {
		nine[i] = openAcme
	}
	openResult := `{"id":"openItems","table":"items","rows":[` +
		`{"rowId":"i1","row":{"id":"i1","org":"acme","n":9007199254740993,"meta":{"k":1}}},` +
		`{"rowId":"i9","row":{"id":"i9","org":"acme","ok":null,"raw":"AAH/"}}]}`
	tests := []struct {
		name    string
		answers []string
		want    string
		// callouts is how many callouts were made; results the second
		// request's queryResults, exactly as sent.
		callouts int
		results  string
		runs     []string
	}{
		{"accept after queries", []string{ask(openAcme), `{"accept":true}`}, "accept", 2, `[` + openResult + `]`, []string{"openItems"}},
		{"reject after queries", []string{ask(openAcme), `{"reject":{"code":"app.too_many","message":"at most one open item"}}`}, "reject", 2,
			`[` + openResult + `]`, []string{"openItems"}},
		{"eight queries, results in the order asked", []string{ask(`{"id":"nope"}`, openAcme, `{"id":"bigItems","params":{}}`,
			`{"id":"openItems","params":{"org":["acme"]}}`, `{"id":"openItems","params":{"org":null}}`, `{"id":"openItems"}`,
			`{"id":"openItems","params":{"org":1e999}}`, openAcme), `{"accept":true}`}, "accept", 2,
			`[{"id":"nope","error":{"code":"operation.unknown","message":"no query or descriptor \"nope\" is registered (--operations)"}},` + openResult + `,` +
				`{"id":"bigItems","error":{"code":"operation.result_too_large","message":"query \"bigItems\" has more than 50 rows"}},` +
				`{"id":"openItems","error":{"code":"operation.invalid_request","message":"parameter \"org\": want a string, a number or a boolean"}},` +
				`{"id":"openItems","error":{"code":"operation.invalid_request","message":"parameter \"org\": want a string, a number or a boolean"}},` +
				`{"id":"openItems","error":{"code":"operation.invalid_request","message":"parameter \"org\": want a string"}},` +
				`{"id":"openItems","error":{"code":"operation.invalid_request","message":"parameter \"org\": 1e999 is not a finite number"}},` +
				openResult + `]`,
			[]string{"openItems", "bigItems", "openItems", "openItems"}},
		{"asking twice", []string{ask(openAcme), ask(openAcme)}, "unavailable", 2, `[` + openResult + `]`, []string{"openItems"}},
		{"too many queries", []string{ask(nine...)}, "unavailable", 1, "", nil},
		{"no query", []string{`{"queries":[]}`}, "unavailable", 1, "", nil},
		{"a query without an id", []string{ask(`{"params":{"org":"acme"}}`)}, "unavailable", 1, "", nil},
		{"queries beside an accept", []string{`{"accept":true,"queries":[` + openAcme + `]}`}, "unavailable", 1, "", nil},
		{"a misspelt member of a query", []string{ask(`{"id":"openItems","param":{}}`)}, "unavailable", 1, "", nil},
		{"a parameter named twice", []string{ask(`{"id":"openItems","params":{"org":"a","org":"b"}}`)}, "unavailable", 1, "", nil},
		{"a storage failure", []string{ask(`{"id":"brokenItems"}`), `{"accept":true}`}, "plain", 1, "", []string{"brokenItems"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &scriptedValidate{answers: tt.answers}
			q := &fakeQueries{}
			rows, err := queryValidators(t, b, q, 2*time.Second, nil).Rows([]string{"items"})
			if err != nil {
				t.Fatal(err)
			}
			tx := &stagedTx{}
			err = rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "items", RowID: "i2",
				Row: ports.RowValues{"id": "i2", "org": "acme"}, ActorID: "alice", Partition: "acme", Tx: tx})
			if got := verdict(err); got != tt.want {
				t.Fatalf("ValidateRow = %v (%s), want %s", err, got, tt.want)
			}
			reqs, raw := b.seen()
			if len(reqs) != tt.callouts {
				t.Fatalf("%d callouts, want %d", len(reqs), tt.callouts)
			}
			if _, ok := reqs[0]["queryResults"]; ok {
				t.Fatalf("the first request carries query results: %s", raw[0])
			}
			if tt.callouts == 2 {
				// The second request is the first one plus the results.
				second := map[string]json.RawMessage{}
				_ = json.Unmarshal([]byte(raw[1]), &second)
				if got := string(second["queryResults"]); got != tt.results {
					t.Fatalf("queryResults\n%s\nwant\n%s", got, tt.results)
				}
				delete(reqs[1], "queryResults")
				if !reflect.DeepEqual(reqs[0], reqs[1]) {
					t.Fatalf("second request %v, first %v", reqs[1], reqs[0])
				}
			}
			var ids []string
			for _, r := range q.seen() {
				ids = append(ids, r.id)
				if r.tx != tx {
					t.Fatalf("query %s ran on %v, not the push transaction", r.id, r.tx)
				}
			}
			if !reflect.DeepEqual(ids, tt.runs) {
				t.Fatalf("queries run %v, want %v", ids, tt.runs)
			}
			if runs := q.seen(); tt.runs != nil && tt.runs[0] == "openItems" {
				// A parameter is typed as QueryInTx takes it.
				want := map[string]any{"org": "acme", "min": int64(2), "ratio": 0.5, "all": true}
				if !reflect.DeepEqual(runs[0].params, want) {
					t.Fatalf("params %#v, want %#v", runs[0].params, want)
				}
			}
		})
	}
}

// TestValidateCommitAsksForQueries: the whole-commit validation asks and
// is asked again the same way, and its second answer's rejection names
// its operation; every validate callout announces the feature.
func TestValidateCommitAsksForQueries(t *testing.T) {
	b := &scriptedValidate{answers: []string{ask(openAcme), `{"reject":{"code":"app.over","opIndex":1}}`}}
	q := &fakeQueries{}
	v := queryValidators(t, b, q, 2*time.Second, nil)
	tx := &stagedTx{}
	err := v.Commit().ValidateCommit(context.Background(), ports.CommitValidation{ClientID: "phone", ClientCommitID: "k1",
		ActorID: "alice", Partition: "acme", Tx: tx, Operations: []ports.OperationEvidence{
			{OpIndex: 0, Op: commit.OpUpsert, Table: "items", RowID: "i9", Row: ports.RowValues{"id": "i9", "org": "acme"}},
			{OpIndex: 1, Op: commit.OpUpsert, Table: "items", RowID: "i2", Row: ports.RowValues{"id": "i2", "org": "acme"}},
		}})
	var rej *ports.ValidationRejection
	if !errors.As(err, &rej) || rej.OpIndex != 1 || rej.Code != "app.over" {
		t.Fatalf("ValidateCommit = %v", err)
	}
	reqs, _ := b.seen()
	if len(reqs) != 2 || reqs[1]["kind"] != "commit" || len(reqs[1]["queryResults"].([]any)) != 1 {
		t.Fatalf("requests %v", reqs)
	}
	if runs := q.seen(); len(runs) != 1 || runs[0].tx != tx {
		t.Fatalf("queries %v", runs)
	}
	if b.mu.Lock(); !reflect.DeepEqual(b.features, []string{"validate-queries", "validate-queries"}) {
		t.Fatalf("%s: %v", contract.HeaderFeatures, b.features)
	}
	b.mu.Unlock()
}

// TestValidateQueriesWithoutOperations: without registered queries (no
// --operations) every asked query is operation.unknown, and the backend
// still decides.
func TestValidateQueriesWithoutOperations(t *testing.T) {
	b := &scriptedValidate{answers: []string{ask(openAcme), `{"accept":true}`}}
	rows, err := queryValidators(t, b, nil, 2*time.Second, nil).Rows([]string{"items"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "items", RowID: "i2",
		Row: ports.RowValues{"id": "i2", "org": "acme"}, ActorID: "alice", Partition: "acme"}); err != nil {
		t.Fatal(err)
	}
	reqs, _ := b.seen()
	res, _ := json.Marshal(reqs[len(reqs)-1]["queryResults"])
	if !strings.Contains(string(res), `"code":"operation.unknown"`) || strings.Contains(string(res), `"rows"`) {
		t.Fatalf("queryResults %s", res)
	}
}

// TestValidateQueriesShareTheTimeout: --callout-validate-timeout bounds
// the whole exchange, on the client's clock between the steps and as a
// deadline within them: time spent answering the ask or running the
// queries is gone from the second callout.
func TestValidateQueriesShareTheTimeout(t *testing.T) {
	tests := []struct {
		name string
		// clock: delays and query steps advance a fake clock instead of
		// passing.
		clock    bool
		delays   []time.Duration
		step     time.Duration
		timeout  time.Duration
		callouts int
		queries  int
	}{
		{"the ask took the whole timeout", true, []time.Duration{1600 * time.Millisecond}, 0, 1500 * time.Millisecond, 1, 0},
		{"the queries took the rest", true, []time.Duration{time.Second}, time.Second, 1500 * time.Millisecond, 1, 1},
		{"the second callout is past the rest", false, []time.Duration{600 * time.Millisecond, 600 * time.Millisecond}, 0, time.Second, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &scriptedValidate{answers: []string{ask(openAcme), `{"accept":true}`}, delays: tt.delays}
			q := &fakeQueries{step: tt.step}
			var mut func(*callout.Options)
			if tt.clock {
				now := &atomic.Int64{}
				b.clock, q.clock = now, now
				mut = func(o *callout.Options) { o.Now = func() time.Time { return time.Unix(0, now.Load()) } }
			}
			rows, err := queryValidators(t, b, q, tt.timeout, mut).Rows([]string{"items"})
			if err != nil {
				t.Fatal(err)
			}
			err = rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "items", RowID: "i2",
				Row: ports.RowValues{"id": "i2", "org": "acme"}, ActorID: "alice", Partition: "acme"})
			var o *callout.Outage
			if !errors.Is(err, ports.ErrValidatorUnavailable) || !errors.As(err, &o) || o.Outcome != callout.OutcomeTimeout {
				t.Fatalf("ValidateRow = %v, want a timeout", err)
			}
			if reqs, _ := b.seen(); len(reqs) != tt.callouts || len(q.seen()) != tt.queries {
				t.Fatalf("%d callouts, %d queries; want %d, %d", len(reqs), len(q.seen()), tt.callouts, tt.queries)
			}
		})
	}
}

// TestValidateQueriesAreCountedTracedAndLogged: the callout that asked
// counts as outcome queries and the queries by result; the second
// callout's span says how many queries it answers and how many failed;
// asking twice is logged as the malformed answer it is.
func TestValidateQueriesAreCountedTracedAndLogged(t *testing.T) {
	b := &scriptedValidate{answers: []string{ask(openAcme, `{"id":"nope"}`), `{"accept":true}`}}
	reg := prometheus.NewRegistry()
	m, err := callout.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	core, logs := observer.New(zap.DebugLevel)
	v := queryValidators(t, b, &fakeQueries{}, 2*time.Second, func(o *callout.Options) {
		o.Metrics, o.Tracer, o.Log = m, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), zap.New(core)
	})
	rows, err := v.Rows([]string{"items"})
	if err != nil {
		t.Fatal(err)
	}
	validate := func() error {
		return rows[0].ValidateRow(context.Background(), ports.RowValidation{Op: commit.OpUpsert, Table: "items", RowID: "i2",
			Row: ports.RowValues{"id": "i2", "org": "acme"}, ActorID: "alice", Partition: "acme"})
	}
	if err := validate(); err != nil {
		t.Fatal(err)
	}
	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans", len(ended))
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		out := map[string]string{}
		for _, a := range s.Attributes() {
			out[string(a.Key)] = a.Value.String()
		}
		return out
	}
	if a := attrs(ended[0]); a["syncd.callout.outcome"] != "queries" || a["syncd.callout.queries"] != "" {
		t.Fatalf("the asking callout's span: %v", a)
	}
	if a := attrs(ended[1]); a["syncd.callout.outcome"] != "ok" || a["syncd.callout.queries"] != "2" || a["syncd.callout.queries_failed"] != "1" {
		t.Fatalf("the second callout's span: %v", a)
	}

	b.mu.Lock()
	b.answers, b.requests = []string{ask(openAcme)}, nil
	b.mu.Unlock()
	if err := validate(); verdict(err) != "unavailable" {
		t.Fatalf("asking twice: %v", err)
	}
	lines := logs.FilterMessage("callout got no usable answer").All()
	if len(lines) != 1 || lines[0].ContextMap()["outcome"] != "malformed" ||
		!strings.Contains(fmt.Sprint(lines[0].ContextMap()["error"]), "asked for queries again") {
		t.Fatalf("log lines %v", lines)
	}

	counts := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			if c := mt.GetCounter(); c != nil {
				counts[key] = c.GetValue()
			}
		}
	}
	want := map[string]float64{
		"syncd_callouts_total callback=validate-row outcome=queries":                 2,
		"syncd_callouts_total callback=validate-row outcome=ok":                      1,
		"syncd_callouts_total callback=validate-row outcome=malformed":               1,
		"syncd_callout_queries_total callback=validate-row result=rows":              2,
		"syncd_callout_queries_total callback=validate-row result=operation.unknown": 1,
	}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("counters %v\nwant %v", counts, want)
	}
}
