package realtime_test

import (
	"bytes"
	"testing"

	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

func request(t *testing.T) []byte {
	t.Helper()
	b, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
		&ssp2.ReqHeader{ClientID: "c1", SchemaVersion: 1}, &ssp2.PullHeader{LimitCommits: 10, LimitSnapshotRows: 10, MaxSnapshotPages: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRequestScannerReassemblesAtAnyBoundary(t *testing.T) {
	req := request(t)
	for size := 1; size <= len(req); size++ {
		var s realtime.RequestScanner
		var got []byte
		for off := 0; off < len(req); off += size {
			end := min(off+size, len(req))
			msg, excess, err := s.Push(req[off:end])
			if err != nil {
				t.Fatalf("chunk size %d: %v", size, err)
			}
			if excess != 0 {
				t.Fatalf("chunk size %d: excess %d", size, excess)
			}
			if msg != nil {
				if end != len(req) {
					t.Fatalf("chunk size %d: message ended early at %d", size, end)
				}
				got = msg
			}
		}
		if !bytes.Equal(got, req) {
			t.Fatalf("chunk size %d: got %x, want %x", size, got, req)
		}
		if s.Pending() {
			t.Fatalf("chunk size %d: scanner still holds bytes", size)
		}
	}
}

func TestRequestScannerViolations(t *testing.T) {
	req := request(t)
	resp, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{&ssp2.RespHeader{LogEpoch: "e"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		chunk      []byte
		max        int64
		wantErr    bool
		wantExcess int
	}{
		{name: "pipelined request", chunk: append(append([]byte{}, req...), req...), wantExcess: len(req)},
		{name: "response header", chunk: resp, wantErr: true},
		{name: "bad magic", chunk: append([]byte("XSP2"), req[4:]...), wantErr: true},
		{name: "over the size bound", chunk: req, max: int64(len(req) - 1), wantErr: true},
		{name: "END with a length", chunk: append(append([]byte{}, req[:len(req)-5]...), 0, 1, 0, 0, 0, 9), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := realtime.RequestScanner{MaxBytes: tt.max}
			msg, excess, err := s.Push(tt.chunk)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && (msg == nil || excess != tt.wantExcess) {
				t.Fatalf("msg %x excess %d, want a message and excess %d", msg, excess, tt.wantExcess)
			}
		})
	}
}
