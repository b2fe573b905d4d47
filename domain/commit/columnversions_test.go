package commit

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestEncodeColumnVersions(t *testing.T) {
	tests := []struct {
		name     string
		versions []int64
		want     []byte
	}{
		{"empty", nil, nil},
		{"all at one is NULL", []int64{1, 1, 1}, nil},
		{"zero and negative skipped", []int64{0, -3, 1}, nil},
		{"one column", []int64{1, 2, 1}, []byte{1, 2}},
		{"ascending ordinals", []int64{3, 1, 7}, []byte{0, 3, 2, 7}},
		{"multi-byte version", []int64{1, 300}, []byte{1, 0xac, 0x02}},
		{"multi-byte ordinal", append(make([]int64, 130), 2), []byte{0x82, 0x01, 2}},
		{"max int64", []int64{1<<63 - 1}, []byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EncodeColumnVersions(tt.versions)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("EncodeColumnVersions(%v) = %x, want %x", tt.versions, got, tt.want)
			}
			if tt.want == nil && got != nil {
				t.Fatalf("want nil blob, got empty non-nil")
			}
		})
	}
}

func TestEncodeColumnVersionPairs(t *testing.T) {
	got, err := EncodeColumnVersionPairs([]ColumnVersion{{2, 7}, {0, 3}, {1, 1}})
	if err != nil || !bytes.Equal(got, []byte{0, 3, 2, 7}) {
		t.Fatalf("got %x, %v", got, err)
	}
	if _, err := EncodeColumnVersionPairs([]ColumnVersion{{1, 2}, {1, 3}}); err == nil {
		t.Fatal("repeated ordinal accepted")
	}
	if _, err := EncodeColumnVersionPairs([]ColumnVersion{{-1, 2}}); err == nil {
		t.Fatal("negative ordinal accepted")
	}
}

func TestDecodeColumnVersions(t *testing.T) {
	tests := []struct {
		name    string
		blob    []byte
		want    []ColumnVersion
		corrupt bool
	}{
		{name: "nil", blob: nil},
		{name: "empty", blob: []byte{}},
		{name: "one pair", blob: []byte{1, 2}, want: []ColumnVersion{{1, 2}}},
		{name: "two pairs", blob: []byte{0, 3, 2, 7}, want: []ColumnVersion{{0, 3}, {2, 7}}},
		{name: "multi-byte", blob: []byte{0x82, 0x01, 0xac, 0x02}, want: []ColumnVersion{{130, 300}}},
		{name: "version one is corruption", blob: []byte{0, 1}, corrupt: true},
		{name: "version zero is corruption", blob: []byte{0, 0}, corrupt: true},
		{name: "repeated ordinal", blob: []byte{1, 2, 1, 3}, corrupt: true},
		{name: "descending ordinal", blob: []byte{2, 2, 1, 3}, corrupt: true},
		{name: "odd length", blob: []byte{1, 2, 3}, corrupt: true},
		{name: "truncated varint", blob: []byte{1, 0x80}, corrupt: true},
		{name: "overlong varint", blob: []byte{1, 0x82, 0x00}, corrupt: true},
		{name: "eleven-byte varint", blob: []byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, corrupt: true},
		{name: "version beyond int64", blob: []byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, corrupt: true},
		{name: "ordinal out of range", blob: []byte{0x80, 0x80, 0x80, 0x01, 2}, corrupt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeColumnVersions(tt.blob)
			if tt.corrupt {
				if !errors.Is(err, ErrCorruptColumnVersions) {
					t.Fatalf("err = %v, want corruption", err)
				}
				if syncerr.CodeOf(err) != syncerr.InternalError {
					t.Fatalf("code = %q", syncerr.CodeOf(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExpandColumnVersions(t *testing.T) {
	tests := []struct {
		name    string
		blob    []byte
		n       int
		version int64
		want    []int64
		corrupt bool
	}{
		{name: "NULL blob is every column at the row version", blob: nil, n: 3, version: 4, want: []int64{4, 4, 4}},
		{name: "empty blob is every column at one", blob: []byte{}, n: 2, version: 4, want: []int64{1, 1}},
		{name: "sparse", blob: []byte{2, 3}, n: 3, version: 3, want: []int64{1, 1, 3}},
		{name: "ordinal beyond table", blob: []byte{3, 2}, n: 3, version: 5, corrupt: true},
		{name: "version above row version", blob: []byte{0, 6}, n: 3, version: 5, corrupt: true},
		{name: "decode corruption", blob: []byte{0, 1}, n: 3, version: 5, corrupt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandColumnVersions(tt.blob, tt.n, tt.version)
			if tt.corrupt {
				if !errors.Is(err, ErrCorruptColumnVersions) {
					t.Fatalf("err = %v, want corruption", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestColumnVersionsRoundTrip(t *testing.T) {
	in := []int64{1, 9, 1, 1, 2, 1 << 40}
	blob := EncodeColumnVersions(in)
	got, err := ExpandColumnVersions(blob, len(in), 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, in) {
		t.Fatalf("round trip %v → %x → %v", in, blob, got)
	}
}

// FuzzDecodeColumnVersions checks that decoding never panics and that
// every accepted blob re-encodes to itself (the encoding is canonical).
func FuzzDecodeColumnVersions(f *testing.F) {
	for _, seed := range [][]byte{nil, {1, 2}, {0, 3, 2, 7}, {0x82, 0x01, 0xac, 0x02}, {0, 1}, {2, 2, 1, 3}, {1, 0x80}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, blob []byte) {
		pairs, err := DecodeColumnVersions(blob)
		if err != nil {
			if !errors.Is(err, ErrCorruptColumnVersions) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		re, err := EncodeColumnVersionPairs(pairs)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(re, blob) && !(len(re) == 0 && len(blob) == 0) {
			t.Fatalf("blob %x decodes to %v, re-encodes to %x", blob, pairs, re)
		}
	})
}

// TestEncodeRowColumnVersions: past its insert, a row whose columns are
// all at 1 stores an empty blob, which reads back as every column at 1;
// only a row at version 1 may store none (SPEC §2.2: no blob reads as
// every column at the row's version).
func TestEncodeRowColumnVersions(t *testing.T) {
	for _, tt := range []struct {
		name     string
		versions []int64
		row      int64
		want     []int64
		null     bool
	}{
		{"an insert stores none", []int64{1, 1, 1}, 1, []int64{1, 1, 1}, true},
		{"an upsert of the primary key alone", []int64{1, 1, 1}, 2, []int64{1, 1, 1}, false},
		{"a written column", []int64{1, 3, 1}, 3, []int64{1, 3, 1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			blob := EncodeRowColumnVersions(tt.versions, tt.row)
			if (blob == nil) != tt.null {
				t.Fatalf("blob %#v, want NULL %v", blob, tt.null)
			}
			got, err := ExpandColumnVersions(blob, len(tt.versions), tt.row)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("read back %v %v, want %v", got, err, tt.want)
			}
		})
	}
}
