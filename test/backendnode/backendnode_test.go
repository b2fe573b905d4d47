// Package backendnode runs the Node example backend (examples/backend-node)
// beside the built "syncd serve", the way its README tells a team to, on
// SQLite and PostgreSQL, and checks through SSP2 clients that each of its
// rules takes effect: authenticate refuses unknown and suspended users,
// resolve-scopes keeps each user to their own lists, the validator
// rejects a too-long todo title with its code and details and nothing
// applied, and an accepted write reaches the user's other devices. It also
// checks that the backend verifies the signature syncd puts on callouts.
//
// Node.js must be on PATH. Without it the test is skipped with a loud
// message, except when CI or SYNCD_REQUIRE_NODE is set: then it fails.
package backendnode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/client"
	contract "github.com/syncd-dev/syncd/domain/callout"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/examples/todos"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, "syncd-backendnode-", &binary)) }

// exampleDir is the example's directory, relative to this package.
const exampleDir = "../../examples/backend-node"

// maxTitle is the backend's limit (MAX_TITLE in rules.mjs).
const maxTitle = 80

var engines = []struct {
	name     string
	database func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

func TestNodeBackendRulesTakeEffect(t *testing.T) {
	proctest.WatchSources(t)
	node := requireNode(t)
	watchExample(t)
	sch, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			db := e.database(t)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			keyFile, key := writeKey(t)
			be := startBackend(t, ctx, node, keyFile)
			adminToken := writeFile(t, "admin.token", strings.Repeat("t", 32))
			srv := serve(t, ctx, "--database", db,
				"--auth", "callout", "--scopes", "callout",
				"--callout-url", be.url, "--callout-key-file", keyFile,
				"--callout-validate-tables", "todos", "--callout-commands", "addTodo",
				// The reactions come from the rules file, the rest from
				// the backend.
				"--rules", writeFile(t, "rules.yaml", reactionRules), "--callout-reactions", "todos.completed",
				"--admin-api", "--admin-token-file", adminToken,
				// Generous bounds, so a loaded machine never turns an
				// answering backend into an outage: the test is about
				// the backend's decisions, not its speed.
				"--callout-timeout", "30s", "--callout-validate-timeout", "30s")
			checkRules(t, ctx, sch, srv.BaseURL())
			checkCommand(t, ctx, sch, srv.BaseURL())
			checkSignatures(t, ctx, be.url, key)
			checkReactions(t, ctx, sch, srv, be, strings.Repeat("t", 32))
			if t.Failed() {
				t.Logf("backend output:\n%s\nsyncd log tail:\n%s", be.output(), srv.Tail())
			}
		})
	}
}

