package httpapi

import (
	"context"
	"time"

	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/ports"
)

// SegmentURLs mints the native signed URLs (SPEC §5.4) of the segment
// route under a public base URL: the token goes in ParamSignedToken, where
// SegmentEndpoint looks for it.
type SegmentURLs struct {
	signer *signedurl.Signer
	base   string
	ttl    time.Duration
}

// NewSegmentURLs returns the minter of URLs under base (the sync API's
// public URL, mount included), valid for ttl.
func NewSegmentURLs(s *signedurl.Signer, base string, ttl time.Duration) *SegmentURLs {
	return &SegmentURLs{signer: s, base: base, ttl: ttl}
}

var _ ports.SegmentURLSigner = (*SegmentURLs)(nil)

// SignSegmentURL returns the signed URL of r's segment for its effective
// scope digest in its partition at r.NowMs, and its expiry in unix
// milliseconds.
func (u *SegmentURLs) SignSegmentURL(_ context.Context, r ports.SegmentURLRequest) (string, int64, error) {
	tok, exp := u.signer.Mint(r.SegmentID, r.ScopeDigest, r.Partition, time.UnixMilli(r.NowMs), u.ttl)
	return u.base + "/segments/" + r.SegmentID + "?" + ParamSignedToken + "=" + tok, exp, nil
}
