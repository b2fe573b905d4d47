package syncsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/ports"
)

// TestSyncFailureLogLevels: a request its client abandoned (canceled, or
// the connection broke) is not logged as a server error; any other
// unexpected failure is.
func TestSyncFailureLogLevels(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	h := &HTTPHandler{Log: zap.New(core)}
	id := ports.Identity{Partition: "p1"}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	h.logFailure(gone, fmt.Errorf("read serve gate: %w", context.Canceled), id)
	h.logFailure(gone, errors.New("disk on fire"), id)
	h.logFailure(context.Background(), fmt.Errorf("touch partition: %w", context.Canceled), id)
	h.logFailure(context.Background(), &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, id)
	want := []zapcore.Level{zap.DebugLevel, zap.ErrorLevel, zap.ErrorLevel, zap.DebugLevel}
	got := logs.All()
	if len(got) != len(want) {
		t.Fatalf("%d entries", len(got))
	}
	for i, e := range got {
		if e.Level != want[i] {
			t.Errorf("entry %d (%s): level %s, want %s", i, e.Message, e.Level, want[i])
		}
	}
}
