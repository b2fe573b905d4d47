package contract

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/ports"
)

// bindingCases are the client-id binding cases (SPEC §1.5): BindClient,
// ClientBinding, PushTx.BindClient, and the owner of push results.
func bindingCases() []testCase {
	return []testCase{
		{"FirstActorWins", testBindFirstActorWins},
		{"RacingActorsOneWins", testBindRace},
		{"PushTxBindsWithTheTransaction", testBindInPush},
		{"BindWaitsForAnOpenPush", testBindAgainstOpenPush},
		{"SurvivesRotationIsNoCursor", testBindingSurvivesRotation},
		{"PushResultOwner", testPushResultOwner},
	}
}

// binding reads the binding through a second storage over the same
// database too, so a per-process cache cannot stand in for the stored row.
func (e *env) binding(partition, clientID string) (string, bool) {
	e.t.Helper()
	a, ok, err := e.s.ClientBinding(e.ctx, partition, clientID)
	must(e.t, err)
	other := e.h.Reopen(e.t, e.s)
	must(e.t, other.EnsureSchema(e.ctx, e.sc, nil))
	b, ok2, err := other.ClientBinding(e.ctx, partition, clientID)
	must(e.t, err)
	if a != b || ok != ok2 {
		e.t.Fatalf("binding of %s/%s: %q %v here, %q %v in another storage", partition, clientID, a, ok, b, ok2)
	}
	return a, ok
}

func (e *env) bind(partition, clientID, actorID string) string {
	e.t.Helper()
	a, err := e.s.BindClient(e.ctx, partition, clientID, actorID)
	must(e.t, err)
	return a
}

func testBindFirstActorWins(t *testing.T, h Harness) {
	e := open(t, h)
	if a, ok := e.binding("p1", "c1"); ok {
		t.Fatalf("fresh id bound to %q", a)
	}
	if got := e.bind("p1", "c1", "u1"); got != "u1" {
		t.Fatalf("first bind = %q", got)
	}
	if got := e.bind("p1", "c1", "u2"); got != "u1" {
		t.Fatalf("second actor's bind = %q, want the first actor", got)
	}
	if got := e.bind("p1", "c1", "u1"); got != "u1" {
		t.Fatalf("owner's repeated bind = %q", got)
	}
	if a, ok := e.binding("p1", "c1"); !ok || a != "u1" {
		t.Fatalf("binding = %q, %v", a, ok)
	}
	// Each partition is its own namespace.
	if a, ok := e.binding("p2", "c1"); ok {
		t.Fatalf("binding leaked across partitions: %q", a)
	}
	if got := e.bind("p2", "c1", "u2"); got != "u2" {
		t.Fatalf("bind in another partition = %q", got)
	}
	// A pushing transaction of another actor sees the binding.
	must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: "u2"}, func(tx ports.PushTx) error {
		a, err := tx.BindClient(e.ctx, "c1")
		if err != nil || a != "u1" {
			return fmt.Errorf("tx bind of a bound id = %q, %v", a, err)
		}
		return nil
	}))
}

func testBindRace(t *testing.T, h Harness) {
	e := open(t, h)
	const n = 8
	for round := range 3 {
		client := fmt.Sprint("fresh-", round)
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				actor := fmt.Sprint("u", i)
				if i%2 == 0 {
					got[i], errs[i] = e.s.BindClient(e.ctx, "p1", client, actor)
					return
				}
				errs[i] = e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: actor}, func(tx ports.PushTx) error {
					var err error
					got[i], err = tx.BindClient(e.ctx, client)
					return err
				})
			}()
		}
		wg.Wait()
		must(t, errors.Join(errs...))
		for i := range got {
			if got[i] != got[0] {
				t.Fatalf("round %d: racing binds answered %v", round, got)
			}
		}
		if a, ok := e.binding("p1", client); !ok || a != got[0] {
			t.Fatalf("round %d: stored binding %q, %v; binds answered %q", round, a, ok, got[0])
		}
	}
}

func testBindInPush(t *testing.T, h Harness) {
	e := open(t, h)
	errAbort := errors.New("abort")
	// A rolled-back transaction binds nothing.
	err := e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: "u1"}, func(tx ports.PushTx) error {
		if a, err := tx.BindClient(e.ctx, "c1"); err != nil || a != "u1" {
			return fmt.Errorf("bind = %q, %v", a, err)
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("push = %v", err)
	}
	if a, ok := e.binding("p1", "c1"); ok {
		t.Fatalf("rolled-back bind left %q", a)
	}
	// The transaction sees its own binding, and a rejection (DiscardWrites)
	// keeps it, bound before or after the first write.
	for _, c := range []struct {
		client      string
		afterWrites bool
	}{{"before", false}, {"after", true}} {
		must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: "u1"}, func(tx ports.PushTx) error {
			if !c.afterWrites {
				if _, err := tx.BindClient(e.ctx, c.client); err != nil {
					return err
				}
			}
			if err := tx.UpsertRow(e.ctx, "tasks", task{id: "r-" + c.client, project: "p1", owner: "o"}.write(0)); err != nil {
				return err
			}
			if c.afterWrites {
				if _, err := tx.BindClient(e.ctx, c.client); err != nil {
					return err
				}
			}
			if a, err := tx.BindClient(e.ctx, c.client); err != nil || a != "u1" {
				return fmt.Errorf("own binding = %q, %v", a, err)
			}
			if err := tx.DiscardWrites(e.ctx); err != nil {
				return err
			}
			_, err := tx.PutPushResult(e.ctx, c.client, "cc", []byte(`{"status":"rejected"}`))
			return err
		}))
		if a, ok := e.binding("p1", c.client); !ok || a != "u1" {
			t.Fatalf("%s: binding after a rejection = %q, %v", c.client, a, ok)
		}
		if r, _ := e.s.GetRow(e.ctx, "p1", "tasks", "r-"+c.client); r != nil {
			t.Fatalf("%s: a discarded row persisted", c.client)
		}
	}
	if got := e.bind("p1", "after", "u2"); got != "u1" {
		t.Fatalf("bind after a committed tx bind = %q", got)
	}
}

