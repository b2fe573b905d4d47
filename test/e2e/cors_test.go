package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// A browser app on https://app.example.com syncs with the server as
// syncd serve assembles it: the preflight is answered before
// authentication, the round carries the CORS headers and a request id,
// and the socket upgrade admits the app's origin and no other.
func TestBrowserAppAcrossOrigins(t *testing.T) {
	s := start(t, engines()[0], serverOpts{config: func(c *config.Config) {
		c.HTTP.CORSOrigins = "https://app.example.com"
	}})
	const origin = "https://app.example.com"
	base := strings.TrimSuffix(s.url, "/sync")
	pre, err := http.NewRequest(http.MethodOptions, base+"/sync", nil)
	if err != nil {
		t.Fatal(err)
	}
	pre.Header.Set("Origin", origin)
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "content-type,x-syncd-actor,x-syncd-partition")
	resp, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-syncd-actor") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}

	req, err := http.NewRequest(http.MethodPost, base+"/sync", strings.NewReader(string(ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, NoEpoch: true, Pull: true}.Encode(t))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Content-Type", httpapi.ContentTypeSync)
	req.Header.Set("X-Syncd-Actor", "alice")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get(httpapi.RequestIDHeader) == "" {
		t.Fatalf("round: %d %v", resp.StatusCode, resp.Header)
	}
	// The access log names the round by its request id.
	id := resp.Header.Get(httpapi.RequestIDHeader)
	found := false
	for _, e := range s.logs.FilterMessage("request").All() {
		if f := e.ContextMap(); f["request_id"] == id && f["actor"] == "alice" && f["status"] == int64(200) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no access log line for request %s", id)
	}

	for _, tt := range []struct {
		origin string
		ok     bool
	}{{origin, true}, {"https://evil.example.com", false}} {
		h := http.Header{}
		h.Set("Origin", tt.origin)
		h.Set("X-Syncd-Actor", "alice")
		c, r, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/realtime?clientId=c1", &websocket.DialOptions{HTTPHeader: h})
		if r != nil && r.Body != nil {
			_ = r.Body.Close()
		}
		if (err == nil) != tt.ok {
			t.Fatalf("upgrade from %s: %v", tt.origin, err)
		}
		if c != nil {
			_ = c.CloseNow()
		}
	}
}
