package realtime_test

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// FuzzParseControlMessages: untrusted control text never panics, fails
// only with sync.invalid_request, and whatever parses re-encodes to a
// message that parses again.
func FuzzParseControlMessages(f *testing.F) {
	for _, s := range []string{
		`{"type":"ack","cursor":42}`,
		`{"event":"presence","data":{"scopeKey":"project:p1","doc":{"cursor":42}}}`,
		`{"event":"hello","data":{"protocolVersion":1,"sessionId":"s","actorId":"a","clientId":"c","cursor":1,"latestCursor":2,"requiresSync":true,"timestamp":3}}`,
		`{"event":"sync","data":{"cursor":64,"requiresPull":true,"reason":"catchup-required","timestamp":1}}`,
		`{"event":"presence","data":{"scopeKey":"p:1","kind":"leave","actorId":"a","clientId":"c","doc":null,"timestamp":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, parse := range []func([]byte) (realtime.Message, error){realtime.ParseServerEvent, realtime.ParseClientMessage} {
			m, err := parse(in)
			if err != nil {
				if syncerr.CodeOf(err) != syncerr.InvalidRequest {
					t.Fatalf("code %v", err)
				}
				continue
			}
			if _, unknown := m.(*realtime.Unknown); unknown {
				continue
			}
			out, err := realtime.Encode(m)
			if err != nil {
				t.Fatalf("parsed message does not encode: %v", err)
			}
			if _, err := parse(out); err != nil {
				t.Fatalf("re-encoding %s does not parse: %v", out, err)
			}
		}
	})
}
