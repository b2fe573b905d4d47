package nats

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/syncd-dev/syncd/ports"
)

// Subjects, under the root <prefix>.<deployment>:
//
//	<root>.c.<token(partition)>             commit notice
//	<root>.e.<token(topic)>.<token(key)>    event (presence: key is partition/scope)
//
// A subject only routes: the message body carries the exact partition,
// topic and key, so decoding never reads the subject and two names that
// share a token (a hash collision) still arrive apart.
//
// Body (binary; NATS payloads are opaque bytes):
//
//	'c' node[8] varint(seq) partition
//	'e' node[8] uvarint(len topic) topic uvarint(len key) key payload
//
// node is the publishing node's random id; the connection does not echo
// its own messages, and a receiver skips its own id besides.

const (
	kindCommit = 'c'
	kindEvent  = 'e'
	nodeBytes  = 8
)

// MaxPartitionBytes bounds the partition of a commit notice, as the
// PostgreSQL fanout's notification size does, so a deployment behaves
// alike on both.
const MaxPartitionBytes = 7900

// Token bounds: names made of [A-Za-z0-9_-] up to plainTokenBytes travel
// verbatim; others up to encodedTokenBytes as '~' and unpadded base64url;
// longer ones as '#' and a hash.
const (
	plainTokenBytes   = 64
	encodedTokenBytes = 96
)

// Token turns any name (any bytes, empty included) into one NATS subject
// token: never empty, without whitespace, '.', '*' or '>', and at most 129
// bytes. Plain names stay readable; the rest are encoded or hashed.
func Token(s string) string {
	if s != "" && len(s) <= plainTokenBytes && plainToken(s) {
		return s
	}
	if len(s) <= encodedTokenBytes {
		return "~" + base64.RawURLEncoding.EncodeToString([]byte(s))
	}
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:16])
}

func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// DeploymentToken is the subject token of a deployment name (what the
// nodes share: their database and schema).
func DeploymentToken(deployment string) string {
	sum := sha256.Sum256([]byte(deployment))
	return hex.EncodeToString(sum[:8])
}

// ValidSubject reports whether s is a literal NATS subject: dot-separated
// non-empty tokens without whitespace or wildcards.
func ValidSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n\f\v*>") {
			return false
		}
	}
	return true
}

func commitSubject(root, partition string) string { return root + ".c." + Token(partition) }

func eventSubject(root string, e ports.FanoutEvent) string {
	return root + ".e." + Token(e.Topic) + "." + Token(e.Key)
}

func encodeCommit(node []byte, n ports.CommitNotice) []byte {
	b := make([]byte, 0, 1+nodeBytes+binary.MaxVarintLen64+len(n.Partition))
	b = append(b, kindCommit)
	b = append(b, node...)
	b = binary.AppendVarint(b, n.CommitSeq)
	return append(b, n.Partition...)
}

func encodeEvent(node []byte, e ports.FanoutEvent) []byte {
	b := make([]byte, 0, 1+nodeBytes+2*binary.MaxVarintLen64+len(e.Topic)+len(e.Key)+len(e.Payload))
	b = append(b, kindEvent)
	b = append(b, node...)
	b = binary.AppendUvarint(b, uint64(len(e.Topic)))
	b = append(b, e.Topic...)
	b = binary.AppendUvarint(b, uint64(len(e.Key)))
	b = append(b, e.Key...)
	return append(b, e.Payload...)
}

// frameOverhead is the most a body adds to an event's topic, key and
// payload.
const frameOverhead = 1 + nodeBytes + 2*binary.MaxVarintLen64

var errMalformed = errors.New("fanout: malformed NATS message")

// message is one decoded body.
type message struct {
	node   string
	commit bool
	notice ports.CommitNotice
	event  ports.FanoutEvent
}

func decode(b []byte) (message, error) {
	if len(b) < 1+nodeBytes {
		return message{}, errMalformed
	}
	kind, m := b[0], message{node: string(b[1 : 1+nodeBytes])}
	b = b[1+nodeBytes:]
	switch kind {
	case kindCommit:
		seq, k := binary.Varint(b)
		if k <= 0 {
			return message{}, errMalformed
		}
		m.commit, m.notice = true, ports.CommitNotice{Partition: string(b[k:]), CommitSeq: seq}
		return m, nil
	case kindEvent:
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
			return message{}, errMalformed
		}
		m.event = ports.FanoutEvent{Topic: topic, Key: key, Payload: append([]byte{}, b...)}
		return m, nil
	}
	return message{}, errMalformed
}
