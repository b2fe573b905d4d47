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
