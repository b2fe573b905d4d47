package testcontrol

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"sort"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/adapters/auth/granttable"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/retention"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// call is one control method invocation.
type call struct {
	m    *Manager
	in   *instance
	args []json.RawMessage
}

// arg decodes argument i into v; a missing argument is an error unless
// optional (then v is left as is).
func (c *call) arg(i int, v any, optional bool) error {
	if i >= len(c.args) || isNull(c.args[i]) {
		if optional {
			return nil
		}
		return fmt.Errorf("argument %d is required", i+1)
	}
	if err := json.Unmarshal(c.args[i], v); err != nil {
		return fmt.Errorf("argument %d: %w", i+1, err)
	}
	return nil
}

type method func(ctx context.Context, c *call) (any, error)

// methods are the control methods this build implements: those whose
// feature exists.
var methods = map[string]method{
	"setAllowedScopes":          setAllowedScopes,
	"setResolverFailing":        setResolverFailing,
	"setResolverOutage":         setResolverOutage,
	"revokeLease":               revokeLease,
	"readRows":                  readRows,
	"getMaxCommitSeq":           getMaxCommitSeq,
	"getHorizonSeq":             getHorizonSeq,
	"advanceClock":              advanceClock,
	"nowMs":                     nowMs,
	"prune":                     prune,
	"failNextIdempotencyLookup": failNextIdempotencyLookup,
	"captureBackup":             captureBackup,
	"restoreBackup":             restoreBackup,
	"setSignedUrlTtlSeconds":    setSignedURLTTL,
	"fetchSegmentUrl":           fetchSegmentURL,
	"uploadBlob":                uploadBlob,
	"downloadBlob":              downloadBlob,
	"fetchBlobUrl":              fetchBlobURL,
	"uploadBlobGrant":           uploadBlobGrant,
	"putBlobUrl":                putBlobURL,
	"setBlobPresign":            setBlobPresign,
	"installValidators":         installValidators,
	"installCommitValidator":    installCommitValidator,
}

func methodNames() []string {
	names := make([]string, 0, len(methods))
	for n := range methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func setAllowedScopes(_ context.Context, c *call) (any, error) {
	var actor string
	var allowed scopes.Allowed
	if err := c.arg(0, &actor, false); err != nil {
		return nil, err
	}
	if err := c.arg(1, &allowed, false); err != nil {
		return nil, err
	}
	c.in.grants.Set(actor, allowed)
	return nil, nil
}

func setResolverFailing(_ context.Context, c *call) (any, error) {
	var failing bool
	if err := c.arg(0, &failing, false); err != nil {
		return nil, err
	}
	c.in.grants.SetFailing(failing)
	return nil, nil
}

// setResolverOutage puts the resolver into a live-authorization outage
// (SPEC §7.3.3): rounds are authorized against the stored lease, or fail
// with sync.auth_lease_required.
func setResolverOutage(_ context.Context, c *call) (any, error) {
	var outage bool
	if err := c.arg(0, &outage, false); err != nil {
		return nil, err
	}
	c.in.grants.SetOutage(outage)
	return nil, nil
}

// revokeLease revokes a lease of the instance partition (SPEC §7.3.4).
func revokeLease(ctx context.Context, c *call) (any, error) {
	var id string
	if err := c.arg(0, &id, false); err != nil {
		return nil, err
	}
	if c.in.leases == nil {
		return nil, errors.New("auth leases are off on this instance (create it with leases)")
	}
	_, err := c.in.leases.Revoke(ctx, c.in.spec.partition, id)
	return nil, err
}

// rowState is one stored row as readRows reports it.
type rowState struct {
	RowID   string            `json:"rowId"`
	Version int64             `json:"version"`
	Values  map[string]any    `json:"values"`
	Scopes  map[string]string `json:"scopes"`
}

// readRows lists every stored row of a table in the instance partition,
// ordered by row id in byte order, fully decoded.
func readRows(ctx context.Context, c *call) (any, error) {
	var table string
	if err := c.arg(0, &table, false); err != nil {
		return nil, err
	}
	t := c.in.spec.schema.Table(table)
	if t == nil {
		return nil, fmt.Errorf("unknown table %q", table)
	}
	in := c.in
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.closed {
		return nil, errors.New("instance closed")
	}
	// Table names are checked identifiers (no quotes) by the schema compiler.
	rows, err := in.live.store.ReadDB().QueryContext(ctx, `SELECT "_sync_row_id", "_sync_server_version", "_sync_scopes", "_sync_payload" FROM "`+
		t.Name+`" WHERE "_sync_partition" = ? ORDER BY "_sync_row_id"`, in.spec.partition)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	codec := rowcodec.New(t)
	out := []rowState{}
	for rows.Next() {
		var rs rowState
		var scopesJSON string
		var payload []byte
		if err := rows.Scan(&rs.RowID, &rs.Version, &scopesJSON, &payload); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(scopesJSON), &rs.Scopes); err != nil {
			return nil, fmt.Errorf("row %s: stored scopes: %w", rs.RowID, err)
		}
		vals, err := codec.DecodeRow(payload, nil)
		if err != nil {
			return nil, fmt.Errorf("row %s: payload: %w", rs.RowID, err)
		}
		rs.Values = driverValues(t, vals)
		out = append(out, rs)
	}
	return out, rows.Err()
}