// checkRules drives the server through SSP2 clients of alice, bob and
// strangers, each rule of rules.mjs in turn.
func checkRules(t *testing.T, ctx context.Context, sch *schema.Schema, baseURL string) {
	newClient := func(id, token string) *client.Client {
		c, err := client.New(client.Options{BaseURL: baseURL, Schema: sch, ClientID: id, BearerToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	syncOK := func(c *client.Client) *client.Result {
		t.Helper()
		res, err := c.Sync(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.ClientID(), err)
		}
		return res
	}

	// authenticate: no token and an unknown user are 401
	// sync.auth_required, a suspended user 403 sync.forbidden, before any
	// protocol work.
	for _, tc := range []struct {
		token, code string
		status      int
	}{
		{"", string(syncerr.AuthRequired), http.StatusUnauthorized},
		{"nobody", string(syncerr.AuthRequired), http.StatusUnauthorized},
		{"mallory", string(syncerr.Forbidden), http.StatusForbidden},
	} {
		c := newClient("stranger", tc.token)
		c.Subscribe("lists", "lists", map[string][]string{"owner_id": {tc.token}})
		_, err := c.Sync(ctx)
		var he *client.HTTPError
		if !errors.As(err, &he) || he.Status != tc.status || he.Code != tc.code {
			t.Fatalf("token %q: %v, want %d %s", tc.token, err, tc.status, tc.code)
		}
	}

	// Each user writes into their own lists.
	phone, bobs := newClient("alice-phone", "alice"), newClient("bob-phone", "bob")
	subscribe(phone, "alice", "alice-groceries", "alice-work")
	subscribe(bobs, "bob", "bob-home")
	queue(t, bobs, list("bob-home", "bob", "Home"), todo("b-1", "bob-home", "fix the sink"))
	queue(t, phone, list("alice-groceries", "alice", "Groceries"), todo("a-1", "alice-groceries", "milk"))
	for _, c := range []*client.Client{bobs, phone} {
		if p := syncOK(c).Pushes; len(p) != 1 || p[0].Status != ssp2.PushApplied {
			t.Fatalf("%s: own write: %s", c.ClientID(), describe(p))
		}
	}

	// resolve-scopes: alice asking for bob's list as well pulls only her
	// own; asking for bob's list alone is revoked; writing into it is
	// forbidden.
	snoop := newClient("alice-snoop", "alice")
	snoop.Subscribe("lists", "lists", map[string][]string{"owner_id": {"alice", "bob"}})
	snoop.Subscribe("todos", "todos", map[string][]string{"list_id": {"alice-groceries", "bob-home"}})
	snoop.Subscribe("bobs-todos", "todos", map[string][]string{"list_id": {"bob-home"}})
	syncOK(snoop)
	if got := snoop.RowIDs("lists"); !slices.Equal(got, []string{"alice-groceries"}) {
		t.Errorf("alice pulled lists %v, want her own", got)
	}
	if got := snoop.RowIDs("todos"); !slices.Equal(got, []string{"a-1"}) {
		t.Errorf("alice pulled todos %v, want her own", got)
	}
	if eff := snoop.Subscription("todos").Effective; !slices.Equal(eff["list_id"], []string{"alice-groceries"}) {
		t.Errorf("effective scopes of alice's todos: %v", eff)
	}
	if s := snoop.Subscription("bobs-todos"); s.Status != ssp2.SubRevoked || s.Reason != string(syncerr.ScopeRevoked) {
		t.Errorf("alice's subscription to bob's list: status %v reason %q, want revoked", s.Status, s.Reason)
	}
	queue(t, phone, todo("a-intruder", "bob-home", "in bob's list"))
	if p := syncOK(phone).Pushes; len(p) != 1 || p[0].Status != ssp2.PushRejected || p[0].Results[0].Code != string(syncerr.Forbidden) {
		t.Fatalf("alice writing into bob's list: %s", describe(p))
	}

	// validate: a title one character too long is rejected with the
	// backend's code, message and details, and nothing of it applies; a
	// title of exactly the limit in multi-byte characters is accepted
	// (characters, not bytes).
	queue(t, phone, todo("a-long", "alice-groceries", strings.Repeat("x", maxTitle+1)))
	res := syncOK(phone)
	if p := res.Pushes; len(p) != 1 || p[0].Status != ssp2.PushRejected || len(p[0].Results) != 1 ||
		p[0].Results[0].Code != "app.title_too_long" || p[0].Results[0].Message != fmt.Sprintf("a todo title has at most %d characters", maxTitle) {
		t.Fatalf("too-long title: %s", describe(p))
	}
	if d := pushDetails(res); d == nil || len(d.Entries) != 1 || d.Entries[0].Details.Reason != "too_long" ||
		!slices.Equal(d.Entries[0].Details.FieldPaths, []string{"title"}) {
		t.Fatalf("too-long title: details %+v", d)
	}
	full := strings.Repeat("é", maxTitle)
	queue(t, phone, todo("a-2", "alice-groceries", full))
	if p := syncOK(phone).Pushes; len(p) != 1 || p[0].Status != ssp2.PushApplied {
		t.Fatalf("title of %d characters: %s", maxTitle, describe(p))
	}

	// An accepted write reaches alice's other device, the rejected one
	// nowhere; bob sees none of alice's.
	laptop := newClient("alice-laptop", "alice")
	subscribe(laptop, "alice", "alice-groceries", "alice-work")
	if _, err := laptop.PullUntilIdle(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if got := laptop.RowIDs("todos"); !slices.Equal(got, []string{"a-1", "a-2"}) {
		t.Fatalf("alice's laptop pulled todos %v, want a-1 and a-2", got)
	}
	if row, _, ok := laptop.Get("todos", "a-2"); !ok || row["title"].Text() != full {
		t.Fatalf("alice's laptop: a-2 is %v", row)
	}
	if _, err := bobs.PullUntilIdle(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if got := bobs.RowIDs("todos"); !slices.Equal(got, []string{"b-1"}) {
		t.Fatalf("bob pulled todos %v, want his own", got)
	}
}

// checkCommand runs the backend's addTodo command (POST /operations): on
// one of the caller's lists its row is committed and pulled; on another
// user's list the backend refuses with operation.forbidden and nothing
// is written.
func checkCommand(t *testing.T, ctx context.Context, sch *schema.Schema, baseURL string) {
	c, err := client.New(client.Options{BaseURL: baseURL, Schema: sch, ClientID: "alice-tablet", BearerToken: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	params := func(listID, todoID, title string) opdomain.Value {
		var fs []opdomain.Field
		for _, kv := range [][2]string{{"listId", listID}, {"todoId", todoID}, {"title", title}} {
			v, err := opdomain.String(kv[1])
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, opdomain.Field{Key: kv[0], Value: v})
		}
		v, err := opdomain.Object(fs...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	res, err := c.Command(ctx, "addTodo", "r-1", params("alice-work", "a-cmd", "From a command"))
	if err != nil || res.Status != opdomain.CommandApplied {
		t.Fatalf("addTodo on alice's list: %+v %v", res, err)
	}
	_, err = c.Command(ctx, "addTodo", "r-2", params("bob-home", "a-bad", "Not mine"))
	var opErr *client.OperationError
	if !errors.As(err, &opErr) || opErr.Code != "operation.forbidden" {
		t.Fatalf("addTodo on bob's list: %v, want operation.forbidden", err)
	}
	subscribe(c, "alice", "alice-work")
	if _, err := c.PullUntilIdle(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if row, _, ok := c.Get("todos", "a-cmd"); !ok || row["title"].Text() != "From a command" {
		t.Fatalf("the command's todo was not pulled: %v", row)
	}
	if _, _, ok := c.Get("todos", "a-bad"); ok {
		t.Fatal("a refused command's todo was written")
	}
}

// checkSignatures posts to the backend directly: a callout signed as
// syncd signs (contract.Sign) is answered, and one unsigned, signed with
// another key, signed long ago or altered after signing is refused.
func checkSignatures(t *testing.T, ctx context.Context, url, key string) {
	body := []byte(`{"method":"POST","path":"/sync","query":"","clientId":"","headers":{"authorization":["Bearer alice"]}}`)
	keys := [][]byte{[]byte(key)}
	now := time.Now()
	for _, tc := range []struct {
		name      string
		signature string
		body      []byte
		want      int
	}{
		{"signed", contract.Sign(keys, now, body), body, http.StatusOK},
		{"signed with the old and the new key", contract.Sign([][]byte{[]byte(strings.Repeat("o", 40)), []byte(key)}, now, body), body, http.StatusOK},
		{"unsigned", "", body, http.StatusBadRequest},
		{"another key", contract.Sign([][]byte{[]byte(strings.Repeat("z", 40))}, now, body), body, http.StatusBadRequest},
		{"ten minutes old", contract.Sign(keys, now.Add(-10*time.Minute), body), body, http.StatusBadRequest},
		{"altered body", contract.Sign(keys, now, body), bytes.Replace(body, []byte("alice"), []byte("bobby"), 1), http.StatusBadRequest},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/"+contract.PathAuthenticate, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(contract.HeaderVersion, fmt.Sprint(contract.Version))
		if tc.signature != "" {
			req.Header.Set(contract.HeaderSignature, tc.signature)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, answer, tc.want)
			continue
		}
		if tc.want == http.StatusOK {
			var id struct{ ActorID, Partition string }
			if err := json.Unmarshal(answer, &id); err != nil || id.ActorID != "alice" {
				t.Errorf("%s: answer %s", tc.name, answer)
			}
		}
	}
}

// reactionRules is the rules file syncd runs beside the backend: only
// examples/rules.yaml's reaction rule, its validators and scopes being
// the backend's.
const reactionRules = `
reactions:
  - name: todo-completed
    table: todos
    on: [update]
    when: row.done && !stored.done
    type: todos.completed
    payload: |
      {"todoId": rowId, "listId": row.list_id, "title": row.title, "completedBy": actor}
`

// delivery is one reaction delivery the backend received (GET
// /test/reactions).
type delivery struct {
	Type           string          `json:"type"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Attempt        int             `json:"attempt"`
	Payload        json.RawMessage `json:"payload"`
	Source         struct {
		ClientID       string `json:"clientId"`
		ClientCommitID string `json:"clientCommitId"`
	} `json:"source"`
	Status int `json:"status"`
}

// checkReactions completes todos of alice's and follows the reaction
// the rule plans: a new todo plans none; completing one is delivered to
// POST BASE/reactions/todos.completed exactly once, with the key
// SPEC §6.9 derives (partition, client, commit, the rule's key) in
// Syncd-Idempotency-Key and the rule's payload, and the reaction is
// completed after one attempt; a delivery the webhook answers 500 is
// retried with the same key and completes on its second attempt.
func checkReactions(t *testing.T, ctx context.Context, sch *schema.Schema, srv *syncdproc.Node, be *backend, adminToken string) {
	c, err := client.New(client.Options{BaseURL: srv.BaseURL(), Schema: sch, ClientID: "alice-watch", BearerToken: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	subscribe(c, "alice", "alice-work")
	push := func(w write) string {
		t.Helper()
		id := queue(t, c, w)
		res, err := c.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p := res.Pushes; len(p) != 1 || p[0].Status != ssp2.PushApplied || p[0].ClientCommitID != id {
			t.Fatalf("%s: %s", id, describe(p))
		}
		return id
	}
	wantKey := func(commitID, rowID string) string {
		b, err := json.Marshal([]string{"demo", "alice-watch", commitID, "todo-completed:todos:" + rowID + ":0"})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	done := func(w write) write { w.cols["done"] = rowcodec.Bool(true); return w }

	// Created, then completed: one reaction, for the completion.
	push(todo("a-r1", "alice-work", "Call the plumber"))
	completed := push(done(todo("a-r1", "alice-work", "Call the plumber")))
	key := wantKey(completed, "a-r1")
	r := waitReaction(t, ctx, srv, adminToken, key, "completed")
	if r.Attempts != 1 {
		t.Fatalf("reaction %s: %d attempts, want 1", key, r.Attempts)
	}
	got := deliveries(t, ctx, be)
	if len(got) != 1 {
		t.Fatalf("the backend received %d deliveries, want 1: %+v", len(got), got)
	}
	d := got[0]
	var payload map[string]string
	if err := json.Unmarshal(d.Payload, &payload); err != nil {
		t.Fatalf("payload %s: %v", d.Payload, err)
	}
	wantPayload := map[string]string{"todoId": "a-r1", "listId": "alice-work", "title": "Call the plumber", "completedBy": "alice"}
	if d.Type != "todos.completed" || d.IdempotencyKey != key || d.Attempt != 1 || d.Status != http.StatusNoContent ||
		d.Source.ClientID != "alice-watch" || d.Source.ClientCommitID != completed || !reflect.DeepEqual(payload, wantPayload) {
		t.Fatalf("delivery %+v (payload %s), want key %s, payload %v", d, d.Payload, key, wantPayload)
	}

	// The webhook fails once (its notifier is down): the attempt is
	// retried with the same key and completes.
	push(todo("a-r2", "alice-work", "Water the plants"))
	post(t, ctx, be.url+"/test/notifier/fail-next?n=1")
	retried := push(done(todo("a-r2", "alice-work", "Water the plants")))
	key = wantKey(retried, "a-r2")
	if r := waitReaction(t, ctx, srv, adminToken, key, "completed"); r.Attempts != 2 {
		t.Fatalf("reaction %s: %d attempts, want 2", key, r.Attempts)
	}
	got = deliveries(t, ctx, be)
	if len(got) != 3 {
		t.Fatalf("the backend received %d deliveries, want 3: %+v", len(got), got)
	}
	for i, want := range []struct{ attempt, status int }{{1, http.StatusInternalServerError}, {2, http.StatusNoContent}} {
		if d := got[1+i]; d.IdempotencyKey != key || d.Attempt != want.attempt || d.Status != want.status || d.Source.ClientCommitID != retried {
			t.Fatalf("delivery %d: %+v, want key %s, attempt %d answered %d", 1+i, d, key, want.attempt, want.status)
		}
	}
}

// adminReaction is an entry of GET /admin/v1/reactions/list.
type adminReaction struct {
	IdempotencyKey string `json:"idempotencyKey"`
	Status         string `json:"status"`
	Attempts       int    `json:"attempts"`
}

// waitReaction polls the admin API until the reaction with key has
// status; the deadline only bounds a hung test.
func waitReaction(t *testing.T, ctx context.Context, srv *syncdproc.Node, token, key, status string) adminReaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last []adminReaction
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.AdminURL()+"/admin/v1/reactions/list?partition=demo&type=todos.completed&limit=500", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		var page struct{ Items []adminReaction }
		getJSON(t, req, &page)
		last = page.Items
		for _, r := range page.Items {
			if r.IdempotencyKey == key && r.Status == status {
				return r
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reaction %s never reached %s; the queue holds %+v", key, status, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deliveries is what the backend received so far.
func deliveries(t *testing.T, ctx context.Context, be *backend) []delivery {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, be.url+"/test/reactions", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []delivery
	getJSON(t, req, &out)
	return out
}

func getJSON(t *testing.T, req *http.Request, out any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: %v: %s", req.Method, req.URL, err, body)
	}
}

func post(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

// subscribe registers a user's lists and the todos of the named lists.
func subscribe(c *client.Client, user string, lists ...string) {
	c.Subscribe("lists", "lists", map[string][]string{"owner_id": {user}})
	c.Subscribe("todos", "todos", map[string][]string{"list_id": lists})
}

type write struct {
	table, id string
	cols      map[string]rowcodec.Value
}

func list(id, owner, title string) write {
	return write{"lists", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner_id": rowcodec.String(owner),
		"title": rowcodec.String(title), "updated_at_ms": rowcodec.Int(1)}}
}

func todo(id, listID, title string) write {
	return write{"todos", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "list_id": rowcodec.String(listID),
		"title": rowcodec.String(title), "done": rowcodec.Bool(false), "position": rowcodec.Int(0), "updated_at_ms": rowcodec.Int(1)}}
}

// queue queues the writes as one commit and returns its id.
func queue(t *testing.T, c *client.Client, ws ...write) string {
	t.Helper()
	ops := make([]ssp2.PushOperation, len(ws))
	for i, w := range ws {
		op, err := c.Upsert(w.table, w.id, w.cols, -1)
		if err != nil {
			t.Fatal(err)
		}
		ops[i] = op
	}
	return c.Queue(ops...)
}

// describe renders push results for a failure message.
func describe(p []*ssp2.PushResult) string {
	parts := make([]string, len(p))
	for i, r := range p {
		parts[i] = fmt.Sprintf("%+v", *r)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// pushDetails is the response's PUSH_RESULT_DETAILS frame, if any.
func pushDetails(res *client.Result) *ssp2.PushResultDetails {
	for _, f := range res.Message.Frames {
		if d, ok := f.(*ssp2.PushResultDetails); ok {
			return d
		}
	}
	return nil
}

// requireNode returns the node executable, or skips loudly without one;
// under CI or SYNCD_REQUIRE_NODE a missing Node fails the test.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		return node
	}
	banner := strings.Repeat("*", 78)
	if set("CI") || set("SYNCD_REQUIRE_NODE") {
		t.Fatalf("\n%s\n*** NO NODE.JS: the Node example backend test needs node on PATH (CI or SYNCD_REQUIRE_NODE is set): %v\n%s", banner, err, banner)
	}
	t.Logf("\n%s\n*** SKIPPING the Node example backend test: node is not on PATH (%v).\n*** Install Node.js, or set SYNCD_REQUIRE_NODE=1 to make this a failure.\n%s", banner, err, banner)
	t.Skip("node is not on PATH")
	return ""
}

// set reports whether an environment variable is set to something other
// than a false value.
func set(name string) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// watchExample reads every file of the example, so go test's result
// cache is invalidated when the backend changes (the child process reads
// them, which the cache does not see).
func watchExample(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := os.ReadFile(filepath.Join(exampleDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFile writes a file of the test's temporary directory and returns
// its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeKey writes a fresh signing key to a key file, shared by the
// backend and syncd.
func writeKey(t *testing.T) (path, key string) {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key = hex.EncodeToString(b)
	path = filepath.Join(t.TempDir(), "callout.key")
	if err := os.WriteFile(path, []byte("# shared by syncd and the backend\n"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// backend is the running Node example.
type backend struct {
	url string
	mu  sync.Mutex
	out bytes.Buffer
}

func (b *backend) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

func (b *backend) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

var listening = regexp.MustCompile(`^backend listening on (http://127\.0\.0\.1:\d+) `)

// startBackend runs server.mjs on a free port of 127.0.0.1 and returns
// once it listens; the process is killed when the test ends.
func startBackend(t *testing.T, ctx context.Context, node, keyFile string) *backend {
	t.Helper()
	cmd := exec.Command(node, "server.mjs", "--listen", "127.0.0.1:0", "--key-file", keyFile, "--test-endpoints")
	cmd.Dir = exampleDir
	b := &backend{}
	cmd.Stderr = b
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	urls := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = fmt.Fprintln(b, sc.Text())
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	select {
	case b.url = <-urls:
		return b
	case <-done:
		t.Fatalf("the backend exited before it listened:\n%s", b.output())
	case <-ctx.Done():
		t.Fatalf("the backend did not listen: %v\n%s", ctx.Err(), b.output())
	}
	return nil
}

// serve starts the built server with args and waits until it is ready;
// it is killed when the test ends.
func serve(t *testing.T, ctx context.Context, args ...string) *syncdproc.Node {
	t.Helper()
	// The startup line, which names the addresses, is logged at info.
	n, err := syncdproc.Start(syncdproc.Options{Binary: binary, Args: append(args, "--log-level", "info")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	if err := n.WaitReady(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return n
}
