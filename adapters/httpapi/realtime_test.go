package httpapi_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/ports"
)

// violator is an admission that closes the socket on the client's first
// message, as a session does on a protocol violation: the close runs on
// its own goroutine and Run ends without waiting for the handshake.
type violator struct{}

func (violator) Abort() {}

func (violator) Run(ctx context.Context, c ports.RealtimeConn) {
	if _, err := c.Read(ctx); err != nil {
		return
	}
	go func() { _ = c.Close(ports.ClosePolicy, "violation") }()
}

// rawPeer is a WebSocket client written by hand, so that it can leave a
// close frame unanswered.
type rawPeer struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, srv *httptest.Server, path string) *rawPeer {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// A guard against a hang, not an assertion about timing.
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: syncd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{conn: conn, br: bufio.NewReader(conn)}
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %d", resp.StatusCode)
	}
	return p
}

// sendBinary writes one masked binary frame (RFC 6455 §5.2).
func (p *rawPeer) sendBinary(t *testing.T, payload []byte) {
	t.Helper()
	if len(payload) > 125 {
		t.Fatal("short frames only")
	}
	mask := [4]byte{1, 2, 3, 4}
	f := append([]byte{0x82, 0x80 | byte(len(payload))}, mask[:]...)
	for i, b := range payload {
		f = append(f, b^mask[i%4])
	}
	if _, err := p.conn.Write(f); err != nil {
		t.Fatal(err)
	}
}

// frame reads one server frame: its opcode and payload.
func (p *rawPeer) frame() (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(p.br, ext[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(p.br, ext[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	b := make([]byte, n)
	_, err := io.ReadFull(p.br, b)
	return h[0] & 0x0f, b, err
}

// A socket the server closes is torn down even when the peer never
// answers the close frame: the handshake waits for the peer's close
// frame only up to its own bound (coder/websocket: 5 s), then the
// connection is closed.
func TestRealtimeCloseTearsDownASilentPeer(t *testing.T) {
	auth := authFunc(func(*http.Request) (ports.Identity, error) {
		return ports.Identity{Partition: "p", ActorID: "alice"}, nil
	})
	admit := func(context.Context, ports.Identity, string) (ports.RealtimeAdmission, error) {
		return violator{}, nil
	}
	srv := httptest.NewServer(httpapi.RealtimeEndpoint(auth, httpapi.RealtimeOptions{}, admit))
	defer srv.Close()

	p := dialRaw(t, srv, "/realtime?clientId=c1")
	p.sendBinary(t, []byte{0x07})
	op, payload, err := p.frame()
	if err != nil {
		t.Fatal(err)
	}
	if op != 0x8 || len(payload) < 2 || binary.BigEndian.Uint16(payload) != ports.ClosePolicy {
		t.Fatalf("want a close frame with %d, got opcode %d payload %q", ports.ClosePolicy, op, payload)
	}
	// The peer stays silent; the server must end the TCP connection.
	for {
		op, payload, err := p.frame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("the connection ended with %v, want the server's EOF", err)
			}
			return
		}
		t.Fatalf("a frame after the close: opcode %d %q", op, payload)
	}
}