// driverValues renders a decoded row the way the harness compares rows:
// bytes and crdt as {"$bytes": hex}, json columns as their raw text.
func driverValues(t *schema.Table, vals []rowcodec.Value) map[string]any {
	m := make(map[string]any, len(t.Columns))
	for i, col := range t.Columns {
		v := vals[i]
		switch {
		case v.IsNull() || v.IsAbsent():
			m[col.Name] = nil
		case col.Type == schema.TypeInteger:
			m[col.Name] = v.Int()
		case col.Type == schema.TypeFloat:
			m[col.Name] = v.Float()
		case col.Type == schema.TypeBoolean:
			m[col.Name] = v.Bool()
		case col.Type == schema.TypeBytes || col.Type == schema.TypeCRDT:
			m[col.Name] = map[string]string{"$bytes": hex.EncodeToString(v.Raw())}
		default: // string, json, blob_ref: their text
			m[col.Name] = v.Text()
		}
	}
	return m
}

func getMaxCommitSeq(ctx context.Context, c *call) (any, error) {
	b, err := c.in.bounds(ctx)
	return b.MaxSeq, err
}

func getHorizonSeq(ctx context.Context, c *call) (any, error) {
	b, err := c.in.bounds(ctx)
	return b.HorizonSeq, err
}

func advanceClock(_ context.Context, c *call) (any, error) {
	var ms int64
	if err := c.arg(0, &ms, false); err != nil {
		return nil, err
	}
	_, err := c.in.clock.Advance(ms)
	return nil, err
}

func nowMs(_ context.Context, c *call) (any, error) { return c.in.clock.NowMs(), nil }

// prune runs one §4.6 pass at virtual now with exactly the given values:
// no floors, so 0 is legal; an absent field takes the normative default.
func prune(ctx context.Context, c *call) (any, error) {
	var o struct {
		ActiveWindowMs     *int64 `json:"activeWindowMs"`
		AgeForceMs         *int64 `json:"ageForceMs"`
		MinRetainedCommits *int64 `json:"minRetainedCommits"`
	}
	if err := c.arg(0, &o, true); err != nil {
		return nil, err
	}
	p := retention.DefaultPolicy()
	if o.ActiveWindowMs != nil {
		p.ActiveWindow = time.Duration(*o.ActiveWindowMs) * time.Millisecond
	}
	if o.AgeForceMs != nil {
		p.ForceAge = time.Duration(*o.AgeForceMs) * time.Millisecond
	}
	if o.MinRetainedCommits != nil {
		p.KeepCommits = *o.MinRetainedCommits
	}
	in := c.in
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.closed {
		return nil, errors.New("instance closed")
	}
	pr, err := retention.New(retention.Options{Store: in.live.store, Policy: p, Unfloored: true, Now: in.clock.Now})
	if err != nil {
		return nil, err
	}
	res, err := pr.PrunePartition(ctx, in.spec.partition)
	if err != nil {
		return nil, err
	}
	if res.Skipped { // an unregistered partition has no log to prune
		b, err := in.live.store.LogBounds(ctx, in.spec.partition)
		return b.HorizonSeq, err
	}
	return res.HorizonSeq, nil
}

func failNextIdempotencyLookup(_ context.Context, c *call) (any, error) {
	c.in.failIdempotency.Store(true)
	return nil, nil
}

// captureBackup snapshots the instance database: a SQLite file beside
// it, or a PostgreSQL schema beside its own.
func captureBackup(ctx context.Context, c *call) (any, error) {
	in := c.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, errors.New("instance closed")
	}
	if err := in.db.capture(ctx, in.live.store, in.storeOptions(), in.layout); err != nil {
		return nil, err
	}
	in.captured = true
	return nil, nil
}

