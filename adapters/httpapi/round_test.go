package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// TestSyncFailureLogLevels: a request its client abandoned (canceled, or
// the connection broke) is not logged as a server error; any other
// unexpected failure is.
func TestSyncFailureLogLevels(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	h := &syncServer{log: zap.New(core)}
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

// fakeSync answers every request with its response or its error.
type fakeSync struct {
	body     string
	err      error
	released bool
}

func (f *fakeSync) Sync(context.Context, ports.Identity, []byte) (ports.SyncResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f, nil
}

func (f *fakeSync) Encode(w io.Writer) error {
	_, err := io.WriteString(w, f.body)
	return err
}

func (f *fakeSync) Release() { f.released = true }

// TestSyncServe: the use case's response goes out whole with the sync
// content type and is released; a request-level failure is §10.1 JSON with
// its catalog status and no response is asked for.
func TestSyncServe(t *testing.T) {
	tr, err := NewTransport(TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		svc        *fakeSync
		wantStatus int
		wantType   string
		wantBody   string
	}{
		{"response", &fakeSync{body: "frames"}, http.StatusOK, ContentTypeSync, "frames"},
		{"refused", &fakeSync{err: syncerr.New(syncerr.Forbidden)}, http.StatusForbidden, ContentTypeJSON, `"code":"sync.forbidden"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/sync", nil)
			tr.SyncServe(tt.svc, nil)(w, r, ports.Identity{Partition: "p1"}, nil)
			if w.Code != tt.wantStatus || !strings.HasPrefix(w.Header().Get("Content-Type"), tt.wantType) ||
				!strings.Contains(w.Body.String(), tt.wantBody) {
				t.Fatalf("answer %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
			}
			if tt.svc.released != (tt.svc.err == nil) {
				t.Errorf("released %v", tt.svc.released)
			}
		})
	}
}
