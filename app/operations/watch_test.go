package operations_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/domain/commit"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// pipeConn is a RealtimeConn fed by the test: in carries client
// messages, out receives what the server writes, closed the close code.
type pipeConn struct {
	in     chan []byte
	out    chan []byte
	closed chan int
}

func newPipe() *pipeConn {
	return &pipeConn{in: make(chan []byte), out: make(chan []byte, 64), closed: make(chan int, 1)}
}

func (p *pipeConn) Read(ctx context.Context) (ports.RealtimeMessage, error) {
	select {
	case b, ok := <-p.in:
		if !ok {
			return ports.RealtimeMessage{}, errors.New("closed by the client")
		}
		return ports.RealtimeMessage{Binary: true, Data: b}, nil
	case <-ctx.Done():
		return ports.RealtimeMessage{}, ctx.Err()
	}
}

func (p *pipeConn) Write(_ context.Context, m ports.RealtimeMessage) error {
	p.out <- m.Data
	return nil
}

func (p *pipeConn) Ping(context.Context) error { return nil }

func (p *pipeConn) Close(code int, _ string) error {
	select {
	case p.closed <- code:
	default:
	}
	return nil
}

// watchEvent is a decoded server message: a snapshot's row ids and seq,
// or a watch_error's code.
type watchEvent struct {
	kind, watchID string
	ids           []string
	seq           float64
	code          string
}

