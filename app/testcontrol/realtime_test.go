package testcontrol

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/realtime"
)

// TestRestoreResetsConnectedSockets: restoreBackup rotates the log epoch,
// and the instance's connected sockets are told reset-required (SPEC
// §8.3: a server-declared discontinuity) with the restored log's end.
func TestRestoreResetsConnectedSockets(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"*"}})
		p.push(id, "alice", "writer", [2]string{"a", "p1"})
		p.call(id, "captureBackup", nil)
		p.push(id, "alice", "writer", [2]string{"b", "p1"})

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		url := "ws" + strings.TrimPrefix(p.srv.URL, "http") + "/i/" + id + "/realtime?clientId=watcher"
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"X-Actor": {"alice"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.CloseNow() }()
		next := func() realtime.Message {
			t.Helper()
			typ, b, err := c.Read(ctx)
			if err != nil || typ != websocket.MessageText {
				t.Fatalf("read: %v %d %x", err, typ, b)
			}
			m, err := realtime.ParseServerEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		if h, ok := next().(*realtime.Hello); !ok || h.LatestCursor != 2 {
			t.Fatalf("hello %+v", h)
		}
		p.call(id, "restoreBackup", nil)
		if w, ok := next().(*realtime.Wake); !ok || w.Reason != realtime.WakeResetRequired || w.Cursor != 1 {
			t.Fatalf("after restoreBackup: %+v, want reset-required at cursor 1", w)
		}
	})
}
