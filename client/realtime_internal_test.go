package client

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
)

// A socket round's response ends with its END frame, whatever the chunk
// boundaries (§8.7); anything else is refused rather than waited for.
func TestResponseScanner(t *testing.T) {
	resp, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{
		&ssp2.RespHeader{LogEpoch: "e1"},
		&ssp2.SubStart{ID: "s", Status: ssp2.SubActive},
		&ssp2.SubEnd{NextCursor: 7},
	}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{&ssp2.ReqHeader{ClientID: "c", SchemaVersion: 1}, &ssp2.PullHeader{Accept: ssp2.AcceptInlineRows}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		stream  []byte
		chunk   int
		limit   int64
		wantErr bool
	}{
		{"one chunk", resp, len(resp), 1 << 20, false},
		{"byte by byte", resp, 1, 1 << 20, false},
		{"seven bytes", resp, 7, 1 << 20, false},
		{"bytes past END", append(append([]byte(nil), resp...), 0), len(resp) + 1, 1 << 20, true},
		{"a request stream", req, len(req), 1 << 20, true},
		{"over the limit", resp, 3, int64(len(resp) - 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s responseScanner
			for off := 0; off < len(tc.stream); off += tc.chunk {
				end := min(off+tc.chunk, len(tc.stream))
				out, done, err := s.push(tc.stream[off:end], tc.limit)
				if err != nil {
					if !tc.wantErr {
						t.Fatalf("chunk at %d: %v", off, err)
					}
					return
				}
				if done {
					if tc.wantErr || end != len(tc.stream) || string(out) != string(tc.stream) {
						t.Fatalf("done at %d of %d (want error %v)", end, len(tc.stream), tc.wantErr)
					}
					return
				}
			}
			t.Fatalf("stream of %d bytes never ended", len(tc.stream))
		})
	}
}
