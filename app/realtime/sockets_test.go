package realtime_test

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/app/sockets"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// TestSocketSlotsShared: with the node's socket slots given, a realtime
// socket counts against the same caps as the other socket kinds (an
// operation watch socket holding alice's slot refuses her realtime
// socket), and a closed session gives its slot back.
func TestSocketSlotsShared(t *testing.T) {
	slots, err := sockets.New(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, realtime.Options{Sockets: slots})
	alice := ports.Identity{Partition: "p", ActorID: "alice"}
	if err := slots.Take(alice); err != nil { // her watch socket
		t.Fatal(err)
	}
	if _, err := f.hub.Admit(context.Background(), alice, "b"); syncerr.CodeOf(err) != syncerr.WebsocketLimit {
		t.Fatalf("alice's realtime socket past her cap: %v", err)
	}
	slots.Release(alice)
	adm, err := f.hub.Admit(context.Background(), alice, "b")
	if err != nil {
		t.Fatal(err)
	}
	if slots.Open() != 1 {
		t.Fatalf("%d slots taken, want 1", slots.Open())
	}
	adm.Abort()
	if slots.Open() != 0 {
		t.Fatalf("%d slots taken after the abort, want 0", slots.Open())
	}
}
