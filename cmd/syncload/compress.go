package main

import (
	"compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// decompressor returns a reader undoing a Content-Encoding, or nil for
// identity.
func decompressor(encoding string, r io.Reader) (io.ReadCloser, error) {
	switch encoding {
	case "", "identity":
		return nil, nil
	case "gzip":
		return gzip.NewReader(r)
	case "zstd":
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return nil, fmt.Errorf("unsupported Content-Encoding %q", encoding)
}
