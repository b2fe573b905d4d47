package nats_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	fanout "github.com/syncd-dev/syncd/adapters/fanout/nats"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/natstest"
)

// recorder is a FanoutHandler that counts what it gets.
type recorder struct {
	mu      sync.Mutex
	commits map[string]int64 // partition -> highest seq
	resyncs int
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{commits: map[string]int64{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) note() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) Commit(n ports.CommitNotice) {
	r.mu.Lock()
	r.commits[n.Partition] = max(r.commits[n.Partition], n.CommitSeq)
	r.mu.Unlock()
	r.note()
}
func (r *recorder) Event(ports.FanoutEvent) {}
func (r *recorder) Resync() {
	r.mu.Lock()
	r.resyncs++
	r.mu.Unlock()
	r.note()
}

func (r *recorder) wait(t *testing.T, what string, cond func(r *recorder) bool) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond(r)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func open(t *testing.T, o fanout.Options) *fanout.Fanout {
	t.Helper()
	if o.Log == nil {
		o.Log = zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	}
	f, err := fanout.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = f.Close(ctx)
	})
	return f
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func listen(t *testing.T, f *fanout.Fanout, r *recorder) {
	t.Helper()
	stop, err := f.Listen(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

func TestNewRefusesBadOptions(t *testing.T) {
	log := zap.NewNop()
	cases := []struct {
		name string
		o    fanout.Options
		want string
	}{
		{"no log", fanout.Options{URL: "nats://x"}, "Log"},
		{"no url", fanout.Options{Log: log}, "URL"},
		{"wildcard prefix", fanout.Options{Log: log, URL: "nats://x", SubjectPrefix: "a.*"}, "subject prefix"},
		{"empty token in prefix", fanout.Options{Log: log, URL: "nats://x", SubjectPrefix: "a..b"}, "subject prefix"},
		{"certificate without key", fanout.Options{Log: log, URL: "nats://x", TLSCertFile: "c.pem"}, "key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := fanout.New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error about %s", err, c.want)
			}
		})
	}
}

// TestReconnectBackoff: while no server answers the connection is
// retried, the waits doubling up to MaxBackoff, slept on the injected
// sleep (no wall time passes between attempts).
func TestReconnectBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	waits := make(chan time.Duration, 100)
	f := open(t, fanout.Options{
		URL: "nats://" + addr, MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond,
		Sleep: func(ctx context.Context, d time.Duration) error {
			select {
			case waits <- d:
			default:
			}
			return ctx.Err()
		},
	})
	f.Start()
	for i, w := range []time.Duration{1, 2, 4, 8, 8, 8} {
		select {
		case got := <-waits:
			if got != w*time.Millisecond {
				t.Fatalf("wait %d: %s, want %s", i, got, w*time.Millisecond)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the connection stopped retrying")
		}
	}
	if f.Listening() {
		t.Fatal("listening without a server")
	}
}

// TestDeploymentNamesTheSubjects: the deployment is resolved before the
// first connection (retried while it fails) and hashed into the subjects.
func TestDeploymentNamesTheSubjects(t *testing.T) {
	url := natstest.URL(t)
	var mu sync.Mutex
	calls := 0
	f := open(t, fanout.Options{URL: url, SubjectPrefix: "acme.syncd", MinBackoff: time.Millisecond,
		Deployment: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls < 3 {
				return "", errors.New("database not up yet")
			}
			return "db/schema", nil
		}})
	f.Start()
	until(t, "subscribed", f.Listening)
	if got, want := f.Subject(), "acme.syncd."+fanout.DeploymentToken("db/schema"); got != want {
		t.Fatalf("subject root %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Fatalf("Deployment called %d times, want 3 (two failures, then once)", calls)
	}
}

