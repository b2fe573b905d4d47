package ssp2_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// TestVersionError: a refused wire version is an invalid_request decode
// error that names the envelope's version and the admitted ones, for the
// whole-message and the streaming decoder alike.
func TestVersionError(t *testing.T) {
	cases := []struct {
		name     string
		version  uint16
		versions []uint16
		admitted []uint16
	}{
		{"known version outside the window", 2, []uint16{3}, []uint16{3}},
		{"unknown version", 9, []uint16{2, 3}, []uint16{2, 3}},
		{"no window: every known version", 0, nil, []uint16{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := append(ssp2.AppendHeader(nil, c.version, ssp2.KindRequest), 0, 0, 0, 0, 0)
			o := ssp2.DecodeOptions{Versions: c.versions}
			_, err := ssp2.DecodeWith(msg, o)
			_, serr := ssp2.NewDecoder(bytes.NewReader(msg), o).ReadMessage()
			for _, err := range []error{err, serr} {
				var ve *ssp2.VersionError
				if !errors.As(err, &ve) || ve.Version != c.version || !reflect.DeepEqual(ve.Admitted, c.admitted) {
					t.Fatalf("got %v, want a version error for %d admitting %v", err, c.version, c.admitted)
				}
				if syncerr.CodeOf(err) != syncerr.InvalidRequest {
					t.Fatalf("code of %v", err)
				}
			}
		})
	}
}

// TestRespHeaderForWire: a header with an epoch cannot be written at wire 1
// as it is; ForWire drops the epoch fields there and keeps them from wire 2.
func TestRespHeaderForWire(t *testing.T) {
	h := &ssp2.RespHeader{LatestSchemaVersion: ssp2.Some(int32(4)), LogEpoch: "e1", ResetRequired: true}
	if _, err := ssp2.Encode(&ssp2.Message{WireVersion: 1, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{h}}); err == nil {
		t.Fatal("a wire-1 header with an epoch encoded")
	}
	for _, c := range []struct {
		version uint16
		want    ssp2.RespHeader
	}{
		{1, ssp2.RespHeader{LatestSchemaVersion: ssp2.Some(int32(4))}},
		{2, *h},
		{3, *h},
	} {
		b, err := ssp2.Encode(&ssp2.Message{WireVersion: c.version, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{h.ForWire(c.version)}})
		if err != nil {
			t.Fatalf("wire %d: %v", c.version, err)
		}
		m, err := ssp2.Decode(b)
		if err != nil {
			t.Fatalf("wire %d: %v", c.version, err)
		}
		if got := *m.Frames[0].(*ssp2.RespHeader); got != c.want {
			t.Fatalf("wire %d: got %+v, want %+v", c.version, got, c.want)
		}
	}
	if h.LogEpoch != "e1" || !h.ResetRequired {
		t.Fatalf("ForWire changed its receiver: %+v", h)
	}
}