func (p *pipeConn) next(t *testing.T) watchEvent {
	t.Helper()
	select {
	case b := <-p.out:
		v, err := opdomain.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		e := watchEvent{}
		e.kind, _ = mustGet(t, v, "kind").AsString()
		e.watchID, _ = mustGet(t, v, "watchId").AsString()
		if e.kind == "watch_error" {
			e.code, _ = mustGet(t, v, "code").AsString()
			return e
		}
		e.seq, _ = mustGet(t, v, "maxCommitSeq").AsNumber()
		rows, _ := mustGet(t, v, "rows").Items()
		e.ids = []string{}
		for _, r := range rows {
			id, _ := mustGet(t, r, "id").AsString()
			e.ids = append(e.ids, id)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no message from the server")
		return watchEvent{}
	}
}

func (p *pipeConn) quiet(t *testing.T) {
	t.Helper()
	select {
	case b := <-p.out:
		t.Fatalf("unexpected message %s", b)
	case <-time.After(200 * time.Millisecond):
	}
}

func watchMsg(watchID, clientID, op string, params opdomain.Value) []byte {
	rev, _ := opdomain.SafeNumber(1)
	b, err := object(field("revision", rev), field("kind", sv("watch")), field("watchId", sv(watchID)),
		field("clientId", sv(clientID)), field("operationId", sv(op)), field("params", params)).Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func unwatchMsg(watchID string) []byte {
	rev, _ := opdomain.SafeNumber(1)
	b, _ := object(field("revision", rev), field("kind", sv("unwatch")), field("watchId", sv(watchID))).Encode()
	return b
}

// project writes one projects row (another table than tasks).
func (f *fixture) project(id string) {
	f.t.Helper()
	cols := ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String("alice"), "name": rowcodec.String(id), "locked": rowcodec.Bool(false)}
	payload := ssptest.Full(f.t, f.sc.Table("projects"), cols)
	stored := map[string]string{"owner": "alice"}
	err := f.store.Push(context.Background(), "part", ports.PushOptions{WriterVersion: f.sc.Version}, func(tx ports.PushTx) error {
		if err := tx.UpsertRow(context.Background(), "projects", ports.RowWrite{RowID: id, Version: 1, Scopes: stored, Payload: payload,
			Values: []any{id, "alice", id, false}}); err != nil {
			return err
		}
		var err error
		f.seq, err = tx.AppendCommit(context.Background(), ports.NewCommit{CreatedAtMs: 1, ActorID: "w", ClientID: "w", ClientCommitID: "p-" + id,
			Changes: []commit.Change{{Table: "projects", RowID: id, Op: commit.OpUpsert, RowVersion: 1, Scopes: stored, Row: payload}}})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func TestWatches(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, nil)
	hub, err := f.service([]operations.Query{qByProject}, nil).NewWatchHub(operations.WatchOptions{Log: f.store})
	if err != nil {
		t.Fatal(err)
	}
	c := newPipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Serve(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, c)
	}()
	p1 := object(field("project", sv("p1")))

	// A watch gets its snapshot at once.
	c.in <- watchMsg("w1", "c1", "tasks.byProject", p1)
	if e := c.next(t); e.kind != "snapshot" || e.watchID != "w1" || !reflect.DeepEqual(e.ids, []string{"t1"}) || e.seq != 1 {
		t.Fatalf("first snapshot %+v", e)
	}
	// A commit touching the table reruns it: a full replacement.
	f.task("t2", "p1", "a", false, nil)
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	if e := c.next(t); !reflect.DeepEqual(e.ids, []string{"t2", "t1"}) || e.seq != 2 {
		t.Fatalf("rerun %+v", e)
	}
	// A commit to another table does not; an old notice neither.
	f.project("x")
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: 1})
	c.quiet(t)
	// A resync reruns every watch.
	hub.Resync()
	if e := c.next(t); e.kind != "snapshot" || e.seq != 3 {
		t.Fatalf("after resync %+v", e)
	}

	refusals := []struct {
		name string
		msg  []byte
		want string
	}{
		{"an active watch id", watchMsg("w1", "c1", "tasks.byProject", p1), "operation.invalid_request"},
		{"an unknown query", watchMsg("w2", "c1", "nope", p1), "operation.unknown"},
		{"the reserved command namespace", watchMsg("w3", `["remote-command","alice","c1"]`, "tasks.byProject", p1), "sync.invalid_client_id"},
		{"a project outside the grant", watchMsg("w4", "c1", "tasks.byProject", object(field("project", sv("p3")))), "operation.forbidden"},
	}
	for _, tt := range refusals {
		c.in <- tt.msg
		if e := c.next(t); e.kind != "watch_error" || e.code != tt.want {
			t.Fatalf("%s: %+v, want %s", tt.name, e, tt.want)
		}
	}
	// Refusals before the query (w1 active, w2, w3) register nothing; w4
	// passed them and is authorized on every run, as an HTTP query is, so
	// a commit reruns w1 and refuses w4 again.
	f.task("t3", "p1", "c", false, nil)
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	got := map[string]watchEvent{}
	for range 2 {
		e := c.next(t)
		got[e.watchID] = e
	}
	if len(got["w1"].ids) != 3 || got["w4"].code != "operation.forbidden" {
		t.Fatalf("reruns %+v", got)
	}
	c.quiet(t)

	// Unwatch removes a watch: later commits send nothing.
	c.in <- unwatchMsg("w1")
	c.in <- unwatchMsg("w4")
	// The socket's messages are handled in order, so the answer to a
	// later refusal proves both unwatches were handled before the commit.
	c.in <- watchMsg("w5", "c1", "nope", p1)
	if e := c.next(t); e.watchID != "w5" || e.code != "operation.unknown" {
		t.Fatalf("probe after unwatch %+v", e)
	}
	f.task("t4", "p1", "d", false, nil)
	hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	c.quiet(t)

	// A malformed message closes the socket with 1008.
	c.in <- []byte(`{"t":"null"}`)
	select {
	case code := <-c.closed:
		if code != ports.ClosePolicy {
			t.Fatalf("close code %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("socket not closed")
	}
	<-done
}

// TestWatchDirtyFlag: commits arriving while a watch runs leave one rerun
// pending, not one per commit.
func TestWatchDirtyFlag(t *testing.T) {
	f := newFixture(t)
	f.task("t1", "p1", "b", false, nil)
	hub, err := f.service([]operations.Query{qByProject}, nil).NewWatchHub(operations.WatchOptions{Log: f.store})
	if err != nil {
		t.Fatal(err)
	}
	c := newPipe()
	c.out = make(chan []byte) // unbuffered: a run blocks in its write until the test reads
	go hub.Serve(context.Background(), ports.Identity{ActorID: "alice", Partition: "part"}, c)
	c.in <- watchMsg("w1", "c1", "tasks.byProject", object(field("project", sv("p1"))))
	// The first run is blocked writing its snapshot; three commits arrive.
	time.Sleep(100 * time.Millisecond)
	for _, id := range []string{"t2", "t3", "t4"} {
		f.task(id, "p1", id, false, nil)
		hub.Commit(ports.CommitNotice{Partition: "part", CommitSeq: f.seq})
	}
	time.Sleep(100 * time.Millisecond)
	if e := c.next(t); len(e.ids) != 1 {
		t.Fatalf("first snapshot %+v", e)
	}
	if e := c.next(t); len(e.ids) != 4 || e.seq != 4 {
		t.Fatalf("the one pending rerun %+v", e)
	}
	c.quiet(t)
	close(c.in)
}
