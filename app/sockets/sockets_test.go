package sockets_test

import (
	"testing"

	"github.com/syncd-dev/syncd/app/sockets"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// TestSlots: the node cap and the per-actor cap hold for every socket
// that takes a slot, an actor is named within its partition, and a
// released slot is taken again.
func TestSlots(t *testing.T) {
	s, err := sockets.New(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	alice := ports.Identity{Partition: "p", ActorID: "alice"}
	steps := []struct {
		name string
		id   ports.Identity
		want syncerr.Code
	}{
		{"alice's first socket", alice, ""},
		{"alice's second socket", alice, ""},
		{"alice's third socket passes her cap", alice, syncerr.WebsocketLimit},
		{"alice of another partition is another actor", ports.Identity{Partition: "q", ActorID: "alice"}, ""},
		{"a fourth socket passes the node's cap", ports.Identity{Partition: "p", ActorID: "bob"}, syncerr.WebsocketLimit},
	}
	for _, st := range steps {
		if got := syncerr.CodeOf(s.Take(st.id)); got != st.want {
			t.Fatalf("%s: %q, want %q", st.name, got, st.want)
		}
	}
	if s.Open() != 3 {
		t.Fatalf("%d slots taken, want 3", s.Open())
	}
	s.Release(alice)
	if err := s.Take(alice); err != nil {
		t.Fatalf("a released slot: %v", err)
	}
	if _, err := sockets.New(-1, 0); err == nil {
		t.Fatal("a negative cap was accepted")
	}
	unbounded, _ := sockets.New(0, 0)
	for range 100 {
		if err := unbounded.Take(alice); err != nil {
			t.Fatal(err)
		}
	}
}
