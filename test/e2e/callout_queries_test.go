package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// queryingBackend validates the todos demo's writes the way a backend
// without the rows does: it asks syncd for the queries it needs and
// decides on their results. A list holds at most three open todos (a
// row validation asks for the openTodos descriptor of the todo's list);
// a commit may leave a list with at most six todos (the commit validation
// asks for todosInList of each list it writes); a todo whose id starts
// with "u-" asks for a query nobody registered and is refused with what
// it got back. It keeps the row ids each open todo's validation was
// given.
type queryingBackend struct {
	mu       sync.Mutex
	openSeen map[string][]string // todo id → the open todos' ids its query answered
	features []string
}

type queryResults []struct {
	ID    string
	Table string
	Rows  []struct {
		RowID string
		Row   map[string]any
	}
	Error *struct{ Code, Message string }
}

func (b *queryingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in struct {
		Kind       string
		RowID      string
		Row        map[string]any
		Operations []struct {
			OpIndex int
			Table   string
			Row     map[string]any
		}
		QueryResults queryResults
	}
	_ = json.Unmarshal(body, &in)
	b.mu.Lock()
	b.features = append(b.features, r.Header.Get(contract.HeaderFeatures))
	b.mu.Unlock()
	answer := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	ask := func(queries ...map[string]any) { answer(map[string]any{"queries": queries}) }
	accept := func() { answer(map[string]bool{"accept": true}) }
	reject := func(code, message string, opIndex int) {
		answer(map[string]any{"reject": map[string]any{"code": code, "message": message, "opIndex": opIndex}})
	}
	if in.Kind == "commit" {
		// The lists the commit writes todos to, in order, each with the
		// first operation that does.
		var lists []string
		first := map[string]int{}
		for _, op := range in.Operations {
			if l, ok := op.Row["list_id"].(string); ok && op.Table == "todos" {
				if _, seen := first[l]; !seen {
					first[l] = op.OpIndex
					lists = append(lists, l)
				}
			}
		}
		switch {
		case len(lists) == 0:
			accept()
		case in.QueryResults == nil:
			var qs []map[string]any
			for _, l := range lists {
				qs = append(qs, map[string]any{"id": "todosInList", "params": map[string]any{"listId": l}})
			}
			ask(qs...)
		default:
			for i, res := range in.QueryResults {
				if len(res.Rows) > 6 {
					reject("lists.too_long", "a list holds at most six todos", first[lists[i]])
					return
				}
			}
			accept()
		}
		return
	}
	if strings.HasPrefix(in.RowID, "u-") {
		if in.QueryResults == nil {
			ask(map[string]any{"id": "todosDueToday", "params": map[string]any{"listId": in.Row["list_id"]}})
			return
		}
		if e := in.QueryResults[0].Error; e != nil {
			reject("app.query_failed", e.Code, 0)
			return
		}
		accept()
		return
	}
	if in.Row == nil || in.Row["done"] == true {
		accept()
		return
	}
	if in.QueryResults == nil {
		ask(map[string]any{"id": "openTodos", "params": map[string]any{"listId": in.Row["list_id"]}})
		return
	}
	var others []string
	for _, r := range in.QueryResults[0].Rows {
		if r.RowID != in.RowID {
			others = append(others, r.RowID)
		}
	}
	b.mu.Lock()
	b.openSeen[in.RowID] = others
	b.mu.Unlock()
	if len(others) >= 3 {
		reject("todos.too_many_open", "a list holds at most three open todos", 0)
		return
	}
	accept()
}

func (b *queryingBackend) seen(todo string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openSeen[todo]
}

