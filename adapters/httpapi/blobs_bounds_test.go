package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// TestPaceDeadline: a blob transfer must progress within the timeout on
// every read or write, and keep up with the rate after the timeout's
// grace, counted from its first byte.
func TestPaceDeadline(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	p := &pace{now: func() time.Time { return now }, timeout: 10 * time.Second, rate: 1000}
	steps := []struct {
		name  string
		at    time.Duration // clock, from t0
		moved int64         // bytes moved before the step
		n     int64         // bytes the step moves (writes)
		want  time.Duration // deadline, from t0
	}{
		{"the first read: the grace", 0, 0, 0, 10 * time.Second},
		{"ahead of the rate: a stall may last the timeout", time.Second, 5000, 0, 11 * time.Second},
		{"behind the rate: the rate binds", 20 * time.Second, 12_000, 0, 22 * time.Second},
		{"fallen behind: the deadline has passed", 30 * time.Second, 12_000, 0, 22 * time.Second},
		{"a write counts the bytes it moves", 20 * time.Second, 12_000, 500, 22*time.Second + 500*time.Millisecond},
		{"a fraction of a second of allowance", 20 * time.Second, 12_001, 0, 22*time.Second + time.Millisecond},
	}
	for _, s := range steps {
		now, p.moved = t0.Add(s.at), s.moved
		if got := p.deadline(s.n); !got.Equal(t0.Add(s.want)) {
			t.Fatalf("%s: deadline at %v, want %v", s.name, got.Sub(t0), s.want)
		}
	}
	// A huge count at the slowest rate neither overflows nor wraps.
	slow := &pace{now: func() time.Time { return t0 }, timeout: time.Second, rate: 1, start: t0, moved: 1 << 40}
	if got := slow.deadline(1 << 40); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("huge count: deadline %v", got.Sub(t0))
	}
}

// budgetServer serves f's blob routes with an in-flight body budget.
func budgetServer(t *testing.T, f ports.BlobService, budget int64, opts TransportOptions) (*Limiter, string) {
	t.Helper()
	lim, err := NewLimiter(LimiterOptions{MaxBodyBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	opts.Limiter = lim
	return lim, blobServerWith(t, f, opts, nil).URL
}

// TestBlobTransfersReserveTheBodyBudget: every blob upload and download
// holds its buffers (the store's, the decoder's, the copy's) on the
// in-flight body budget while it runs; one that does not fit is refused
// sync.rate_limited with Retry-After before the store is asked for
// anything, and the reservation is returned when the request ends.
func TestBlobTransfersReserveTheBodyBudget(t *testing.T) {
	data := []byte("blob bytes to move")
	id := contentaddr.Of(data)
	const upBuf, downBuf = 3000, 2000
	gzipped := func() []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(data)
		_ = zw.Close()
		return b.Bytes()
	}()
	zenc, _ := zstd.NewWriter(nil)
	zstded := zenc.EncodeAll(data, nil)
	_ = zenc.Close()
	auth := map[string]string{"Authorization": "x"}
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		header map[string]string
		need   int64
	}{
		{"upload", http.MethodPut, "/api/blobs/" + id, data, auth, upBuf},
		{"gzip upload", http.MethodPut, "/api/blobs/" + id, gzipped, map[string]string{"Authorization": "x", "Content-Encoding": "gzip"}, upBuf + gzipDecoderBytes},
		{"zstd upload", http.MethodPut, "/api/blobs/" + id, zstded, map[string]string{"Authorization": "x", "Content-Encoding": "zstd"}, upBuf + zstdDecoderBytes},
		{"presigned upload", http.MethodPut, "/api/blob-objects/" + id + "?op=put", data, nil, upBuf},
		{"download", http.MethodGet, "/api/blobs/" + id, nil, auth, downBuf + blobCopyBytes},
		{"presigned download", http.MethodGet, "/api/blob-objects/" + id + "?op=get", nil, nil, downBuf + blobCopyBytes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send := func(url string) (*http.Response, []byte) {
				var body io.Reader
				if tc.body != nil {
					body = bytes.NewReader(tc.body)
				}
				return do(t, tc.method, url+tc.path, body, tc.header)
			}

			t.Run("a transfer past the budget is refused before it starts", func(t *testing.T) {
				f := &fakeBlobs{data: data, upBuf: upBuf, downBuf: downBuf}
				f.hold = func() { t.Error("the store was asked to move bytes past the budget") }
				lim, url := budgetServer(t, f, tc.need-1, TransportOptions{})
				resp, b := send(url)
				if resp.StatusCode != http.StatusTooManyRequests || bodyCode(t, b) != string(syncerr.RateLimited) || resp.Header.Get("Retry-After") != RetryAfterSeconds {
					t.Fatalf("%d %s %v", resp.StatusCode, b, resp.Header)
				}
				if _, n := lim.InUse(); n != 0 {
					t.Fatalf("%d bytes still reserved", n)
				}
			})

			t.Run("a transfer holds its buffers while it runs", func(t *testing.T) {
				f := &fakeBlobs{data: data, upBuf: upBuf, downBuf: downBuf}
				var during int64 = -1
				var lim *Limiter
				f.hold = func() { _, during = lim.InUse() }
				lim, url := budgetServer(t, f, tc.need, TransportOptions{})
				resp, b := send(url)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				if during != tc.need {
					t.Fatalf("reserved %d bytes during the transfer, want %d", during, tc.need)
				}
				// The handler may still be returning as the answer lands.
				waitReserved(t, lim, 0)
			})
		})
	}
}

