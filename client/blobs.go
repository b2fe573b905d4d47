package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
)

// BlobRef is a blob reference (SPEC §5.9.1): what a blob_ref column holds.
type BlobRef struct {
	BlobID     string
	ByteLength int64
	MediaType  string // "" for none
	Name       string // "" for none
}

// JSON is the canonical BlobRef document: keys blobId, byteLength, then
// mediaType and name when set, no whitespace.
func (r BlobRef) JSON() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		BlobID     string `json:"blobId"`
		ByteLength int64  `json:"byteLength"`
		MediaType  string `json:"mediaType,omitempty"`
		Name       string `json:"name,omitempty"`
	}{r.BlobID, r.ByteLength, r.MediaType, r.Name})
	return strings.TrimSuffix(b.String(), "\n")
}

// Value is the reference as a blob_ref cell.
func (r BlobRef) Value() rowcodec.Value { return rowcodec.BlobRef(r.JSON()) }

// maxURLAnswerBytes bounds a JSON download answer read to tell a presigned
// URL from the bytes of a JSON blob.
const maxURLAnswerBytes = 64 << 10

func (c *Client) blobURL(blobID string) string { return c.o.BaseURL + "/blobs/" + blobID }

func (c *Client) authorize(req *http.Request) {
	for k, vs := range c.o.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
}

// UploadBlob uploads data (PUT <base>/blobs/{blobId}) and returns its
// reference. An already stored blob is a success.
func (c *Client) UploadBlob(ctx context.Context, data []byte, mediaType string) (BlobRef, error) {
	ref := BlobRef{BlobID: contentaddr.Of(data), ByteLength: int64(len(data)), MediaType: mediaType}
	return ref, c.putBlob(ctx, c.blobURL(ref.BlobID), true, bytes.NewReader(data), ref)
}

// UploadBlobFrom uploads the bytes of r from its current offset to its end
// without holding them: one pass computes the content address, a second
// streams them to the server.
func (c *Client) UploadBlobFrom(ctx context.Context, r io.ReadSeeker, mediaType string) (BlobRef, error) {
	ref, start, err := hashFrom(r)
	if err != nil {
		return BlobRef{}, err
	}
	ref.MediaType = mediaType
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return BlobRef{}, err
	}
	return ref, c.putBlob(ctx, c.blobURL(ref.BlobID), true, io.LimitReader(r, ref.ByteLength), ref)
}

// UploadBlobAs uploads the ref.ByteLength bytes of body, whose content
// address the caller computed already (ref.BlobID); the server verifies it.
func (c *Client) UploadBlobAs(ctx context.Context, ref BlobRef, body io.Reader) error {
	return c.putBlob(ctx, c.blobURL(ref.BlobID), true, io.LimitReader(body, ref.ByteLength), ref)
}

// BlobRefOf computes the reference of the bytes of r from its current
// offset to its end, and seeks back there.
func BlobRefOf(r io.ReadSeeker) (BlobRef, error) {
	ref, start, err := hashFrom(r)
	if err != nil {
		return BlobRef{}, err
	}
	_, err = r.Seek(start, io.SeekStart)
	return ref, err
}

// UploadBlobReader uploads everything r yields. The content address names
// the upload, so it must be known before the body is sent: r is copied to
// a temporary file while it is hashed (never into memory), then streamed
// from there. An io.ReadSeeker is not copied (see UploadBlobFrom).
func (c *Client) UploadBlobReader(ctx context.Context, r io.Reader, mediaType string) (BlobRef, error) {
	if rs, ok := r.(io.ReadSeeker); ok {
		return c.UploadBlobFrom(ctx, rs, mediaType)
	}
	f, err := os.CreateTemp("", "syncd-blob-*")
	if err != nil {
		return BlobRef{}, err
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	if _, err := io.Copy(f, r); err != nil {
		return BlobRef{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return BlobRef{}, err
	}
	return c.UploadBlobFrom(ctx, f, mediaType)
}

func hashFrom(r io.ReadSeeker) (BlobRef, int64, error) {
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return BlobRef{}, 0, err
	}
	h := contentaddr.NewHasher()
	n, err := io.Copy(h, r)
	if err != nil {
		return BlobRef{}, 0, err
	}
	return BlobRef{BlobID: h.Sum(), ByteLength: n}, start, nil
}

// putBlob PUTs a body of ref.ByteLength bytes, with host authentication
// to the server or without it to a presigned URL.
func (c *Client) putBlob(ctx context.Context, url string, hostAuth bool, body io.Reader, ref BlobRef) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, body)
	if err != nil {
		return err
	}
	req.ContentLength = ref.ByteLength
	if ref.ByteLength == 0 {
		req.Body = http.NoBody
	}
	if hostAuth {
		c.authorize(req)
	}
	if ref.MediaType != "" {
		req.Header.Set("Content-Type", ref.MediaType)
	} else {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	_, err = c.do(req, "PUT blob")
	if err == nil {
		c.stats.BlobUploads++
		c.stats.BlobUploadBytes += ref.ByteLength
	}
	return err
}

// Blob upload routes taken by UploadBlobWithGrant.
const (
	GrantURL     = "url"     // the bytes went to the presigned URL
	GrantPresent = "present" // the server had the blob: nothing was sent
	GrantNone    = "none"    // no grant: the bytes went through the server
)

