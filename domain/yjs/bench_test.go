package yjs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
)

// The fixtures (testdata/bench, written by test/yjsdiff/fixtures.mjs with
// yjs) are documents of about 1 KB and 100 KB grown by three clients
// typing, deleting and formatting, with a keystroke and a pasted
// paragraph to merge into each.

func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	f, err := os.Open("testdata/bench/" + name + ".bin.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestBenchFixturesMergeAsTheReference(t *testing.T) {
	raw, err := os.ReadFile("testdata/bench/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for name, sum := range want {
		size, _, _ := bytes.Cut([]byte(name), []byte("-"))
		out, err := Merge(fixture(t, string(size)+"-stored"), fixture(t, name), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := sha256.Sum256(out); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: merged state differs from the reference's", name)
		}
	}
}

// copyOf renumbers a document's clients and renames its top-level types,
// so that copies of it can share one document.
func copyOf(tb testing.TB, u []byte, k uint64) []byte {
	tb.Helper()
	up, err := readUpdate(u, nil, readLazy, newBudget(Limits{}))
	if err != nil {
		tb.Fatal(err)
	}
	shift := func(id ID) ID { return ID{id.Client + k*100_000, id.Clock} }
	for i := range up.blocks {
		b := &up.blocks[i]
		b.client += k * 100_000
		for _, s := range b.structs {
			s.id = shift(s.id)
			s.origin, s.rightOrigin = shift(s.origin), shift(s.rightOrigin)
			switch s.parent.kind {
			case parentID:
				s.parent.id = shift(s.parent.id)
			case parentName:
				s.parent.name = fmt.Sprintf("%s%d", s.parent.name, k)
			}
		}
	}
	var e encoder
	if err := e.writeBlocks(up.blocks); err != nil {
		tb.Fatal(err)
	}
	ds := toDeleteSet(up.ds)
	shifted := newDeleteSet()
	for _, c := range ds.order {
		for _, it := range ds.m[c] {
			shifted.add(c+k*100_000, it.clock, it.len)
		}
	}
	e.deleteSet(shifted)
	return e.buf
}

// benchDocument returns a stored state and its incoming updates: the 1 MB
// document is ten renumbered copies of the 100 KB one.
func benchDocument(tb testing.TB, size string) (stored []byte, incoming map[string][]byte) {
	tb.Helper()
	src := size
	if size == "1m" {
		src = "100k"
	}
	stored = fixture(tb, src+"-stored")
	if size == "1m" {
		base := stored
		stored = nil
		for k := range uint64(10) {
			var err error
			if stored, err = Merge(stored, copyOf(tb, base, k), Limits{}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	incoming = map[string][]byte{"keystroke": fixture(tb, src+"-keystroke"), "paste": fixture(tb, src+"-paste")}
	// A client's whole state after a keystroke, as the upstream column
	// helper pushes it.
	state, err := Merge(stored, incoming["keystroke"], Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	incoming["state"] = state
	return stored, incoming
}

// BenchmarkMerge merges typical incoming updates into documents of about
// 1 KB, 100 KB and 1 MB: a keystroke, a pasted paragraph, a whole state.
func BenchmarkMerge(b *testing.B) {
	for _, size := range []string{"1k", "100k", "1m"} {
		stored, incoming := benchDocument(b, size)
		for _, kind := range []string{"keystroke", "paste", "state"} {
			in := incoming[kind]
			b.Run(fmt.Sprintf("%s(%dB)/%s(%dB)", size, len(stored), kind, len(in)), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(stored) + len(in)))
				for b.Loop() {
					if _, err := Merge(stored, in, Limits{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
