package local_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/fanout/local"
	"github.com/syncd-dev/syncd/ports"
)

// gate is a handler whose first call blocks until release, so a test can
// fill the listener's queue deterministically.
type gate struct {
	mu      sync.Mutex
	first   bool
	held    chan struct{}
	release chan struct{}
	commits []ports.CommitNotice
	events  int
	resyncs int
	changed chan struct{}
}

func newGate() *gate {
	return &gate{first: true, held: make(chan struct{}), release: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (g *gate) enter() {
	g.mu.Lock()
	first := g.first
	g.first = false
	g.mu.Unlock()
	if first {
		close(g.held)
		<-g.release
	}
}

func (g *gate) note() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

func (g *gate) Commit(n ports.CommitNotice) {
	g.enter()
	g.mu.Lock()
	g.commits = append(g.commits, n)
	g.mu.Unlock()
	g.note()
}

func (g *gate) Event(ports.FanoutEvent) {
	g.enter()
	g.mu.Lock()
	g.events++
	g.mu.Unlock()
	g.note()
}

func (g *gate) Resync() {
	g.mu.Lock()
	g.resyncs++
	g.mu.Unlock()
	g.note()
}

func (g *gate) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		ok := cond()
		g.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-g.changed:
		case <-deadline.C:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestOverflow pins the queue rule: a held-up handler never blocks the
// publisher; a full queue first coalesces commit notices per partition to
// the highest seq, and when that frees less than a quarter of it, the
// queue is dropped for one Resync.
func TestOverflow(t *testing.T) {
	const size = 8
	cases := []struct {
		name        string
		publish     func(ctx context.Context, f *local.Fanout)
		wantResyncs int
		wantLast    map[string]int64
	}{
		{
			name: "one partition coalesces to its highest seq",
			publish: func(ctx context.Context, f *local.Fanout) {
				for seq := int64(2); seq <= 100; seq++ {
					_ = f.PublishCommit(ctx, ports.CommitNotice{Partition: "p", CommitSeq: seq})
				}
			},
			wantLast: map[string]int64{"p": 100},
		},
		{
			name: "distinct partitions overflow into Resync",
			publish: func(ctx context.Context, f *local.Fanout) {
				for i := range size + 1 {
					_ = f.PublishCommit(ctx, ports.CommitNotice{Partition: "p" + strconv.Itoa(i), CommitSeq: 1})
				}
			},
			wantResyncs: 1,
		},
		{
			name: "events never coalesce: overflow into Resync",
			publish: func(ctx context.Context, f *local.Fanout) {
				for range size + 1 {
					_ = f.PublishEvent(ctx, ports.FanoutEvent{Topic: "t", Key: "k"})
				}
			},
			wantResyncs: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := local.New(local.Options{QueueSize: size})
			defer func() { _ = f.Close() }()
			g := newGate()
			stop, err := f.Listen(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			ctx := context.Background()
			_ = f.PublishCommit(ctx, ports.CommitNotice{Partition: "first", CommitSeq: 1})
			<-g.held
			c.publish(ctx, f) // returns while the handler is stuck
			close(g.release)
			g.waitFor(t, "the queue to drain", func() bool {
				if g.resyncs < c.wantResyncs {
					return false
				}
				last := map[string]int64{}
				for _, n := range g.commits {
					last[n.Partition] = n.CommitSeq
				}
				for p, seq := range c.wantLast {
					if last[p] != seq {
						return false
					}
				}
				return true
			})
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.resyncs != c.wantResyncs {
				t.Fatalf("Resync %d times, want %d", g.resyncs, c.wantResyncs)
			}
			if got := f.Overflows(); got != int64(c.wantResyncs) {
				t.Fatalf("Overflows %d, want %d", got, c.wantResyncs)
			}
			if c.wantResyncs == 0 && len(g.commits) > size+1 {
				t.Fatalf("%d notices delivered, want them coalesced within the queue", len(g.commits))
			}
		})
	}
}

// TestContextEndsListening: a Listen whose context ends is unregistered.
func TestContextEndsListening(t *testing.T) {
	f := local.New(local.Options{})
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	g := newGate()
	close(g.release)
	stop, err := f.Listen(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if n := f.Listeners(); n != 1 {
		t.Fatalf("Listeners %d, want 1", n)
	}
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for f.Listeners() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("listener still registered after its context ended")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := f.Listen(ctx, g); !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen on an ended context = %v, want context.Canceled", err)
	}
}

// TestClosed: a closed fanout refuses publishing and listening.
func TestClosed(t *testing.T) {
	f := local.New(local.Options{})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.PublishCommit(ctx, ports.CommitNotice{Partition: "p", CommitSeq: 1}); !errors.Is(err, ports.ErrFanoutClosed) {
		t.Fatalf("PublishCommit after Close = %v", err)
	}
	if _, err := f.Listen(ctx, newGate()); !errors.Is(err, ports.ErrFanoutClosed) {
		t.Fatalf("Listen after Close = %v", err)
	}
}
