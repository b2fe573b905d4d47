package nats

import (
	"bytes"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/ports"
)

// TestToken: every name becomes one safe, bounded subject token; plain
// names stay as they are, and distinct short names never share one.
func TestToken(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"plain stays", "tenant-7_a", "tenant-7_a"},
		{"empty is encoded", "", "~"},
		{"dot is encoded", "a.b", "~YS5i"},
		{"wildcards are encoded", "*", "~Kg"},
		{"space is encoded", "a b", "~YSBi"},
		{"a name that looks encoded is encoded", "~YS5i", "~fllTNWk"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Token(c.in); got != c.want {
				t.Fatalf("Token(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	names := []string{"", "p", "a.b", "a b", "*", ">", "x\x00y", "\xc3(", "größe", "a/b", "~", "#",
		strings.Repeat("p", plainTokenBytes), strings.Repeat("p", plainTokenBytes+1),
		strings.Repeat(".", encodedTokenBytes), strings.Repeat(".", encodedTokenBytes+1), strings.Repeat("é", 5000)}
	seen := map[string]string{}
	for _, n := range names {
		tok := Token(n)
		if tok == "" || len(tok) > 129 || strings.ContainsAny(tok, ". \t\r\n*>") {
			t.Fatalf("Token(%q) = %q: not one safe token", n, tok)
		}
		if !ValidSubject("syncd.x.c." + tok) {
			t.Fatalf("Token(%q) = %q makes an invalid subject", n, tok)
		}
		if other, dup := seen[tok]; dup {
			t.Fatalf("%q and %q share the token %q", n, other, tok)
		}
		seen[tok] = n
	}
}

func TestValidSubject(t *testing.T) {
	for s, want := range map[string]bool{
		"syncd": true, "acme.syncd": true, "a-b_c.d1": true,
		"": false, ".": false, "a..b": false, "a.": false, "a b": false, "a.*": false, "a.>": false, "a\tb": false,
	} {
		if got := ValidSubject(s); got != want {
			t.Errorf("ValidSubject(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestRoundTrip: bodies carry any partition, topic, key and payload
// exactly, whatever the subject token made of them.
func TestRoundTrip(t *testing.T) {
	node := []byte("12345678")
	for _, p := range []string{"p", "", "with spaces.and.dots", "nul\x00", "\xff\xfe", strings.Repeat("x", MaxPartitionBytes)} {
		for _, seq := range []int64{0, 1, 1 << 40} {
			m, err := decode(encodeCommit(node, ports.CommitNotice{Partition: p, CommitSeq: seq}))
			if err != nil || !m.commit || m.node != string(node) || m.notice != (ports.CommitNotice{Partition: p, CommitSeq: seq}) {
				t.Fatalf("commit %q/%d: decoded %+v, %v", p, seq, m, err)
			}
		}
	}
	for _, e := range []ports.FanoutEvent{
		{Topic: "presence", Key: "p/scope ✓", Payload: []byte{0, 1, 0xff}},
		{Topic: "", Key: "", Payload: nil},
		{Topic: "reset", Key: "p", Payload: bytes.Repeat([]byte{7}, 64<<10)},
	} {
		m, err := decode(encodeEvent(node, e))
		if err != nil || m.commit || m.event.Topic != e.Topic || m.event.Key != e.Key || !bytes.Equal(m.event.Payload, e.Payload) {
			t.Fatalf("event %q/%q: decoded %+v, %v", e.Topic, e.Key, m, err)
		}
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	node := "12345678"
	for name, b := range map[string][]byte{
		"empty":           nil,
		"no node":         []byte("c1234"),
		"unknown kind":    []byte("x" + node + "\x02p"),
		"commit no seq":   []byte("c" + node),
		"event short key": []byte("e" + node + "\x01t\x05k"),
		"event no topic":  []byte("e" + node),
	} {
		if _, err := decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