// restoreBackup replaces the database with the snapshot, then rotates the
// partition's log epoch to restored-<nowMs>, as a real restore must (SPEC
// §2.1): clients holding the old epoch re-bootstrap, and the connected
// sockets are sent reset-required (§8.3).
func restoreBackup(ctx context.Context, c *call) (any, error) {
	in := c.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, errors.New("instance closed")
	}
	if !in.captured {
		return nil, errors.New("captureBackup must run before restoreBackup")
	}
	if err := in.live.store.Close(); err != nil {
		return nil, fmt.Errorf("close the database: %w", err)
	}
	if err := in.db.restore(ctx, in.storeOptions(), in.layout); err != nil {
		return nil, fmt.Errorf("restore the snapshot: %w", err)
	}
	live, err := in.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("reopen the restored database: %w", err)
	}
	in.setLive(live)
	epoch := fmt.Sprintf("restored-%d", in.clock.NowMs())
	in.nextEpoch.Store(&epoch)
	_, err = live.store.RotateLogEpoch(ctx, in.spec.partition)
	in.nextEpoch.Store(nil)
	if err != nil && syncerr.CodeOf(err) != syncerr.StoragePartitionUnregistered {
		return nil, fmt.Errorf("rotate the log epoch: %w", err)
	}
	in.hub.ResetPartition(ctx, in.spec.partition)
	return nil, nil
}

func setSignedURLTTL(_ context.Context, c *call) (any, error) {
	var s int64
	if err := c.arg(0, &s, false); err != nil {
		return nil, err
	}
	if s < 0 {
		return nil, errors.New("ttl seconds must not be negative")
	}
	c.in.ttlSecs.Store(s)
	return nil, nil
}

// fetchSegmentURL plays the URL host: a plain GET of a URL this instance
// minted, answered as the driver's bytes result.
func fetchSegmentURL(ctx context.Context, c *call) (any, error) {
	var url string
	if err := c.arg(0, &url, false); err != nil {
		return nil, err
	}
	return c.fetchMinted(ctx, http.MethodGet, url, nil)
}

// fetchMinted sends a request to a URL this instance minted (no actor:
// the URL is the whole grant) and answers the driver's result: bytes on
// success, else the §10.1 error.
func (c *call) fetchMinted(ctx context.Context, method, url string, body []byte) (any, error) {
	if !strings.HasPrefix(url, c.in.base+"/") {
		return refusal(map[string]any{"code": string(syncerr.NotFound), "message": "not a URL of this instance"}), nil
	}
	status, _, b, err := c.do(ctx, method, url, "", "", body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return refusal(errorBody(status, b)), nil
	}
	if method != http.MethodGet {
		return map[string]any{"ok": true}, nil
	}
	return map[string]any{"ok": true, "bytes": b64(b)}, nil
}

