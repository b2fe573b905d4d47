package rowcodec

import (
	"errors"
	"math"
	"strings"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/domain/wire"
)

var blobRefKeys = [...]string{"blobId", "byteLength", "mediaType", "name"}

// BlobRefDoc is a parsed canonical BlobRef (§5.9.1).
type BlobRefDoc struct {
	BlobID     string
	ByteLength int64
	MediaType  string // "" when absent
	Name       string // "" when absent
	HasMedia   bool
	HasName    bool
}

// CheckBlobRef validates a blob_ref value against the §5.9.1 shape: a JSON
// object with exactly the keys blobId ("sha256:" + 64 lowercase hex),
// byteLength (non-negative safe integer), optional string mediaType and
// name, in that key order.
func CheckBlobRef(raw []byte) error {
	_, err := ParseBlobRef(raw)
	return err
}

// ParseBlobRef validates and parses a blob_ref value.
func ParseBlobRef(raw []byte) (BlobRefDoc, error) {
	var d BlobRefDoc
	v, err := canonjson.Parse(raw)
	if err != nil {
		return d, wire.Errorf("blob_ref value does not parse as a JSON document")
	}
	o, ok := v.(*canonjson.Object)
	if !ok {
		return d, wire.Errorf("blob_ref value must be a JSON object")
	}
	keys := o.Keys()
	next, ordered := 0, true
	for _, k := range keys {
		pos := -1
		for i, want := range blobRefKeys {
			if k == want {
				pos = i
			}
		}
		if pos < 0 {
			return d, wire.Errorf("blob_ref has unknown key %q", k)
		}
		if pos < next {
			ordered = false // reported after the shape checks, as the reference does
		}
		next = pos + 1
	}
	id, _ := o.Get("blobId")
	s, ok := id.(string)
	if !ok || !isBlobID(s) {
		return d, wire.Errorf(`blob_ref.blobId must be "sha256:<64 lowercase hex>"`)
	}
	d.BlobID = s
	bl, _ := o.Get("byteLength")
	f, ok := bl.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > wire.MaxSafeInt || f < 0 {
		return d, wire.Errorf("blob_ref.byteLength must be a non-negative safe integer")
	}
	d.ByteLength = int64(f)
	if mv, has := o.Get("mediaType"); has {
		s, ok := mv.(string)
		if !ok {
			return d, wire.Errorf("blob_ref.mediaType must be a string when present")
		}
		d.MediaType, d.HasMedia = s, true
	}
	if nv, has := o.Get("name"); has {
		s, ok := nv.(string)
		if !ok {
			return d, wire.Errorf("blob_ref.name must be a string when present")
		}
		d.Name, d.HasName = s, true
	}
	if !ordered {
		return d, wire.Errorf("blob_ref keys are not in canonical order")
	}
	return d, nil
}

func isBlobID(s string) bool {
	if len(s) != 71 || !strings.HasPrefix(s, "sha256:") {
		return false
	}
	for i := 7; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func reasonOf(err error) string {
	var e *syncerr.Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return err.Error()
}
