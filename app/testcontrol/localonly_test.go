package testcontrol

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// An instance's realtime socket takes its actor from the query string, so
// a web page could open one cross-site or through a rebound DNS name: the
// upgrade is refused (403) unless Host and Origin are loopback; a harness
// (no Origin, or a loopback one) still connects.
func TestRealtimeUpgradeOnlyFromLoopback(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		id := p.create("")
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"*"}})
		url := "ws" + strings.TrimPrefix(p.srv.URL, "http") + "/i/" + id + "/realtime?clientId=c1&actor=alice"
		tests := []struct {
			name, host, origin string
			status             int
		}{
			{"harness without Origin", "", "", http.StatusSwitchingProtocols},
			{"loopback Origin", "", p.srv.URL, http.StatusSwitchingProtocols},
			{"cross-site page", "", "https://attacker.example", http.StatusForbidden},
			{"rebound DNS name", "attacker.example", "http://attacker.example", http.StatusForbidden},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				o := &websocket.DialOptions{Host: tt.host, HTTPHeader: http.Header{}}
				if tt.origin != "" {
					o.HTTPHeader.Set("Origin", tt.origin)
				}
				c, resp, err := websocket.Dial(ctx, url, o)
				if c != nil {
					defer func() { _ = c.CloseNow() }()
				}
				if resp == nil || resp.StatusCode != tt.status {
					t.Fatalf("upgrade: %v %v, want %d", resp, err, tt.status)
				}
			})
		}
	})
}
