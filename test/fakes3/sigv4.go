package fakes3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The SigV4 names the verifier reads.
const (
	algorithm     = "AWS4-HMAC-SHA256"
	unsigned      = "UNSIGNED-PAYLOAD"
	timeFormat    = "20060102T150405Z"
	maxClockSkew  = 15 * time.Minute
	maxPresignTTL = 7 * 24 * time.Hour
)

// signedRequest is what a request says about its own signature.
type signedRequest struct {
	presigned     bool
	accessKey     string
	scope         string // date/region/service/aws4_request
	signedHeaders []string
	signature     string
	date          time.Time
	payloadHash   string
	expires       time.Duration // presigned only
}

// verify checks r's SigV4 signature (an Authorization header or a
// presigned URL) the way S3 does: the credential and its scope, the
// time, and the signature recomputed over the request as it arrived
// (method, path, query, the signed headers with their values, the
// Content-Length when it is signed, and the payload hash) with the AWS
// SDK's own signer. A body whose declared SHA-256 is not its hash is
// refused too. It returns the S3 error code and message of a refusal.
func (s *Server) verify(r *http.Request) (code, msg string) {
	sr, err := parseSignature(r)
	if err != nil {
		return "AccessDenied", err.Error()
	}
	if sr.accessKey != AccessKeyID {
		return "InvalidAccessKeyId", "the access key is not the server's"
	}
	wantScope := sr.date.Format("20060102") + "/" + Region + "/s3/aws4_request"
	if sr.scope != wantScope {
		return "SignatureDoesNotMatch", fmt.Sprintf("credential scope %s, want %s", sr.scope, wantScope)
	}
	now := s.now()
	if sr.presigned {
		if now.Before(sr.date.Add(-maxClockSkew)) {
			return "AccessDenied", "request is not valid yet"
		}
		if now.After(sr.date.Add(sr.expires)) {
			return "AccessDenied", "request has expired"
		}
	} else if d := now.Sub(sr.date); d > maxClockSkew || d < -maxClockSkew {
		return "RequestTimeTooSkewed", "request time too far from the server's"
	}
	if err := checkPayload(r, sr.payloadHash); err != nil {
		return "XAmzContentSHA256Mismatch", err.Error()
	}
	got, err := resign(r, sr)
	if err != nil {
		return "AccessDenied", err.Error()
	}
	if got != sr.signature {
		return "SignatureDoesNotMatch", "the request signature does not match the one computed over the request"
	}
	return "", ""
}

func parseSignature(r *http.Request) (signedRequest, error) {
	q := r.URL.Query()
	var sr signedRequest
	var cred, signed, date string
	switch {
	case q.Get("X-Amz-Algorithm") != "":
		if q.Get("X-Amz-Algorithm") != algorithm {
			return sr, fmt.Errorf("algorithm %q", q.Get("X-Amz-Algorithm"))
		}
		sr.presigned = true
		cred, signed, date, sr.signature = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Date"), q.Get("X-Amz-Signature")
		secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
		if err != nil || secs <= 0 || time.Duration(secs)*time.Second > maxPresignTTL {
			return sr, fmt.Errorf("X-Amz-Expires %q", q.Get("X-Amz-Expires"))
		}
		sr.expires = time.Duration(secs) * time.Second
		sr.payloadHash = unsigned
	case strings.HasPrefix(r.Header.Get("Authorization"), algorithm+" "):
		for part := range strings.SplitSeq(strings.TrimPrefix(r.Header.Get("Authorization"), algorithm+" "), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "Credential":
				cred = v
			case "SignedHeaders":
				signed = v
			case "Signature":
				sr.signature = v
			}
		}
		date = r.Header.Get("X-Amz-Date")
		sr.payloadHash = r.Header.Get("X-Amz-Content-Sha256")
		if sr.payloadHash == "" {
			return sr, fmt.Errorf("no X-Amz-Content-Sha256 header")
		}
	default:
		return sr, fmt.Errorf("the request is not signed")
	}
	var ok bool
	if sr.accessKey, sr.scope, ok = strings.Cut(cred, "/"); !ok || signed == "" || sr.signature == "" {
		return sr, fmt.Errorf("incomplete signature: credential %q, signed headers %q", cred, signed)
	}
	sr.signedHeaders = strings.Split(signed, ";")
	t, err := time.Parse(timeFormat, date)
	if err != nil {
		return sr, fmt.Errorf("X-Amz-Date %q", date)
	}
	sr.date = t
	return sr, nil
}

// checkPayload refuses a body whose declared hash is not its SHA-256;
// the body is kept for the handler.
func checkPayload(r *http.Request, declared string) error {
	if declared == unsigned || strings.HasPrefix(declared, "STREAMING-") {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != declared {
		return fmt.Errorf("the body's SHA-256 is not the declared %s", declared)
	}
	return nil
}

// resign signs a copy of r holding only what the signature says it
// covers, with the server's credentials and the request's own time,
// and returns that signature.
func resign(r *http.Request, sr signedRequest) (string, error) {
	u, err := url.Parse("http://" + r.Host + r.RequestURI)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Del("X-Amz-Signature")
	u.RawQuery = q.Encode()
	c := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	if slices.Contains(sr.signedHeaders, "content-length") {
		// The SDK signs the length it is given: the request must carry
		// exactly that many bytes.
		c.ContentLength = r.ContentLength
	}
	for _, h := range sr.signedHeaders {
		if h == "host" || h == "content-length" {
			continue
		}
		vs, ok := r.Header[http.CanonicalHeaderKey(h)]
		if !ok {
			return "", fmt.Errorf("signed header %s is not in the request", h)
		}
		c.Header[http.CanonicalHeaderKey(h)] = vs
	}
	creds := aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
	signer := v4.NewSigner(func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = true // S3 signs the path as sent
		o.DisableHeaderHoisting = true  // the headers arrived as headers
	})
	ctx := context.Background()
	if sr.presigned {
		signedURL, _, err := signer.PresignHTTP(ctx, creds, c, unsigned, "s3", Region, sr.date)
		if err != nil {
			return "", err
		}
		su, err := url.Parse(signedURL)
		if err != nil {
			return "", err
		}
		if got := su.Query().Get("X-Amz-SignedHeaders"); got != strings.Join(sr.signedHeaders, ";") {
			return "", fmt.Errorf("the request carries headers %s, the signature covers %s", got, strings.Join(sr.signedHeaders, ";"))
		}
		return su.Query().Get("X-Amz-Signature"), nil
	}
	if err := signer.SignHTTP(ctx, creds, c, sr.payloadHash, "s3", Region, sr.date); err != nil {
		return "", err
	}
	auth := c.Header.Get("Authorization")
	if !strings.Contains(auth, "SignedHeaders="+strings.Join(sr.signedHeaders, ";")+",") {
		return "", fmt.Errorf("the request carries headers of %s, the signature covers %s", auth, strings.Join(sr.signedHeaders, ";"))
	}
	_, sig, _ := strings.Cut(auth, "Signature=")
	return sig, nil
}

// refuse writes an S3 error document.
func refuse(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	status := http.StatusForbidden
	if code == "XAmzContentSHA256Mismatch" {
		status = http.StatusBadRequest
	}
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
