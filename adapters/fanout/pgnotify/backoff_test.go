package pgnotify_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/fanout/pgnotify"
)

// TestReconnectBackoff: while the database is unreachable the listener
// retries, its waits doubling up to MaxBackoff, slept on the injected
// sleep (no wall time passes in this test).
func TestReconnectBackoff(t *testing.T) {
	// A port nothing listens on: connecting fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	waits := make(chan time.Duration, 100)
	f, err := pgnotify.New(pgnotify.Options{
		DSN: "postgres://nobody@" + addr + "/none?sslmode=disable&connect_timeout=5",
		Log: zap.NewNop(), MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond,
		Sleep: func(ctx context.Context, d time.Duration) error {
			select {
			case waits <- d:
			default:
			}
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i, w := range want {
		select {
		case got := <-waits:
			if got != w*time.Millisecond {
				t.Fatalf("wait %d: %s, want %s", i, got, w*time.Millisecond)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the listener stopped retrying")
		}
	}
	if f.Listening() {
		t.Fatal("listening without a database")
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