// do sends one request to the instance's routes as actor ("" for none).
func (c *call) do(ctx context.Context, method, url, actor, contentType string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if actor != "" {
		req.Header.Set(granttable.HeaderActor, actor)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.m.o.HTTP.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func b64(b []byte) map[string]string {
	return map[string]string{"$b64": base64.StdEncoding.EncodeToString(b)}
}

func refusal(e any) map[string]any { return map[string]any{"ok": false, "error": e} }

// errorBody is a refusal's §10.1 body, or a stand-in for a body that is
// not one.
func errorBody(status int, b []byte) any {
	var e map[string]any
	if json.Unmarshal(b, &e) != nil {
		return map[string]any{"code": fmt.Sprintf("http.%d", status), "message": string(b)}
	}
	return e
}

// bytesArg decodes a {"$b64": ...} argument.
func (c *call) bytesArg(i int) ([]byte, error) {
	var v struct {
		B64 *string `json:"$b64"`
	}
	if err := c.arg(i, &v, false); err != nil {
		return nil, err
	}
	if v.B64 == nil {
		return nil, fmt.Errorf("argument %d: want {\"$b64\": ...}", i+1)
	}
	return base64.StdEncoding.DecodeString(*v.B64)
}

func (c *call) blobURL(blobID string) string {
	return c.in.base + "/blobs/" + neturl.PathEscape(blobID)
}

// uploadBlob(actorId, blobId, bytes, mediaType?) is PUT /blobs/{blobId}.
func uploadBlob(ctx context.Context, c *call) (any, error) {
	var actor, blobID, media string
	if err := c.arg(0, &actor, false); err != nil {
		return nil, err
	}
	if err := c.arg(1, &blobID, false); err != nil {
		return nil, err
	}
	body, err := c.bytesArg(2)
	if err != nil {
		return nil, err
	}
	if err := c.arg(3, &media, true); err != nil {
		return nil, err
	}
	status, _, b, err := c.do(ctx, http.MethodPut, c.blobURL(blobID), actor, media, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return refusal(errorBody(status, b)), nil
	}
	return map[string]any{"ok": true}, nil
}

// downloadBlob(actorId, blobId) is GET /blobs/{blobId}: the bytes, or the
// presigned URL answer while presign is on.
func downloadBlob(ctx context.Context, c *call) (any, error) {
	var actor, blobID string
	if err := c.arg(0, &actor, false); err != nil {
		return nil, err
	}
	if err := c.arg(1, &blobID, false); err != nil {
		return nil, err
	}
	status, h, b, err := c.do(ctx, http.MethodGet, c.blobURL(blobID), actor, "", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return refusal(errorBody(status, b)), nil
	}
	if h.Get("Content-Type") == httpapi.ContentTypeJSON && c.in.presign.Load() {
		var u struct {
			URL         string `json:"url"`
			ExpiresAtMs int64  `json:"urlExpiresAtMs"`
		}
		if err := json.Unmarshal(b, &u); err == nil && u.URL != "" {
			return map[string]any{"ok": true, "url": u.URL, "urlExpiresAtMs": u.ExpiresAtMs}, nil
		}
	}
	return map[string]any{"ok": true, "bytes": b64(b)}, nil
}

// fetchBlobURL(url) plays the CDN: a plain GET of a presigned URL.
func fetchBlobURL(ctx context.Context, c *call) (any, error) {
	var url string
	if err := c.arg(0, &url, false); err != nil {
		return nil, err
	}
	return c.fetchMinted(ctx, http.MethodGet, url, nil)
}

// putBlobURL(url, bytes) plays the object store: a plain PUT of the bytes
// to a presigned upload URL.
func putBlobURL(ctx context.Context, c *call) (any, error) {
	var url string
	if err := c.arg(0, &url, false); err != nil {
		return nil, err
	}
	body, err := c.bytesArg(1)
	if err != nil {
		return nil, err
	}
	return c.fetchMinted(ctx, http.MethodPut, url, body)
}

// uploadBlobGrant(actorId, blobId, byteLength, mediaType?) is POST
// /blobs/{blobId}/upload-grant, its answer as the driver's grant kinds.
func uploadBlobGrant(ctx context.Context, c *call) (any, error) {
	var actor, blobID string
	var req struct {
		ByteLength json.Number `json:"byteLength"`
		MediaType  string      `json:"mediaType,omitempty"`
	}
	if err := c.arg(0, &actor, false); err != nil {
		return nil, err
	}
	if err := c.arg(1, &blobID, false); err != nil {
		return nil, err
	}
	if err := c.arg(2, &req.ByteLength, false); err != nil {
		return nil, err
	}
	if err := c.arg(3, &req.MediaType, true); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(req)
	status, _, b, err := c.do(ctx, http.MethodPost, c.blobURL(blobID)+"/upload-grant", actor, httpapi.ContentTypeJSON, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return refusal(errorBody(status, b)), nil
	}
	var g struct {
		URL         string `json:"url"`
		ExpiresAtMs int64  `json:"urlExpiresAtMs"`
		Present     bool   `json:"present"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("upload-grant answer: %w", err)
	}
	grant := map[string]any{"kind": "none"}
	switch {
	case g.URL != "":
		grant = map[string]any{"kind": "url", "url": g.URL, "urlExpiresAtMs": g.ExpiresAtMs}
	case g.Present:
		grant = map[string]any{"kind": "present"}
	}
	return map[string]any{"ok": true, "grant": grant}, nil
}

// setBlobPresign(bool) turns presigned downloads and upload grants on or off.
func setBlobPresign(_ context.Context, c *call) (any, error) {
	var on bool
	if err := c.arg(0, &on, false); err != nil {
		return nil, err
	}
	c.in.presign.Store(on)
	return nil, nil
}

func installValidators(_ context.Context, c *call) (any, error) {
	var specs []struct {
		Table string `json:"table"`
		Rule  rule   `json:"rule"`
	}
	if err := c.arg(0, &specs, true); err != nil {
		return nil, err
	}
	return nil, c.in.rules.setRow(specs)
}

func installCommitValidator(_ context.Context, c *call) (any, error) {
	var s *siblingRule
	if err := c.arg(0, &s, true); err != nil {
		return nil, err
	}
	return nil, c.in.rules.setCommit(s)
}
