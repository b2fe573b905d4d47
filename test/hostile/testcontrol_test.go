package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/test/syncdproc"
	"github.com/syncd-dev/syncd/test/syncdproc/proctest"
)

// The test-control plane (--test-control-listen) has no authentication:
// its only guard is that it listens on loopback. A web page in the
// operator's browser reaches loopback too, cross-site or through a DNS
// name rebound to 127.0.0.1, and could create instances, grant itself
// scopes and fill memory. The plane refuses every request such a page
// can send, and bounds what any local caller can make it hold: a flood
// of creates stops at --test-control-max-instances, and a flood of blob
// uploads at each instance's part of --test-control-max-bytes.
func TestTestControlRefusesWebPagesAndFloods(t *testing.T) {
	const (
		maxInstances = 8
		maxBytes     = 16 << 20 // 2 MiB an instance: 1 MiB of blobs
		creates      = 40
		blobBytes    = 128 << 10 // a refused body is drained, the connection kept
		blobsEach    = 64        // 8 MiB an instance offered, 1 MiB kept
	)
	for _, e := range sqliteOnly { // the plane never touches --database
		t.Run(e.name, func(t *testing.T) {
			n, base := serveTestControl(t, e.database(t), "--test-control-max-instances", fmt.Sprint(maxInstances),
				"--test-control-max-bytes", fmt.Sprint(maxBytes))
			hc := &http.Client{Timeout: 30 * time.Second}
			schema := `{"version": 1, "tables": [{"name": "notes", "primaryKey": "id",
				"columns": [{"name": "id", "type": "string", "nullable": false}, {"name": "body", "type": "string", "nullable": true}],
				"scopes": [{"pattern": "user:{id}"}]}]}`
			createBody := `{"schema": ` + schema + `, "partition": "p", "nowMs": 1000}`

			// A cross-site page: a form-like text/plain create (a
			// "simple request", sent without a preflight), a rebound
			// Host, a realtime socket opened from its origin.
			webPage := []struct {
				name        string
				host        string
				header      map[string]string
				contentType string
				status      int
			}{
				{"cross-site text/plain create", "", map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, "text/plain", http.StatusForbidden},
				{"create through a rebound DNS name", "attacker.example:80", map[string]string{"Origin": "http://attacker.example"}, "application/json", http.StatusForbidden},
				{"create through a rebound DNS name, no Origin", "attacker.example", nil, "application/json", http.StatusForbidden},
				{"text/plain create without Origin", "", nil, "text/plain", http.StatusUnsupportedMediaType},
			}
			for _, w := range webPage {
				req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/control/instances", strings.NewReader(createBody))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", w.contentType)
				for k, v := range w.header {
					req.Header.Set(k, v)
				}
				if w.host != "" {
					req.Host = w.host
				}
				code, b := send(t, hc, req)
				if code != w.status {
					t.Fatalf("%s: %d %s, want %d", w.name, code, b, w.status)
				}
			}

			w := watchRSS(t, n)
			// The flood: creates past the cap are refused, and none of the
			// web page's requests above took a place.
			var ids []string
			for i := range creates {
				req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/control/instances", strings.NewReader(createBody))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				code, b := send(t, hc, req)
				var r struct{ ID, Code string }
				_ = json.Unmarshal(b, &r)
				switch {
				case code == http.StatusOK && r.ID != "":
					ids = append(ids, r.ID)
				case code == http.StatusTooManyRequests && r.Code == "sync.rate_limited" && i >= maxInstances:
				default:
					t.Fatalf("create %d: %d %s", i, code, b)
				}
			}
			if len(ids) != maxInstances { // the flood goes on, to measure what it holds
				t.Errorf("%d of %d creates succeeded, want %d", len(ids), creates, maxInstances)
			}

			// The realtime socket of a live instance, opened by the page.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			wsBase := "ws" + strings.TrimPrefix(base, "http") + "/i/" + ids[0] + "/realtime?clientId=c1&actor=victim"
			c, resp, err := websocket.Dial(ctx, wsBase, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://attacker.example"}}})
			if c != nil {
				_ = c.CloseNow()
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("cross-site realtime upgrade: %v %v, want 403", resp, err)
			}

			// The blob flood: every instance is offered far more than its
			// cap, in parallel; past the cap each upload is blob.too_large.
			var wg sync.WaitGroup
			kept := make([]int, len(ids))
			errs := make(chan error, len(ids))
			for k, id := range ids {
				wg.Go(func() {
					for j := range blobsEach {
						data := bytes.Repeat([]byte{byte(k)}, blobBytes)
						copy(data, fmt.Sprintf("%d/%d", k, j))
						req, err := http.NewRequestWithContext(t.Context(), "PUT", base+"/i/"+id+"/blobs/"+contentaddr.Of(data), bytes.NewReader(data))
						if err != nil {
							errs <- err
							return
						}
						req.Header.Set("Content-Type", "application/octet-stream")
						req.Header.Set("X-Actor", "flooder")
						code, b, err := do(hc, req)
						switch {
						case err != nil:
							errs <- fmt.Errorf("instance %s upload %d: %w", id, j, err)
							return
						case code == http.StatusOK:
							kept[k]++
						case code == http.StatusRequestEntityTooLarge && strings.Contains(string(b), "blob.too_large"):
						default:
							errs <- fmt.Errorf("instance %s upload %d: %d %s", id, j, code, b)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// Offered: 8 instances × blobsEach × blobBytes = 64 MiB (and 40
			// instances) before the caps; kept: 8 MiB of blobs and 8 small
			// databases.
			w.requireGrowthBelow(t, 96<<20)
			for k, got := range kept {
				if got == 0 || int64(got)*blobBytes > maxBytes/maxInstances/2 {
					t.Fatalf("instance %s kept %d blobs of %d bytes, its cap is %d bytes", ids[k], got, blobBytes, maxBytes/maxInstances/2)
				}
			}
		})
	}
}

// send runs req and returns the status and body.
func send(t *testing.T, hc *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	code, b, err := do(hc, req)
	if err != nil {
		t.Fatal(err)
	}
	return code, b
}

func do(hc *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// serveTestControl starts a server with the test-control plane on an
// ephemeral loopback port and returns it with the plane's base URL, read
// from the plane's "listening" log line.
func serveTestControl(t *testing.T, db string, args ...string) (*syncdproc.Node, string) {
	t.Helper()
	proctest.WatchSources(t)
	addr := &listenLine{server: "test-control", found: make(chan string, 1)}
	all := append([]string{"--database", db, "--auth", "dev", "--log-level", "info", "--test-control-listen", "127.0.0.1:0"}, args...)
	n, err := syncdproc.Start(syncdproc.Options{Binary: syncdBinary, Args: all, Log: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.WaitReady(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-addr.found:
		return n, "http://" + a
	case <-ctx.Done():
		t.Fatalf("no listening line of the test-control plane:\n%s", n.Tail())
		return nil, ""
	}
}

// listenLine receives the server's log lines (one a Write) and reports
// the address of server's "listening" line.
type listenLine struct {
	server string
	found  chan string
	once   sync.Once
}

func (l *listenLine) Write(p []byte) (int, error) {
	var e struct{ Msg, Server, Addr string }
	if json.Unmarshal(bytes.TrimSpace(p), &e) == nil && e.Msg == "listening" && e.Server == l.server && e.Addr != "" {
		l.once.Do(func() { l.found <- e.Addr })
	}
	return len(p), nil
}
