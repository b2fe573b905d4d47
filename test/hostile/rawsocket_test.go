package hostile

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/test/syncdproc"
)

// rawSocket is a WebSocket client written by hand (RFC 6455), so that an
// attack can leave a message unfinished between its fragments.
type rawSocket struct {
	conn   net.Conn
	closed chan int // the server's close code (0: the connection ended without one)
}

// dialRawSocket upgrades route (path and query under the sync base) as
// actor.
func dialRawSocket(ctx context.Context, n *syncdproc.Node, route, actor string) (*rawSocket, error) {
	u, err := url.Parse(n.BaseURL() + route)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Syncd-Actor: " + actor + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		_ = conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_ = conn.Close()
		return nil, fmt.Errorf("upgrade answered %d", resp.StatusCode)
	}
	p := &rawSocket{conn: conn, closed: make(chan int, 1)}
	go p.read(br)
	return p, nil
}

func (p *rawSocket) close() { _ = p.conn.Close() }

// read reads server frames until a close frame or the end, answering
// nothing: the attacker only listens for how it is sent away.
func (p *rawSocket) read(br *bufio.Reader) {
	code := 0
	defer func() { p.closed <- code }()
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		if h[0]&0x0f == 0x8 {
			if len(b) >= 2 {
				code = int(binary.BigEndian.Uint16(b))
			}
			return
		}
	}
}

// frame writes one masked frame.
func (p *rawSocket) frame(op byte, fin bool, payload []byte) error {
	h := op
	if fin {
		h |= 0x80
	}
	f := []byte{h}
	switch n := len(payload); {
	case n <= 125:
		f = append(f, 0x80|byte(n))
	case n <= 0xffff:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	mask := [4]byte{7, 7, 7, 7}
	f = append(f, mask[:]...)
	for _, b := range payload {
		f = append(f, b^7)
	}
	_, err := p.conn.Write(f)
	return err
}

// streamUnfinished begins a binary message and sends it as fragments of
// size bytes, a ping after each, pausing between them, never the final
// one; it returns the server's close code once it is sent away (-1 if ctx
// ends first).
func (p *rawSocket) streamUnfinished(ctx context.Context, fragments, size int, pause time.Duration) int {
	chunk := []byte(strings.Repeat("u", size))
	op := byte(0x2)
	for i := 0; ; i++ {
		if i < fragments {
			if err := p.frame(op, false, chunk); err != nil {
				break
			}
			op = 0x0 // continuation
		}
		if err := p.frame(0x9, true, []byte("alive")); err != nil {
			break
		}
		select {
		case code := <-p.closed:
			return code
		case <-ctx.Done():
			return -1
		case <-time.After(pause):
		}
	}
	select {
	case code := <-p.closed:
		return code
	case <-ctx.Done():
		return -1
	}
}
