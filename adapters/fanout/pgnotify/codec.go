package pgnotify

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/ports"
)

// Wire format of one NOTIFY payload (text, at most maxPayload bytes):
//
//	c <node> <seq> <partition>         commit notice, partition verbatim
//	C <node> <seq> <base64 partition>  commit notice, partition not plain text
//	e <node> <msg> <i> <n> <chunk>     chunk i of n of event msg
//
// node is the publishing node's id (its own notices come back through the
// database and are skipped: they were delivered locally). An event is its
// frame (uvarint topic length, topic, uvarint key length, key, payload)
// in unpadded standard base64, cut into n chunks that one transaction
// sends, so they arrive together and in order. msg numbers the node's
// events, which also keeps PostgreSQL from folding two equal events of
// one transaction into one.

// maxPayload is PostgreSQL's NOTIFY payload bound (shorter than 8000
// bytes in the default build).
const maxPayload = 7999

// chunkBytes leaves room for the event header within maxPayload.
const chunkBytes = 7900

var b64 = base64.RawStdEncoding

// plainText reports whether s can travel verbatim in a payload: valid
// UTF-8 without NUL (PostgreSQL refuses NUL in text).
func plainText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func encodeCommit(node string, n ports.CommitNotice) (string, error) {
	tag, p := "c", n.Partition
	if !plainText(p) {
		tag, p = "C", b64.EncodeToString([]byte(p))
	}
	s := tag + " " + node + " " + strconv.FormatInt(n.CommitSeq, 10) + " " + p
	if len(s) > maxPayload {
		return "", fmt.Errorf("fanout: partition of %d bytes does not fit a notification", len(n.Partition))
	}
	return s, nil
}

// encodeEvent returns the payloads carrying e, in order.
func encodeEvent(node string, msg uint64, e ports.FanoutEvent) []string {
	frame := binary.AppendUvarint(nil, uint64(len(e.Topic)))
	frame = append(frame, e.Topic...)
	frame = binary.AppendUvarint(frame, uint64(len(e.Key)))
	frame = append(frame, e.Key...)
	frame = append(frame, e.Payload...)
	text := b64.EncodeToString(frame)
	n := max(1, (len(text)+chunkBytes-1)/chunkBytes)
	out := make([]string, 0, n)
	prefix := "e " + node + " " + strconv.FormatUint(msg, 10) + " "
	for i := range n {
		chunk := text[i*chunkBytes : min(len(text), (i+1)*chunkBytes)]
		out = append(out, prefix+strconv.Itoa(i)+" "+strconv.Itoa(n)+" "+chunk)
	}
	return out
}

// message is one decoded payload.
type message struct {
	node   string
	commit bool
	notice ports.CommitNotice
	// event chunk
	msg   uint64
	index int
	count int
	chunk string
}

var errMalformed = errors.New("fanout: malformed notification")

func decode(payload string) (message, error) {
	tag, rest, ok := strings.Cut(payload, " ")
	if !ok {
		return message{}, errMalformed
	}
	node, rest, ok := strings.Cut(rest, " ")
	if !ok || node == "" {
		return message{}, errMalformed
	}
	m := message{node: node}
	switch tag {
	case "c", "C":
		seqText, part, ok := strings.Cut(rest, " ")
		if !ok {
			return message{}, errMalformed
		}
		seq, err := strconv.ParseInt(seqText, 10, 64)
		if err != nil {
			return message{}, errMalformed
		}
		if tag == "C" {
			b, err := b64.DecodeString(part)
			if err != nil {
				return message{}, errMalformed
			}
			part = string(b)
		}
		m.commit, m.notice = true, ports.CommitNotice{Partition: part, CommitSeq: seq}
		return m, nil
	case "e":
		f := strings.SplitN(rest, " ", 4)
		if len(f) != 4 {
			return message{}, errMalformed
		}
		msg, err1 := strconv.ParseUint(f[0], 10, 64)
		i, err2 := strconv.Atoi(f[1])
		n, err3 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || err3 != nil || n < 1 || i < 0 || i >= n {
			return message{}, errMalformed
		}
		m.msg, m.index, m.count, m.chunk = msg, i, n, f[3]
		return m, nil
	}
	return message{}, errMalformed
}

// decodeFrame turns an event's reassembled base64 text back into it.
func decodeFrame(text string) (ports.FanoutEvent, error) {
	b, err := b64.DecodeString(text)
	if err != nil {
		return ports.FanoutEvent{}, errMalformed
	}
	field := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	topic, ok1 := field()
	key, ok2 := field()
	if !ok1 || !ok2 {
		return ports.FanoutEvent{}, errMalformed
	}
	return ports.FanoutEvent{Topic: topic, Key: key, Payload: append([]byte{}, b...)}, nil
}

// assembler rejoins the chunks of each node's events. A node's chunks
// arrive contiguously (one transaction), so a gap means loss: the partial
// event is dropped.
type assembler struct {
	partial map[string]*partialEvent
}

type partialEvent struct {
	msg    uint64
	count  int
	chunks []string
}

// add takes one chunk and returns the event once it is complete.
func (a *assembler) add(m message) (ports.FanoutEvent, bool, error) {
	if m.count == 1 {
		delete(a.partial, m.node)
		e, err := decodeFrame(m.chunk)
		return e, err == nil, err
	}
	if a.partial == nil {
		a.partial = map[string]*partialEvent{}
	}
	p := a.partial[m.node]
	if m.index == 0 {
		p = &partialEvent{msg: m.msg, count: m.count}
		a.partial[m.node] = p
	}
	if p == nil || p.msg != m.msg || p.count != m.count || len(p.chunks) != m.index {
		delete(a.partial, m.node)
		return ports.FanoutEvent{}, false, errMalformed
	}
	p.chunks = append(p.chunks, m.chunk)
	if len(p.chunks) < p.count {
		return ports.FanoutEvent{}, false, nil
	}
	delete(a.partial, m.node)
	e, err := decodeFrame(strings.Join(p.chunks, ""))
	return e, err == nil, err
}

// reset forgets partial events (the connection that carried them is gone).
func (a *assembler) reset() { a.partial = nil }