// UploadBlobWithGrant asks for an upload grant first (SPEC §5.9.3): a
// stored blob is not sent again; with a presigned URL the bytes go there
// without host authentication; without one they go through the server.
// It returns how the upload went (GrantURL, GrantPresent or GrantNone).
// A failed presigned PUT is returned as is: it never falls back to the
// server under the grant.
func (c *Client) UploadBlobWithGrant(ctx context.Context, data []byte, mediaType string) (BlobRef, string, error) {
	ref := BlobRef{BlobID: contentaddr.Of(data), ByteLength: int64(len(data)), MediaType: mediaType}
	body, _ := json.Marshal(struct {
		ByteLength int64  `json:"byteLength"`
		MediaType  string `json:"mediaType,omitempty"`
	}{ref.ByteLength, mediaType})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.blobURL(ref.BlobID)+"/upload-grant", bytes.NewReader(body))
	if err != nil {
		return BlobRef{}, "", err
	}
	c.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	b, err := c.do(req, "POST upload-grant")
	if err != nil {
		return BlobRef{}, "", err
	}
	var g struct {
		URL         string `json:"url"`
		ExpiresAtMs int64  `json:"urlExpiresAtMs"`
		Present     bool   `json:"present"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return BlobRef{}, "", fmt.Errorf("client: upload-grant answer: %w", err)
	}
	switch {
	case g.Present:
		return ref, GrantPresent, nil
	case g.URL != "":
		if g.ExpiresAtMs != 0 && time.Now().UnixMilli() >= g.ExpiresAtMs {
			return BlobRef{}, GrantURL, &HTTPError{Code: "blob.forbidden", Message: "upload grant expired before the upload"}
		}
		return ref, GrantURL, c.putBlob(ctx, g.URL, false, bytes.NewReader(data), ref)
	default:
		return ref, GrantNone, c.putBlob(ctx, c.blobURL(ref.BlobID), true, bytes.NewReader(data), ref)
	}
}

// DownloadBlob downloads a blob the client may see and verifies its
// content address (SPEC §5.9.5): the bytes, or, when the server answers a
// presigned URL, the bytes fetched from it without host authentication.
func (c *Client) DownloadBlob(ctx context.Context, blobID string) ([]byte, error) {
	var b bytes.Buffer
	if _, err := c.DownloadBlobTo(ctx, blobID, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrBlobMismatch is a download whose bytes are not the blob's.
var ErrBlobMismatch = errors.New("client: downloaded bytes do not match the blob id")

// DownloadBlobTo is DownloadBlob streaming the bytes to w, hashed as they
// pass; on a content-address mismatch w has received bytes that are not
// the blob's and ErrBlobMismatch is returned.
func (c *Client) DownloadBlobTo(ctx context.Context, blobID string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.blobURL(blobID), nil)
	if err != nil {
		return 0, err
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("client: GET blob: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxURLAnswerBytes))
		return 0, httpError(resp.StatusCode, b)
	}
	c.stats.BlobDownloads++
	body := io.Reader(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// A presigned URL answer, or a blob whose bytes are JSON: only
		// the blob's own bytes hash to its id.
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxURLAnswerBytes+1))
		if err != nil {
			return 0, err
		}
		var u struct {
			URL         string `json:"url"`
			ExpiresAtMs int64  `json:"urlExpiresAtMs"`
		}
		if len(b) <= maxURLAnswerBytes && contentaddr.Of(b) != blobID && json.Unmarshal(b, &u) == nil && u.URL != "" {
			return c.fetchBlobURL(ctx, blobID, u.URL, u.ExpiresAtMs, w)
		}
		body = io.MultiReader(bytes.NewReader(b), resp.Body)
	}
	return copyVerified(w, body, blobID)
}

// fetchBlobURL fetches a presigned download URL: no host authentication,
// never at or past its expiry, and a failure is final for this answer
// (the caller asks the server again for a fresh URL).
func (c *Client) fetchBlobURL(ctx context.Context, blobID, url string, expiresAtMs int64, w io.Writer) (int64, error) {
	if expiresAtMs != 0 && time.Now().UnixMilli() >= expiresAtMs {
		return 0, &HTTPError{Code: "blob.forbidden", Message: "presigned url expired before the fetch"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("client: GET presigned blob url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxURLAnswerBytes))
		return 0, httpError(resp.StatusCode, b)
	}
	c.stats.BlobURLFetches++
	return copyVerified(w, resp.Body, blobID)
}

func copyVerified(w io.Writer, r io.Reader, blobID string) (int64, error) {
	h := contentaddr.NewHasher()
	n, err := io.Copy(io.MultiWriter(w, h), r)
	if err != nil {
		return n, err
	}
	if h.Sum() != blobID {
		return n, ErrBlobMismatch
	}
	return n, nil
}

// DownloadBlobRange downloads bytes [offset, offset+length) of a blob
// served directly (HTTP 206); it cannot verify the content address of a
// part.
func (c *Client) DownloadBlobRange(ctx context.Context, blobID string, offset, length int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.blobURL(blobID), nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-"+strconv.FormatInt(offset+length-1, 10))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: GET blob range: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusPartialContent {
		if resp.StatusCode == http.StatusOK {
			return nil, fmt.Errorf("client: blob range answered 200, not 206")
		}
		return nil, httpError(resp.StatusCode, b)
	}
	return b, nil
}
