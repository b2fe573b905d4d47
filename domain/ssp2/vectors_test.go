package ssp2_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// TestMessageVectors runs every request and response vector of both
// generations: decode, render (deep-equal and byte-identical to the .json),
// byte-exact re-encode (whole-message and streaming), and every invalid
// case fails with its manifest code.
func TestMessageVectors(t *testing.T) {
	for _, gen := range []string{"v3", "v2"} {
		t.Run(gen, func(t *testing.T) {
			dir := vectortest.Dir(t, gen)
			for _, kind := range []string{"request", "response"} {
				m, ok := vectortest.Load(t, dir, kind)
				if !ok {
					t.Fatalf("missing %s vectors", kind)
				}
				for _, c := range m.Cases {
					t.Run(kind+"/"+c.Name, func(t *testing.T) {
						bin := m.Read(t, c.Bin)
						msg, err := ssp2.Decode(bin)
						if err != nil {
							t.Fatalf("decode: %v", err)
						}
						if msg.Kind.String() != kind {
							t.Fatalf("kind %s", msg.Kind)
						}
						got := ssp2.RenderJSON(msg)
						want := m.Read(t, c.JSON)
						if err := vectortest.EqualJSON(got, want); err != nil {
							t.Fatalf("render: %v\n%s", err, got)
						}
						if !bytes.Equal(got, want) {
							t.Errorf("rendering is not byte-identical to %s", c.JSON)
						}
						re, err := ssp2.Encode(msg)
						if err != nil {
							t.Fatalf("encode: %v", err)
						}
						if !bytes.Equal(re, bin) {
							t.Fatalf("re-encoded bytes differ:\n got %x\nwant %x", re, bin)
						}
						// Streaming decode and encode, frame by frame.
						d := ssp2.NewDecoder(bytes.NewReader(bin), ssp2.DecodeOptions{})
						v, k, err := d.Header()
						if err != nil {
							t.Fatal(err)
						}
						var out bytes.Buffer
						e := ssp2.NewEncoder(&out, k, v)
						for {
							f, err := d.Next()
							if err == io.EOF {
								break
							}
							if err != nil {
								t.Fatalf("stream decode: %v", err)
							}
							if err := e.WriteFrame(f); err != nil {
								t.Fatalf("stream encode: %v", err)
							}
						}
						if err := e.Close(); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(out.Bytes(), bin) {
							t.Fatal("streamed re-encoding differs")
						}
					})
				}
				for _, c := range m.Invalid {
					t.Run(kind+"/invalid/"+c.Name, func(t *testing.T) {
						bin := m.Read(t, c.Bin)
						_, err := ssp2.Decode(bin)
						if got := syncerr.CodeOf(err); string(got) != c.Error {
							t.Fatalf("decode: got %v, want %s", err, c.Error)
						}
						_, err = ssp2.NewDecoder(bytes.NewReader(bin), ssp2.DecodeOptions{}).ReadMessage()
						if got := syncerr.CodeOf(err); string(got) != c.Error {
							t.Fatalf("stream decode: got %v, want %s", err, c.Error)
						}
					})
				}
			}
		})
	}
}

// TestWire3OnlyReaderRejectsOldEnvelopes: a reader admitting only version
// 3 refuses every wire-1/2 vector as an unsupported version.
func TestWire3OnlyReaderRejectsOldEnvelopes(t *testing.T) {
	dir := vectortest.Dir(t, "v2")
	for _, kind := range []string{"request", "response"} {
		m, _ := vectortest.Load(t, dir, kind)
		for _, c := range m.Cases {
			t.Run(kind+"/"+c.Name, func(t *testing.T) {
				_, err := ssp2.DecodeWith(m.Read(t, c.Bin), ssp2.DecodeOptions{Versions: []uint16{3}})
				if syncerr.CodeOf(err) != syncerr.InvalidRequest {
					t.Fatalf("got %v", err)
				}
			})
		}
	}
}