// TestDroppedMessagesResync: a subscription whose handler falls behind
// its pending limit drops messages, and the next delivery turns that into
// a Resync of every listener (counted as an overflow), never a silent
// loss.
func TestDroppedMessagesResync(t *testing.T) {
	url := natstest.URL(t)
	name := "drops " + rand.Text()
	same := func(context.Context) (string, error) { return name, nil }
	slow := open(t, fanout.Options{URL: url, Deployment: same, PendingMessages: 4})
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fanout.SetOnMessage(slow, func() {
		once.Do(func() {
			close(held)
			<-release
		})
	})
	slow.Start()
	pub := open(t, fanout.Options{URL: url, Deployment: same})
	pub.Start()
	until(t, "both subscribed", func() bool { return slow.Listening() && pub.Listening() })
	r := newRecorder()
	listen(t, slow, r)
	if err := pub.PublishCommit(context.Background(), ports.CommitNotice{Partition: "first", CommitSeq: 1}); err != nil {
		t.Fatal(err)
	}
	<-held // the subscription's handler is stuck on the first message
	const n = 200
	for i := range n {
		if err := pub.PublishCommit(context.Background(), ports.CommitNotice{Partition: fmt.Sprint("p", i), CommitSeq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "the subscription dropping messages", func() bool { return fanout.Dropped(slow) > 0 })
	close(release)
	// What was dropped is read from storage on the resync.
	r.wait(t, "a resync after the drop", func(r *recorder) bool { return r.resyncs >= 1 })
	if f := slow.Overflows(); f < 1 {
		t.Fatalf("Overflows = %d, want the drop counted", f)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := len(r.commits); got > 10 {
		t.Fatalf("%d partitions delivered through a pending limit of 4", got)
	}
}

// TestOutboxWaitsForTheConnection: notices published while the
// connection is down are kept (coalesced per partition) and published
// once it is back; a peer that stayed connected hears the latest seq
// (without a resync of its own).
func TestOutboxWaitsForTheConnection(t *testing.T) {
	url := natstest.URL(t)
	name := "outbox " + rand.Text()
	dep := func(context.Context) (string, error) { return name, nil }
	p := natstest.NewProxy(t, url)
	a := open(t, fanout.Options{URL: p.URL(), Deployment: dep, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	b := open(t, fanout.Options{URL: url, Deployment: dep})
	a.Start()
	b.Start()
	until(t, "both subscribed", func() bool { return a.Listening() && b.Listening() })
	r := newRecorder()
	listen(t, b, r)
	p.Block()
	until(t, "a notices the loss", func() bool { return !a.Listening() })
	for seq := int64(1); seq <= 5; seq++ {
		if err := a.PublishCommit(context.Background(), ports.CommitNotice{Partition: "p", CommitSeq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	p.Unblock()
	r.wait(t, "the kept notice", func(r *recorder) bool { return r.commits["p"] == 5 })
	if a.Reconnects() < 1 {
		t.Fatal("a's reconnect not counted")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resyncs != 0 {
		t.Fatalf("b resynced %d times without losing its connection", r.resyncs)
	}
}

// TestCloseSendsTheOutbox: Close publishes what is still queued before it
// closes the connection, and refuses publishing afterwards.
func TestCloseSendsTheOutbox(t *testing.T) {
	url := natstest.URL(t)
	name := "close " + rand.Text()
	same := func(context.Context) (string, error) { return name, nil }
	a := open(t, fanout.Options{URL: url, Deployment: same})
	b := open(t, fanout.Options{URL: url, Deployment: same})
	a.Start()
	b.Start()
	until(t, "both subscribed", func() bool { return a.Listening() && b.Listening() })
	r := newRecorder()
	listen(t, b, r)
	for i := range 50 {
		if err := a.PublishCommit(context.Background(), ports.CommitNotice{Partition: fmt.Sprint("p", i), CommitSeq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "every notice", func(r *recorder) bool { return len(r.commits) == 50 })
	if err := a.PublishCommit(context.Background(), ports.CommitNotice{Partition: "p", CommitSeq: 2}); !errors.Is(err, ports.ErrFanoutClosed) {
		t.Fatalf("PublishCommit after Close = %v, want ErrFanoutClosed", err)
	}
	if a.Listening() {
		t.Fatal("listening after Close")
	}
}

func TestPartitionBound(t *testing.T) {
	f := open(t, fanout.Options{URL: "nats://127.0.0.1:1"})
	if err := f.PublishCommit(context.Background(), ports.CommitNotice{Partition: strings.Repeat("x", fanout.MaxPartitionBytes+1)}); err == nil {
		t.Fatal("a partition over MaxPartitionBytes was accepted")
	}
	if err := f.PublishCommit(context.Background(), ports.CommitNotice{Partition: strings.Repeat("x", fanout.MaxPartitionBytes)}); err != nil {
		t.Fatalf("a partition of MaxPartitionBytes: %v", err)
	}
}