// A bind outside any push, while a push that bound the same fresh id is
// still open, answers that push's actor once it commits.
func testBindAgainstOpenPush(t *testing.T, h Harness) {
	e := open(t, h)
	holding, release := make(chan struct{}), make(chan struct{})
	pushed := make(chan error, 1)
	go func() {
		pushed <- e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: "pusher"}, func(tx ports.PushTx) error {
			a, err := tx.BindClient(e.ctx, "c1")
			if err != nil || a != "pusher" {
				return fmt.Errorf("tx bind = %q, %v", a, err)
			}
			close(holding)
			<-release
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-pushed:
		t.Fatalf("push ended early: %v", err)
	}
	bound := make(chan string, 1)
	failed := make(chan error, 1)
	go func() {
		a, err := e.s.BindClient(e.ctx, "p1", "c1", "puller")
		if err != nil {
			failed <- err
			return
		}
		bound <- a
	}()
	close(release)
	must(t, <-pushed)
	select {
	case a := <-bound:
		if a != "pusher" {
			t.Fatalf("bind beside an open push = %q, want the pusher", a)
		}
	case err := <-failed:
		t.Fatal(err)
	}
	if a, ok := e.binding("p1", "c1"); !ok || a != "pusher" {
		t.Fatalf("binding = %q, %v", a, ok)
	}
}

func testBindingSurvivesRotation(t *testing.T, h Harness) {
	e := open(t, h)
	_, err := e.s.TouchPartition(e.ctx, "p1", 10)
	must(t, err)
	e.bind("p1", "pusher", "u1")
	e.bind("p1", "puller", "u2")
	must(t, e.s.PutClient(e.ctx, ports.ClientRecord{Partition: "p1", ClientID: "puller", ActorID: "u2", WireVersion: 3, Cursor: 4, Subscriptions: []byte(`[]`), UpdatedAtMs: 10}))
	// A push-only client has a binding but no record and no cursor: it
	// never holds back the retention floor.
	if c, err := e.s.GetClient(e.ctx, "p1", "pusher"); err != nil || c != nil {
		t.Fatalf("a binding reads as a client record: %+v, %v", c, err)
	}
	if floor, ok, err := e.s.ActiveClientCursorFloor(e.ctx, "p1", 0); err != nil || !ok || floor != 4 {
		t.Fatalf("floor = %d, %v, %v; want the pulled client's 4", floor, ok, err)
	}
	_, err = e.s.RotateLogEpoch(e.ctx, "p1")
	must(t, err)
	if c, _ := e.s.GetClient(e.ctx, "p1", "puller"); c != nil {
		t.Fatal("client record survived rotation")
	}
	if _, ok, err := e.s.ActiveClientCursorFloor(e.ctx, "p1", 0); err != nil || ok {
		t.Fatalf("floor after rotation: %v, %v", ok, err)
	}
	// Bindings outlive the epoch, like the push results they guard.
	for client, actor := range map[string]string{"pusher": "u1", "puller": "u2"} {
		if a, ok := e.binding("p1", client); !ok || a != actor {
			t.Fatalf("binding of %s after rotation = %q, %v", client, a, ok)
		}
	}
}

func testPushResultOwner(t *testing.T, h Harness) {
	e := open(t, h)
	for _, actor := range []string{"u1", ""} {
		client := "c-" + actor
		must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: actor}, func(tx ports.PushTx) error {
			_, err := tx.PutPushResult(e.ctx, client, "cc", []byte(`{"status":"applied"}`))
			return err
		}))
		r, ok, err := e.s.GetPushResult(e.ctx, "p1", client, "cc")
		must(t, err)
		if !ok || r.ActorID != actor || !jsonEqual(r.Result, `{"status":"applied"}`) {
			t.Fatalf("record of %q = %+v, %v", actor, r, ok)
		}
		// The locked re-check reads the owner too; a second writer of
		// another actor finds the first record and its owner unchanged.
		must(t, e.s.Push(e.ctx, "p1", ports.PushOptions{WriterVersion: v1, ActorID: "u9"}, func(tx ports.PushTx) error {
			r, ok, err := tx.GetPushResult(e.ctx, client, "cc")
			if err != nil || !ok || r.ActorID != actor {
				return fmt.Errorf("locked re-check = %+v, %v, %v", r, ok, err)
			}
			_, err = tx.PutPushResult(e.ctx, client, "cc", []byte(`{"status":"rejected"}`))
			return err
		}))
		if r, _, _ := e.s.GetPushResult(e.ctx, "p1", client, "cc"); r.ActorID != actor {
			t.Fatalf("owner after a second writer = %q, want %q", r.ActorID, actor)
		}
	}
}
