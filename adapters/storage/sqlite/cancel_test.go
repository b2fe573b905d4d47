package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore/storetest"
)

// A request cancelled at any point of its write transaction must leave
// the single writer connection usable: the next push commits.
func TestCancelledPushesLeaveTheWriterUsable(t *testing.T) {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "sync.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(context.Background(), storetest.Schema(t, storetest.IR), nil); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				d := time.Duration((round*8+g)%40) * 10 * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				_ = push(ctx, s, fmt.Sprintf("c-%d-%d", round, g), nil, nil)
			})
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := push(ctx, s, fmt.Sprintf("after-%d", round), nil, nil)
		cancel()
		if err != nil {
			t.Fatalf("round %d: a push after cancelled pushes failed: %v", round, err)
		}
	}
}
