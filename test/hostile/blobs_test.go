package hostile

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL engine's tables, read after the attack
	_ "modernc.org/sqlite"             // the SQLite engine's tables, likewise

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/test/syncdproc"
)

// Bounds of the stalled-upload attack.
const (
	// stallTimeout is the server's --body-read-timeout in the attack.
	stallTimeout = "2s"
	// stallBudget is the server's --max-inflight-body-bytes: a blob
	// upload to the database store reserves two 1 MiB chunks (its buffer
	// and the driver's copy), so eight fit.
	stallBudget = 16 << 20
	// stallConns is how many uploads the attacker opens, several times
	// what the budget admits.
	stallConns = 48
	// stallSent is what an admitted upload sends before it stalls: past
	// the first 1 MiB chunk, so the store has staged part of a blob
	// that must not survive.
	stallSent = 3 << 19
	// stallDeclared is the length each upload declares: the largest blob.
	stallDeclared = 64 << 20
	// stallGrowth bounds the server's RSS growth: the budget, plus the
	// runtime's own share (goroutines, connection buffers, GC slack).
	// Unbounded, the admitted uploads alone would hold 48 chunks.
	stallGrowth = 40 << 20
)

// stalled is one attacking upload: its connection, and the first answer
// it got (100 Continue when admitted).
type stalled struct {
	c     net.Conn
	br    *bufio.Reader
	first *http.Response
}

// openStalled sends the head of a PUT /blobs/{id} declaring the largest
// blob and asking to continue; admitted (100 Continue), it sends sent
// bytes of the body and stalls. The head waits at most a bound that only
// ends a hung test.
func openStalled(t *testing.T, n *syncdproc.Node, id string, sent int) *stalled {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(n.BaseURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	head := fmt.Sprintf("PUT /blobs/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Syncd-Actor: mallory\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", id, stallDeclared)
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	s := &stalled{c: c, br: bufio.NewReader(c)}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if s.first, err = http.ReadResponse(s.br, nil); err != nil {
		t.Fatalf("no first answer to a stalled upload: %v", err)
	}
	if s.first.StatusCode == http.StatusContinue {
		if _, err := c.Write(bytes.Repeat([]byte{0x5a}, sent)); err != nil {
			t.Fatalf("admitted upload: %v", err)
		}
	}
	return s
}

// final reads the answer after a 100 Continue, and whether the server
// closed the connection after it.
func (s *stalled) final(t *testing.T) (*http.Response, string, bool) {
	t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(time.Minute)) // bounds a hung test only
	resp, err := http.ReadResponse(s.br, nil)
	if err != nil {
		t.Fatalf("a stalled upload was never answered: %v", err)
	}
	code := answerCode(resp)
	_, err = s.br.ReadByte()
	return resp, code, err == io.EOF
}

func answerCode(resp *http.Response) string {
	defer func() { _ = resp.Body.Close() }()
	var e struct{ Code string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &e)
	return e.Code
}

// blobRequest makes one blob request as actor and returns the status and
// the body.
func blobRequest(t *testing.T, method, url, actor string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Syncd-Actor", actor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// stagedRows counts what the database blob store holds of uploads that
// never completed: staging rows and the chunks under any upload that is
// not a published blob.
func stagedRows(t *testing.T, driver, dsn string) (uploads, orphanChunks int) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.QueryRow(`SELECT count(*) FROM sync_blob_uploads`).Scan(&uploads); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM sync_blob_chunks c WHERE NOT EXISTS (
  SELECT 1 FROM sync_blobs b WHERE b.upload_id = c.upload_id)`).Scan(&orphanChunks); err != nil {
		t.Fatal(err)
	}
	return uploads, orphanChunks
}

// TestStalledBlobUploads: a client opens many blob uploads to the
// database store, sends part of each body and stalls. The server admits
// only what the in-flight body budget holds and refuses the rest at once
// with 429 sync.rate_limited; it cuts every admitted one once the body
// read timeout passes without progress (408, connection closed), keeps
// no part of any of them, stays within its memory bound, and takes a
// normal upload afterwards.
func TestStalledBlobUploads(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			db := e.database(t)
			n := serve(t, db, "--body-read-timeout", stallTimeout,
				"--max-decoded-body-bytes", fmt.Sprint(stallBudget), "--max-inflight-body-bytes", fmt.Sprint(stallBudget))
			w := watchRSS(t, n)
			id := contentaddr.Of([]byte("a body that never arrives"))

			var admitted, refused []*stalled
			for range stallConns {
				s := openStalled(t, n, id, stallSent)
				switch s.first.StatusCode {
				case http.StatusContinue:
					admitted = append(admitted, s)
				case http.StatusTooManyRequests:
					if code := answerCode(s.first); code != "sync.rate_limited" || s.first.Header.Get("Retry-After") == "" {
						t.Fatalf("refused upload: code %q, Retry-After %q", code, s.first.Header.Get("Retry-After"))
					}
					refused = append(refused, s)
				default:
					t.Fatalf("stalled upload answered %d %s", s.first.StatusCode, answerCode(s.first))
				}
			}
			t.Logf("%d uploads admitted, %d refused", len(admitted), len(refused))
			if len(admitted) == 0 || len(refused) == 0 {
				t.Fatalf("%d admitted, %d refused: want the budget to admit some and refuse the rest", len(admitted), len(refused))
			}
			for _, s := range admitted {
				resp, code, closed := s.final(t)
				if resp.StatusCode != http.StatusRequestTimeout || code != "sync.invalid_request" || !closed {
					t.Fatalf("stalled upload: %d %q, connection closed %v", resp.StatusCode, code, closed)
				}
			}
			w.requireGrowthBelow(t, stallGrowth)

			// Nothing of the stalled uploads was kept.
			if status, b := blobRequest(t, http.MethodPost, n.BaseURL()+"/blobs/"+id+"/upload-grant", "mallory",
				[]byte(fmt.Sprintf(`{"byteLength":%d}`, stallDeclared))); status != http.StatusOK || strings.TrimSpace(string(b)) != "{}" {
				t.Fatalf("grant for the stalled blob: %d %s, want it absent", status, b)
			}
			driver, dsn := "pgx", db
			if e.name == "sqlite" {
				driver, dsn = "sqlite", "file:"+db+"?mode=ro"
			}
			if uploads, chunks := stagedRows(t, driver, dsn); uploads != 0 || chunks != 0 {
				t.Fatalf("the stalled uploads left %d staging rows and %d chunks", uploads, chunks)
			}

			// A normal upload still succeeds.
			data := []byte("an honest attachment, after the attack")
			ok := contentaddr.Of(data)
			if status, b := blobRequest(t, http.MethodPut, n.BaseURL()+"/blobs/"+ok, "alice", data); status != http.StatusOK {
				t.Fatalf("upload after the attack: %d %s", status, b)
			}
			if status, b := blobRequest(t, http.MethodPost, n.BaseURL()+"/blobs/"+ok+"/upload-grant", "alice",
				[]byte(fmt.Sprintf(`{"byteLength":%d}`, len(data)))); status != http.StatusOK || !strings.Contains(string(b), `"present":true`) {
				t.Fatalf("grant after the upload: %d %s, want present", status, b)
			}
		})
	}
}
