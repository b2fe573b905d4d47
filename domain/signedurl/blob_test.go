package signedurl

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

const blobID = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

func TestBlobPayloads(t *testing.T) {
	// A download token's payload is the spec's; an upload's adds op and len.
	if got, want := string(blobPayload(BlobGrant{Op: BlobGet, Blob: blobID}, "AUD", 1700000000)),
		`{"v":1,"blob":"`+blobID+`","aud":"AUD","exp":1700000000}`; got != want {
		t.Fatalf("get payload %s, want %s", got, want)
	}
	if got, want := string(blobPayload(BlobGrant{Op: BlobPut, Blob: blobID, ByteLength: 42}, "AUD", 1700000000)),
		`{"v":1,"op":"put","blob":"`+blobID+`","len":42,"aud":"AUD","exp":1700000000}`; got != want {
		t.Fatalf("put payload %s, want %s", got, want)
	}
	if got, want := string(blobPayload(BlobGrant{Op: BlobPut, Blob: blobID, ByteLength: 42, MediaType: "image/png"}, "AUD", 1700000000)),
		`{"v":1,"op":"put","blob":"`+blobID+`","len":42,"type":"image/png","aud":"AUD","exp":1700000000}`; got != want {
		t.Fatalf("put payload %s, want %s", got, want)
	}
}

func TestSealedAudience(t *testing.T) {
	s, _ := NewSigner(key)
	other := mustSigner(t, strings.Repeat("o", 32))
	a1, a2 := s.SealPartition("tenant-1"), s.SealPartition("tenant-2")
	if a1 != s.SealPartition("tenant-1") || a1 == a2 {
		t.Fatal("audience not stable and distinct per partition")
	}
	if strings.Contains(a1, "tenant") || strings.ContainsAny(a1, "+/=") {
		t.Fatalf("audience %q shows the partition or is not unpadded base64url", a1)
	}
	if p, err := s.OpenPartition(a1); err != nil || p != "tenant-1" {
		t.Fatalf("OpenPartition = %q %v", p, err)
	}
	if _, err := other.OpenPartition(a1); !errors.Is(err, ErrAudience) {
		t.Fatalf("another key opened the audience: %v", err)
	}
	b, _ := base64.RawURLEncoding.DecodeString(a1)
	b[len(b)-1] ^= 1
	if _, err := s.OpenPartition(base64.RawURLEncoding.EncodeToString(b)); !errors.Is(err, ErrAudience) {
		t.Fatalf("altered audience opened: %v", err)
	}
	if _, err := s.OpenPartition("short"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short audience: %v", err)
	}
}

func TestBlobURLs(t *testing.T) {
	s, _ := NewSigner(key)
	now := time.Unix(10_000, 250e6)
	getQ, getExp := s.MintBlob(BlobGrant{Op: BlobGet, Blob: blobID, Partition: "p1"}, now, 5*time.Minute)
	putQ, putExp := s.MintBlob(BlobGrant{Op: BlobPut, Blob: blobID, ByteLength: 42, MediaType: "text/plain", Partition: "p1"}, now, time.Hour)
	if getExp != 10_300_000 || putExp != (10_000+900)*1000 {
		t.Fatalf("expiries %d %d: want 5 minutes and the 15-minute cap", getExp, putExp)
	}
	if !strings.HasPrefix(getQ, "op=get&aud=") || !strings.HasPrefix(putQ, "op=put&len=42&type=text%2Fplain&aud=") {
		t.Fatalf("queries %s and %s are not in the documented order", getQ, putQ)
	}
	get, put := parseQuery(t, getQ), parseQuery(t, putQ)
	if _, born := s.MintBlob(BlobGrant{Op: BlobGet, Blob: blobID, Partition: "p1"}, now, 0); born != 10_000_000 {
		t.Fatalf("ttl 0 expires at %d, want now", born)
	}
	with := func(q url.Values, k, v string) url.Values {
		c := url.Values{}
		for kk, vv := range q {
			c[kk] = append([]string(nil), vv...)
		}
		if v == "" {
			c.Del(k)
		} else {
			c.Set(k, v)
		}
		return c
	}
	other := mustSigner(t, strings.Repeat("z", 32))
	foreignQ, _ := other.MintBlob(BlobGrant{Op: BlobGet, Blob: blobID, Partition: "p1"}, now, time.Minute)
	foreign := parseQuery(t, foreignQ)
	for _, tc := range []struct {
		name string
		blob string
		q    url.Values
		now  time.Time
		want error
		op   BlobOp
		n    int64
		mt   string
	}{
		{name: "get", blob: blobID, q: get, now: now, op: BlobGet},
		{name: "put", blob: blobID, q: put, now: now, op: BlobPut, n: 42, mt: "text/plain"},
		{name: "put of another media type", blob: blobID, q: with(put, ParamType, "image/png"), now: now, want: ErrSignature},
		{name: "put without its media type", blob: blobID, q: with(put, ParamType, ""), now: now, want: ErrSignature},
		{name: "get within skew", blob: blobID, q: get, now: time.Unix(10_360, 0), op: BlobGet},
		{name: "get past skew", blob: blobID, q: get, now: time.Unix(10_361, 0), want: ErrExpired},
		{name: "another blob", blob: strings.Replace(blobID, "1", "2", 1), q: get, now: now, want: ErrSignature},
		{name: "get used to put", blob: blobID, q: with(with(get, ParamOp, "put"), ParamLength, "0"), now: now, want: ErrSignature},
		{name: "put used to get", blob: blobID, q: with(with(with(put, ParamOp, "get"), ParamLength, ""), ParamType, ""), now: now, want: ErrSignature},
		{name: "get with a media type", blob: blobID, q: with(get, ParamType, "x/y"), now: now, want: ErrMalformed},
		{name: "put of another length", blob: blobID, q: with(put, ParamLength, "43"), now: now, want: ErrSignature},
		{name: "extended expiry", blob: blobID, q: with(get, ParamExpires, "99999"), now: now, want: ErrSignature},
		{name: "another partition", blob: blobID, q: with(get, ParamAudience, s.SealPartition("p2")), now: now, want: ErrSignature},
		{name: "foreign key", blob: blobID, q: foreign, now: now, want: ErrSignature},
		{name: "no signature", blob: blobID, q: with(get, ParamSig, ""), now: now, want: ErrMalformed},
		{name: "unknown op", blob: blobID, q: with(get, ParamOp, "delete"), now: now, want: ErrMalformed},
		{name: "put without length", blob: blobID, q: with(put, ParamLength, ""), now: now, want: ErrMalformed},
		{name: "negative length", blob: blobID, q: with(put, ParamLength, "-1"), now: now, want: ErrMalformed},
		{name: "padded length", blob: blobID, q: with(put, ParamLength, "042"), now: now, want: ErrMalformed},
		{name: "get with a length", blob: blobID, q: with(get, ParamLength, "1"), now: now, want: ErrMalformed},
		{name: "bad expiry", blob: blobID, q: with(get, ParamExpires, "soon"), now: now, want: ErrMalformed},
		{name: "repeated parameter", blob: blobID, q: func() url.Values { c := with(get, ParamOp, "get"); c.Add(ParamOp, "get"); return c }(), now: now, want: ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := s.VerifyBlob(tc.blob, tc.q, tc.now)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Op != tc.op || g.Blob != tc.blob || g.ByteLength != tc.n || g.MediaType != tc.mt || g.Partition != "p1" || g.Expires == 0 {
				t.Fatalf("grant %+v", g)
			}
		})
	}
}

func parseQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