// TestCalloutValidatorQueriesThePushTransaction: a backend's row and
// commit validators ask for typegen descriptors by name, which run inside
// the push transaction over its candidate state, so a todo is refused for
// the open todos staged earlier in its own commit, and a commit for the
// todos it would leave in a list; a query nobody registered comes back
// operation.unknown; the query rounds are counted. On both engines.
func TestCalloutValidatorQueriesThePushTransaction(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		be := &queryingBackend{openSeen: map[string][]string{}}
		hooks := httptest.NewServer(be)
		t.Cleanup(hooks.Close)
		path, _ := descriptorFiles(t)
		s := start(t, e, serverOpts{ir: todos.IR(), config: func(c *config.Config) {
			c.Operations = path
			c.Callout.URL = hooks.URL
			c.Callout.ValidateTables, c.Callout.ValidateCommits = "todos", true
			// Generous, so a loaded machine never times out an answering backend.
			c.Callout.ValidateTimeout = 5 * time.Second
		}})
		writer := call{actor: "alice", scopes: `{"owner_id":["*"],"list_id":["*"]}`}
		ep := s.epoch(writer)
		o := todoOps{t, s}
		push := func(id string, ops ...ssp2.PushOperation) *ssp2.PushResult {
			t.Helper()
			resp, _ := s.sync(writer, ssptest.Req{ClientID: "w1", SchemaVersion: s.sch.Version, Epoch: ep,
				Commits: []*ssp2.PushCommit{ssptest.Commit(id, ops...)}})
			return resp.Results[0]
		}

		// Three open todos and a done one, each open one validated against
		// those staged before it.
		if r := push("k1", o.list("l-1", "alice"), o.todo("a", "l-1", false, 1, 1), o.todo("b", "l-1", false, 2, 2),
			o.todo("c", "l-1", false, 3, 3), o.todo("x", "l-1", true, 4, 4)); r.Status != ssp2.PushApplied {
			t.Fatalf("three open todos: %+v", r)
		}
		if got := be.seen("c"); !reflect.DeepEqual(got, []string{"b", "a"}) {
			t.Fatalf("c's validation saw the open todos %v, want the staged b and a (most recent first)", got)
		}

		// A new list's fourth open todo in one commit is refused for the
		// three staged before it; nothing of the commit applies.
		r := push("k2", o.list("l-2", "alice"), o.todo("e", "l-2", false, 1, 1), o.todo("f", "l-2", false, 2, 2),
			o.todo("g", "l-2", false, 3, 3), o.todo("h", "l-2", false, 4, 4))
		if r.Status != ssp2.PushRejected || r.Results[0].OpIndex != 4 || r.Results[0].Code != "todos.too_many_open" {
			t.Fatalf("a fourth open todo in one commit: %+v", r)
		}
		if got := be.seen("h"); !reflect.DeepEqual(got, []string{"g", "f", "e"}) {
			t.Fatalf("h's validation saw %v, want the staged g, f and e", got)
		}
		if row, _ := s.store.GetRow(t.Context(), "default", "todos", "e"); row != nil {
			t.Fatalf("the rejected commit applied e: %+v", row)
		}

		// Closing one earlier in the same commit makes room.
		if r := push("k3", o.todo("a", "l-1", true, 1, 5), o.todo("d", "l-1", false, 5, 5)); r.Status != ssp2.PushApplied {
			t.Fatalf("close one, open one: %+v", r)
		}

		// The commit validation counts the list's todos, the commit's own
		// staged ones included: five stored and two new make seven.
		if r := push("k4", o.todo("y", "l-1", true, 6, 6), o.todo("z", "l-1", true, 7, 7)); r.Status != ssp2.PushRejected ||
			r.Results[0].OpIndex != 0 || r.Results[0].Code != "lists.too_long" {
			t.Fatalf("a seventh todo: %+v", r)
		}
		if r := push("k5", o.todo("y", "l-1", true, 6, 8)); r.Status != ssp2.PushApplied {
			t.Fatalf("a sixth todo: %+v", r)
		}

		// A query nobody registered answers operation.unknown, which the
		// backend decides on.
		if r := push("k6", o.todo("u-1", "l-1", true, 9, 9)); r.Status != ssp2.PushRejected ||
			r.Results[0].Code != "app.query_failed" || r.Results[0].Message != "operation.unknown" {
			t.Fatalf("an unknown query: %+v", r)
		}

		if be.mu.Lock(); len(be.features) == 0 || be.features[0] != contract.FeatureValidateQueries {
			t.Errorf("%s: %v", contract.HeaderFeatures, be.features)
		}
		be.mu.Unlock()
		metrics := scrape(t, s)
		for _, want := range []string{
			`syncd_callouts_total{callback="validate-row",outcome="queries"}`,
			`syncd_callouts_total{callback="validate-commit",outcome="queries"}`,
			`syncd_callouts_total{callback="validate-row",outcome="refused"} 2`,
			`syncd_callouts_total{callback="validate-commit",outcome="refused"} 1`,
			`syncd_callout_queries_total{callback="validate-row",result="operation.unknown"} 1`,
			`syncd_callout_queries_total{callback="validate-commit",result="rows"}`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}
