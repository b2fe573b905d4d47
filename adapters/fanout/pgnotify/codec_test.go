package pgnotify

import (
	"bytes"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/ports"
)

func TestCommitRoundTrip(t *testing.T) {
	for _, p := range []string{"p", "with spaces ", "größe", "nul\x00", "\xff\xfe", ""} {
		s, err := encodeCommit("node", ports.CommitNotice{Partition: p, CommitSeq: 42})
		if err != nil {
			t.Fatal(err)
		}
		if !plainText(s) || len(s) > maxPayload {
			t.Fatalf("payload %q is not a valid notification", s)
		}
		m, err := decode(s)
		if err != nil || !m.commit || m.node != "node" || m.notice != (ports.CommitNotice{Partition: p, CommitSeq: 42}) {
			t.Fatalf("partition %q: decoded %+v, %v", p, m, err)
		}
	}
	if _, err := encodeCommit("node", ports.CommitNotice{Partition: strings.Repeat("x", maxPayload)}); err == nil {
		t.Fatal("a partition larger than a notification was accepted")
	}
}

// TestEventChunks: events split into notifications that fit, rejoin
// only when complete and in order, and a gap drops the partial event.
func TestEventChunks(t *testing.T) {
	e := ports.FanoutEvent{Topic: "presence", Key: "k ✓", Payload: bytes.Repeat([]byte{0, 0xff, ' '}, 20_000)}
	parts := encodeEvent("n1", 9, e)
	if len(parts) < 2 {
		t.Fatalf("%d notifications, want the event split", len(parts))
	}
	feed := func(a *assembler, payloads []string) (ports.FanoutEvent, bool, error) {
		var got ports.FanoutEvent
		var done bool
		var err error
		for _, p := range payloads {
			if len(p) > maxPayload || !plainText(p) {
				t.Fatalf("notification of %d bytes does not fit", len(p))
			}
			m, derr := decode(p)
			if derr != nil {
				t.Fatal(derr)
			}
			got, done, err = a.add(m)
			if err != nil {
				return got, done, err
			}
		}
		return got, done, err
	}
	cases := []struct {
		name     string
		payloads []string
		want     bool
	}{
		{"complete", parts, true},
		{"missing middle", append(append([]string{}, parts[:1]...), parts[2:]...), false},
		{"missing first", parts[1:], false},
		{"truncated", parts[:len(parts)-1], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, done, _ := feed(&assembler{}, c.payloads)
			if done != c.want {
				t.Fatalf("complete = %v, want %v", done, c.want)
			}
			if done && (got.Topic != e.Topic || got.Key != e.Key || !bytes.Equal(got.Payload, e.Payload)) {
				t.Fatal("event changed on the way")
			}
		})
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for _, p := range []string{"", "c", "c n", "c n x p", "C n 1 !!", "e n 1 0", "e n 1 2 2 x", "e n x 0 1 y", "z n 1 p"} {
		if _, err := decode(p); err == nil {
			t.Errorf("decode(%q) accepted", p)
		}
	}
}
