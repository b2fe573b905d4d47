package yjsdoc_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/syncd-dev/syncd/adapters/crdt/yjsdoc"
	"github.com/syncd-dev/syncd/domain/yjs"
)

func TestMergerMergesYjsUpdates(t *testing.T) {
	m := yjsdoc.New(yjsdoc.Options{})
	if m.Type() != "yjs-doc" {
		t.Fatalf("type %q", m.Type())
	}
	// Client 1 writes "ab" into text "t"; client 2 inserts "x" after "a".
	ab, _ := hex.DecodeString("010101000401017402616200")
	x, _ := hex.DecodeString("01010200840100017800")
	got, err := m.Merge(ab, x)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := hex.DecodeString("0201020084010001780101000401017402616200"); !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
	if _, err := m.Merge(ab, []byte{0xff}); err == nil {
		t.Fatal("garbage merged")
	}
}

func TestMergerHonoursItsLimits(t *testing.T) {
	ab, _ := hex.DecodeString("010101000401017402616200")
	m := yjsdoc.New(yjsdoc.Options{Limits: yjs.Limits{MaxUpdateBytes: 4}})
	if _, err := m.Merge(nil, ab); err == nil {
		t.Fatal("an update above the size bound merged")
	}
}
