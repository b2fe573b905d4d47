package ssp2_test

import (
	"bytes"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// FuzzDecodeMessage: no input panics; whatever decodes re-encodes to the
// same bytes and renders; the streaming decoder agrees with Decode on the
// outcome.
func FuzzDecodeMessage(f *testing.F) {
	for _, b := range vectortest.Files("request", "response") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		opts := ssp2.DecodeOptions{MaxFrameBytes: 1 << 20, MaxMessageBytes: 4 << 20}
		m, err := ssp2.DecodeWith(in, opts)
		_, serr := ssp2.NewDecoder(bytes.NewReader(in), opts).ReadMessage()
		if (err == nil) != (serr == nil) {
			t.Fatalf("Decode and Decoder disagree: %v vs %v", err, serr)
		}
		if err != nil {
			if c := syncerr.CodeOf(err); c != syncerr.InvalidRequest && c != syncerr.EmptyCommit {
				t.Fatalf("unexpected code %q: %v", c, err)
			}
			return
		}
		out, err := ssp2.Encode(m)
		if err != nil {
			t.Fatalf("decoded message does not re-encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", out, in)
		}
		_ = ssp2.RenderJSON(m)
	})
}
