package contract

import (
	"context"
	"testing"
	"time"
)

func healthGroups() []group {
	return []group{
		{"Health", []testCase{
			{"PingAnswersUntilClosed", testPing},
		}},
	}
}

// testPing: the readiness probe answers on an open store and fails, with
// a bounded wait, once the store is closed.
func testPing(t *testing.T, h Harness) {
	e := open(t, h)
	if err := e.s.Ping(e.ctx); err != nil {
		t.Fatalf("Ping on an open store: %v", err)
	}
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	// The deadline only bounds a hung engine; nothing asserts how long it took.
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	if err := e.s.Ping(ctx); err == nil {
		t.Fatal("Ping on a closed store succeeded")
	}
}
