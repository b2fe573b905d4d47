package round_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestRefusedWireVersionSaysWhy: a request of a wire version outside the
// window is refused with a message naming its version, the admitted ones
// and --min-wire-version, and the server warns about it at most once per
// interval per version (time from the injected clock).
func TestRefusedWireVersionSaysWhy(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	core, logs := observer.New(zapcore.WarnLevel)
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Now = func() time.Time { return now }
		o.Log = zap.New(core)
	})
	send := func(wire uint16) *syncerr.Error {
		t.Helper()
		_, err := e.Round.Handle(context.Background(), e.ID, body(t, e.Req(), wire))
		var se *syncerr.Error
		if !errors.As(err, &se) || se.Code != syncerr.InvalidRequest {
			t.Fatalf("wire %d: %v", wire, err)
		}
		return syncerr.Public(err)
	}
	warnings := func() int { return logs.FilterMessageSnippet("wire version").Len() }

	cases := []struct {
		wire     uint16
		contains []string
	}{
		{2, []string{"wire version 2 is not admitted", "admits wire 3", "--min-wire-version 2"}},
		{1, []string{"wire version 1 is not admitted", "admits wire 3", "--min-wire-version 1"}},
		{4, []string{"wire version 4 is not supported", "admits wire 3", "--min-wire-version"}},
	}
	for _, c := range cases {
		pub := send(c.wire)
		for _, frag := range c.contains {
			if !strings.Contains(pub.Message, frag) {
				t.Errorf("wire %d: message %q lacks %q", c.wire, pub.Message, frag)
			}
		}
		var d struct {
			WireVersion uint16   `json:"wireVersion"`
			Admitted    []uint16 `json:"admittedWireVersions"`
		}
		if err := json.Unmarshal(pub.Details, &d); err != nil || d.WireVersion != c.wire || len(d.Admitted) != 1 || d.Admitted[0] != 3 {
			t.Errorf("wire %d: details %s", c.wire, pub.Details)
		}
	}
	// Wire 2, wire 1 and the unknown versions (one bucket) each warned once.
	if got := warnings(); got != 3 {
		t.Fatalf("%d warnings, want 3: %+v", got, logs.All())
	}
	send(2)
	send(2)
	send(9)
	if got := warnings(); got != 3 {
		t.Fatalf("repeats within the interval logged: %d warnings", got)
	}
	now = now.Add(round.VersionLogInterval)
	send(2)
	last := logs.All()[logs.Len()-1]
	if got := warnings(); got != 4 || fmt.Sprint(last.ContextMap()["wire_version"]) != "2" || fmt.Sprint(last.ContextMap()["refusals_not_logged"]) != "2" {
		t.Fatalf("after the interval: %d warnings, last %+v", got, last.ContextMap())
	}
	if last.Level != zapcore.WarnLevel {
		t.Fatalf("level %s", last.Level)
	}

	// A server admitting wire 2 serves it and names both versions to others.
	e2 := roundtest.New(t, func(o *roundtest.Options) { o.Round.MinWireVersion = 2 })
	_, err := e2.Round.Handle(context.Background(), e2.ID, body(t, e2.Req(), 4))
	if pub := syncerr.Public(err); pub == nil || !strings.Contains(pub.Message, "admits wire 2 and 3") {
		t.Fatalf("wire 4 to a wire-2 server: %v", err)
	}
	// (This service has no pull: getting that far means wire 2 decoded.)
	if _, err := e2.Round.Handle(context.Background(), e2.ID, body(t, e2.Req(), 2)); syncerr.CodeOf(err) != syncerr.InternalError {
		t.Fatalf("wire 2 to a wire-2 server: %v", err)
	}
	_, err = e2.Round.Handle(context.Background(), e2.ID, body(t, e2.Req(), 1))
	if pub := syncerr.Public(err); pub == nil || !strings.Contains(pub.Message, "admits wire 2 and 3; started with --min-wire-version 1") {
		t.Fatalf("wire 1 to a wire-2 server: %v", err)
	}

	// A server admitting wire 1 serves it and names all three to others.
	e1 := roundtest.New(t, func(o *roundtest.Options) { o.Round.MinWireVersion = 1 })
	_, err = e1.Round.Handle(context.Background(), e1.ID, body(t, e1.Req(), 4))
	if pub := syncerr.Public(err); pub == nil || !strings.Contains(pub.Message, "admits wire 1, 2 and 3") {
		t.Fatalf("wire 4 to a wire-1 server: %v", err)
	}
	if _, err := e1.Round.Handle(context.Background(), e1.ID, body(t, e1.Req(), 1)); syncerr.CodeOf(err) != syncerr.InternalError {
		t.Fatalf("wire 1 to a wire-1 server: %v", err)
	}
}

// body encodes a pull request at wire (a version the encoder does not
// know is patched into a wire-3 envelope).
func body(t *testing.T, r ssptest.Req, wire uint16) []byte {
	r.Pull, r.NoEpoch, r.Wire = true, wire < 2, min(wire, 3)
	b := r.Encode(t)
	binary.LittleEndian.PutUint16(b[4:], wire)
	return b
}