// recordingConn records the deadlines set on a connection.
type recordingConn struct {
	net.Conn
	mu          sync.Mutex
	reads, writ []time.Time
}

func (c *recordingConn) SetReadDeadline(d time.Time) error {
	c.mu.Lock()
	c.reads = append(c.reads, d)
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(d)
}

func (c *recordingConn) SetWriteDeadline(d time.Time) error {
	c.mu.Lock()
	c.writ = append(c.writ, d)
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(d)
}

type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*recordingConn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recordingConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, rc)
	l.mu.Unlock()
	return rc, nil
}

// last returns the last read and write deadlines of the first connection.
func (l *recordingListener) last(t *testing.T) (read, write time.Time, writes int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) == 0 {
		t.Fatal("no connection")
	}
	c := l.conns[0]
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reads) > 0 {
		read = c.reads[len(c.reads)-1]
	}
	if len(c.writ) > 0 {
		write = c.writ[len(c.writ)-1]
	}
	return read, write, len(c.writ)
}

// rawBlobPut writes the head of a PUT of path declaring length, then
// prefix, and returns the connection.
func rawBlobPut(t *testing.T, base, path string, length int, prefix []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	head := fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: x\r\nContent-Length: %d\r\n\r\n", path, length)
	if _, err := c.Write(append([]byte(head), prefix...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the response on c; the read deadline only bounds a hung
// test, nothing asserts how long the answer took.
func answer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var e struct{ Code string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &e)
	return resp, e.Code
}

// TestBlobUploadPace: an upload whose body stalls, or trickles slower
// than the rate once the grace is spent, is cut off with a 408 and the
// connection closed, its reservation returned; one that keeps up
// completes, and its read deadline is lifted once the body is in.
func TestBlobUploadPace(t *testing.T) {
	data := bytes.Repeat([]byte("steady bytes "), 160) // 2080 bytes
	id := contentaddr.Of(data)
	for _, path := range []string{"/api/blobs/" + id, "/api/blob-objects/" + id + "?op=put"} {
		t.Run(path, func(t *testing.T) {
			t.Run("a stalled body is cut", func(t *testing.T) {
				f := &fakeBlobs{upBuf: 1000}
				lim, url := budgetServer(t, f, 1<<20, TransportOptions{BodyReadTimeout: 200 * time.Millisecond})
				c := rawBlobPut(t, url, path, 1000, []byte("ten bytes."))
				resp, code := answer(t, c)
				if resp.StatusCode != http.StatusRequestTimeout || code != string(syncerr.InvalidRequest) || !resp.Close {
					t.Fatalf("stalled upload: %d %s close %v", resp.StatusCode, code, resp.Close)
				}
				waitReserved(t, lim, 0)
			})
			t.Run("a trickle behind the rate is cut", func(t *testing.T) {
				f := &fakeBlobs{upBuf: 1000}
				_, url := budgetServer(t, f, 1<<20, TransportOptions{BodyReadTimeout: 300 * time.Millisecond, BlobMinRate: 100})
				c := rawBlobPut(t, url, path, 1000, nil)
				// One byte every 50 ms: never idle for the timeout, but
				// 20 bytes a second against the 100 required. The
				// trickle stops by itself well before its 1000 bytes.
				stop := make(chan struct{})
				go func() {
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for range 400 {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
					}
				}()
				resp, code := answer(t, c)
				close(stop)
				if resp.StatusCode != http.StatusRequestTimeout || code != string(syncerr.InvalidRequest) {
					t.Fatalf("trickled upload: %d %s", resp.StatusCode, code)
				}
			})
			t.Run("a body that keeps up completes", func(t *testing.T) {
				f := &fakeBlobs{upBuf: 1000}
				rl := &recordingListener{}
				lim, err := NewLimiter(LimiterOptions{})
				if err != nil {
					t.Fatal(err)
				}
				url := blobServerWith(t, f, TransportOptions{BodyReadTimeout: 2 * time.Second, BlobMinRate: 100, Limiter: lim},
					func(l net.Listener) net.Listener { rl.Listener = l; return rl }).URL
				c := rawBlobPut(t, url, path, len(data), nil)
				// About 2000 bytes a second, twenty times the rate.
				for off := 0; off < len(data); off += 104 {
					time.Sleep(50 * time.Millisecond)
					if _, err := c.Write(data[off:min(off+104, len(data))]); err != nil {
						t.Fatal(err)
					}
				}
				resp, code := answer(t, c)
				if resp.StatusCode != http.StatusOK || !bytes.Equal(f.received, data) {
					t.Fatalf("steady upload: %d %s, %d bytes received", resp.StatusCode, code, len(f.received))
				}
				// net/http itself may be mid-way through aborting its
				// background read, a deadline long past (1970) it clears
				// next; only a deadline of the upload's own would be ahead.
				if read, _, _ := rl.last(t); read.After(time.Unix(2, 0)) {
					t.Fatalf("read deadline %v left after the body", read)
				}
			})
		})
	}
}

// bigBlobs serves one large blob of zeros and reports when its reader is
// closed (the download ended, cut or not).
type bigBlobs struct {
	*fakeBlobs
	size   int64
	closed chan struct{}
}

func (b *bigBlobs) big() ports.BlobInfo {
	return ports.BlobInfo{Partition: "p", BlobID: contentaddr.Of([]byte("big")), ByteLength: b.size}
}

func (b *bigBlobs) Download(context.Context, ports.Identity, string) (ports.BlobDownload, error) {
	return ports.BlobDownload{Info: b.big()}, nil
}

func (b *bigBlobs) GetSigned(context.Context, string, url.Values) (ports.BlobInfo, error) {
	return b.big(), nil
}

func (b *bigBlobs) Open(_ context.Context, _ ports.BlobInfo, offset, length int64) (io.ReadCloser, error) {
	return &closeSignal{Reader: io.LimitReader(zeros{}, length), closed: b.closed}, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type closeSignal struct {
	io.Reader
	closed chan struct{}
}

func (c *closeSignal) Close() error { close(c.closed); return nil }

// TestBlobDownloadPace: a download to a reader that stops reading is cut
// off by the write deadline (its reservation returned); a download read
// to the end leaves no write deadline on the connection for its next
// request.
func TestBlobDownloadPace(t *testing.T) {
	t.Run("a reader that stops reading is cut off", func(t *testing.T) {
		// Far more than loopback's socket buffers hold.
		b := &bigBlobs{fakeBlobs: &fakeBlobs{downBuf: 1000}, size: 256 << 20, closed: make(chan struct{})}
		lim, url := budgetServer(t, b, 1<<20, TransportOptions{BodyReadTimeout: 200 * time.Millisecond})
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if _, err := io.WriteString(c, "GET /api/blobs/"+b.big().BlobID+" HTTP/1.1\r\nHost: x\r\nAuthorization: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// Read the head only, then nothing more.
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("head: %v %v", resp, err)
		}
		select {
		case <-b.closed:
		case <-time.After(20 * time.Second): // bounds a hung test only
			t.Fatal("the download to a stalled reader was never cut off")
		}
		waitReserved(t, lim, 0)
	})
	t.Run("a download read to the end clears its write deadline", func(t *testing.T) {
		data := bytes.Repeat([]byte("downloaded "), 20_000)
		f := &fakeBlobs{data: data, downBuf: 1000}
		rl := &recordingListener{}
		url := blobServerWith(t, f, TransportOptions{BodyReadTimeout: 2 * time.Second},
			func(l net.Listener) net.Listener { rl.Listener = l; return rl }).URL
		resp, got := do(t, http.MethodGet, url+"/api/blobs/"+contentaddr.Of(data), nil, map[string]string{"Authorization": "x"})
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
			t.Fatalf("download: %d, %d bytes", resp.StatusCode, len(got))
		}
		if _, write, n := rl.last(t); n < 2 || !write.IsZero() {
			t.Fatalf("%d write deadlines set, the last %v: want the transfer's, then none", n, write)
		}
	})
}

// waitReserved polls the limiter until its reserved bytes are want.
func waitReserved(t *testing.T, l *Limiter, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, b := l.InUse(); b == want {
			return
		}
		if time.Now().After(deadline) {
			_, b := l.InUse()
			t.Fatalf("reserved %d bytes, want %d", b, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBlobUploadRefusesAHugeZstdWindow: a zstd-encoded upload whose frame
// asks for a window past BlobZstdMaxWindow is refused (413) rather than
// given the memory it asks for.
func TestBlobUploadRefusesAHugeZstdWindow(t *testing.T) {
	data := bytes.Repeat([]byte("window "), 1000)
	var enc bytes.Buffer
	zw, err := zstd.NewWriter(&enc, zstd.WithWindowSize(4*BlobZstdMaxWindow), zstd.WithEncoderConcurrency(1), zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	// A flush before the end makes the encoder write its frame header
	// with the window, not a single segment sized to the content.
	for range 2 {
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f := &fakeBlobs{upBuf: 1000}
	srv := blobServer(t, f)
	resp, b := do(t, http.MethodPut, srv.URL+"/api/blobs/"+contentaddr.Of(append(data, data...)), bytes.NewReader(enc.Bytes()),
		map[string]string{"Authorization": "x", "Content-Encoding": "zstd"})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || bodyCode(t, b) != string(syncerr.InvalidRequest) {
		t.Fatalf("huge window: %d %s", resp.StatusCode, b)
	}
}
