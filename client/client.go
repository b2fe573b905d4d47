// Package client is a Go SSP2 client (wire 3) for tests, tools and the load
// generator: log-epoch acquisition, push with stored pending commits that
// replay under their idempotency keys, pull with subscriptions, bootstrap
// that follows bootstrapState pages, SEGMENT_INLINE decoding and
// SEGMENT_REF download (direct with X-Syncular-Scopes, or a signed URL)
// with content-address verification, sqlite-image segments opened with
// the SQLite engine and imported (§5.3), blob uploads (direct, streamed,
// or through an upload grant) and downloads (direct or through a
// presigned URL, verified), gzip and zstd both ways, the realtime
// channel (Connect: sync rounds over the socket, deltas applied and
// acknowledged, wake-ups served by a round), remote operations (registered
// queries and commands over POST /operations, live watches of queries),
// and a small in-memory replica of the rows it was sent.
//
// It is a regular package rather than a test helper so the load tool
// (cmd/syncload) and other programs can drive a server with it; it is
// built only on the domain codec (domain/ssp2, domain/rowcodec,
// domain/sqliteimage, domain/realtime, domain/operations), the standard HTTP client, a
// WebSocket library and the pure-Go SQLite driver, never on the server's
// own packages.
//
// A Client is one replica: it is not safe for concurrent use.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// Options configure a Client.
type Options struct {
	// BaseURL is the sync API base including the mount, e.g.
	// "http://127.0.0.1:8787" or "https://host/api". Requests go to
	// BaseURL+"/sync" and BaseURL+"/segments/{id}".
	BaseURL string
	// Schema is the client's generated schema (its version is sent).
	Schema *schema.Schema
	// ClientID identifies the replica (default: random).
	ClientID string
	// Header is added to every sync and direct segment request: host
	// authentication (Authorization, development identity headers). It is
	// never sent to a signed URL.
	Header http.Header
	// BearerToken, when set, is sent as "Authorization: Bearer <token>"
	// wherever Header is.
	BearerToken string
	// HTTP is the HTTP client (default: a client without transparent
	// decompression; the Client negotiates encodings itself).
	HTTP *http.Client
	// WireVersion is the request wire version (default 3).
	WireVersion uint16
	// AcceptEncoding is sent on every request (default "zstd, gzip").
	AcceptEncoding string
	// RequestEncoding compresses request bodies: "", "gzip" or "zstd".
	RequestEncoding string
	// Accept is the PULL_HEADER accept mask (default: inline and external
	// rows segments and sqlite images, the client importing images with
	// the SQLite engine).
	Accept uint8
	// Pull limits sent in PULL_HEADER (0 lets the server pick its
	// default), except LimitSnapshotRows when Accept lacks sqlite images:
	// then 0 asks for RowsLanePageRows-row pages, so a large table arrives
	// in a few whole segments by reference instead of many small pages,
	// and a negative value sends 0. (With images, the server's one-page
	// default keeps every table larger than a page on the image lane.)
	LimitCommits      int32
	LimitSnapshotRows int32
	MaxSnapshotPages  int32
	// MaxResponseBytes caps a response body after decoding (default 1 GiB).
	MaxResponseBytes int64
}

// RowsLanePageRows is the page size a client without the image lane asks
// for by default: the largest the server grants (§4.2 clamps at 50,000).
const RowsLanePageRows = 50_000

// Client is one SSP2 replica.
type Client struct {
	o       Options
	http    *http.Client
	codecs  map[string]*rowcodec.Codec
	epoch   string
	subs    map[string]*Subscription
	order   []string
	rows    map[string]map[string]Row
	pending []*ssp2.PushCommit
	seq     int
	prefix  string
	stats   Stats
	rt      *Realtime // open realtime connection: rounds go over it
	lease   LeaseState
}

// LeaseState is the client's auth lease (SPEC §7.3.5): the lease of the
// last LEASE frame, and the lease error of the last round that failed
// with one. The lease is opaque: the server is its only authority.
type LeaseState struct {
	// LeaseID and ExpiresAtMs are the held lease ("" and 0: none yet).
	LeaseID     string
	ExpiresAtMs int64
	// ErrorCode is sync.auth_lease_required or sync.auth_lease_revoked
	// after a round failed with it, until a LEASE frame arrives. Such a
	// failure purges nothing and drops no pending commit: the client
	// should stop syncing on the lease until a live authorization is back.
	ErrorCode string
}

// RemainingMs is how long the held lease stays valid at nowMs (≤ 0:
// expired or none).
func (l LeaseState) RemainingMs(nowMs int64) int64 {
	if l.LeaseID == "" {
		return 0
	}
	return l.ExpiresAtMs - nowMs
}

// Lease returns the client's auth lease state.
func (c *Client) Lease() LeaseState { return c.lease }

// noteLeaseError records a round's lease error (SPEC §7.3.5).
func (c *Client) noteLeaseError(err error) {
	switch code := CodeOf(err); code {
	case "sync.auth_lease_required", "sync.auth_lease_revoked":
		c.lease.ErrorCode = code
	}
}

// Subscription is a registered subscription and its pull state.
type Subscription struct {
	ID     string
	Table  string
	Scopes map[string][]string
	Params string // raw JSON or ""
	// Cursor is the persisted cursor (-1 before the first complete bootstrap).
	Cursor int64
	// BootstrapState is the resume token of an incomplete bootstrap, or "".
	BootstrapState string
	// Status is the last SUB_START status (0 before any).
	Status ssp2.SubStatus
	// Reason is the last SUB_START reason code.
	Reason string
	// Effective is the effective-scope echo of the last active SUB_START
	// (a reset or revocation leaves it as it was: the purge and eviction
	// rules of §3.3 match rows by it).
	Effective map[string][]string
	// Err is the failure that aborted the subscription's last section
	// (its SUB_END was then not persisted), or nil.
	Err error
}

// Row is a replicated row: its full-row encoding and server version.
type Row struct {
	Version int64
	Payload []byte
}

// Stats count what the client received.
type Stats struct {
	Requests       int
	Commits        int
	InlineSegments int
	SegmentRefs    int
	// Images counts the sqlite images imported.
	Images            int
	SegmentDownloads  int
	SignedDownloads   int
	SegmentBytes      int64
	BootstrapRows     int64
	ResponseBodyBytes int64
	// Rounds counts the requests sent as socket rounds (also in Requests).
	Rounds int
	// Deltas and DeltaBytes count the realtime deltas received.
	Deltas     int
	DeltaBytes int64
	// BlobUploads and BlobUploadBytes count the blob bodies sent (to the
	// server or a presigned URL); BlobDownloads the download requests
	// answered, BlobURLFetches the presigned URLs fetched.
	BlobUploads     int
	BlobUploadBytes int64
	BlobDownloads   int
	BlobURLFetches  int
}

// New returns a client.
func New(o Options) (*Client, error) {
	if o.BaseURL == "" || o.Schema == nil {
		return nil, errors.New("client: Options.BaseURL and Options.Schema are required")
	}
	if o.ClientID == "" {
		o.ClientID = "go-" + randomHex(8)
	}
	if o.WireVersion == 0 {
		o.WireVersion = 3
	}
	if o.AcceptEncoding == "" {
		o.AcceptEncoding = "zstd, gzip"
	}
	if o.Accept == 0 {
		o.Accept = ssp2.AcceptInlineRows | ssp2.AcceptExternalRows | ssp2.AcceptSQLite
	}
	switch {
	case o.LimitSnapshotRows < 0:
		o.LimitSnapshotRows = 0
	case o.LimitSnapshotRows == 0 && o.Accept&ssp2.AcceptSQLite == 0:
		o.LimitSnapshotRows = RowsLanePageRows
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = 1 << 30
	}
	switch o.RequestEncoding {
	case "", "gzip", "zstd":
	default:
		return nil, fmt.Errorf("client: RequestEncoding %q: want gzip, zstd or empty", o.RequestEncoding)
	}
	if o.BearerToken != "" {
		o.Header = o.Header.Clone()
		if o.Header == nil {
			o.Header = http.Header{}
		}
		o.Header.Set("Authorization", "Bearer "+o.BearerToken)
	}
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}}
	}
	c := &Client{
		o: o, http: hc, codecs: map[string]*rowcodec.Codec{},
		subs: map[string]*Subscription{}, rows: map[string]map[string]Row{},
		prefix: randomHex(4),
	}
	for _, t := range o.Schema.Tables {
		c.codecs[t.Name] = rowcodec.New(t)
	}
	return c, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ClientID returns the replica's client id.
func (c *Client) ClientID() string { return c.o.ClientID }

// LogEpoch returns the partition log epoch the client holds ("" before its
// first response).
func (c *Client) LogEpoch() string { return c.epoch }

// SetLogEpoch sets the held epoch (tests of epoch handling).
func (c *Client) SetLogEpoch(e string) { c.epoch = e }

// Stats returns the counters so far.
func (c *Client) Stats() Stats { return c.stats }

// Subscribe registers (or replaces) a subscription with cursor -1.
func (c *Client) Subscribe(id, table string, scopes map[string][]string) *Subscription {
	if _, ok := c.subs[id]; !ok {
		c.order = append(c.order, id)
	}
	s := &Subscription{ID: id, Table: table, Scopes: cloneScopes(scopes), Cursor: -1}
	c.subs[id] = s
	return s
}

// Unsubscribe drops a subscription (the next pull's list replaces the
// server's registration).
func (c *Client) Unsubscribe(id string) {
	delete(c.subs, id)
	for i, s := range c.order {
		if s == id {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// UnsubscribeAndEvict drops a subscription and deletes the local rows
// its last effective scopes match (SPEC §3.3, §4.8: eviction is legal
// only fused with unsubscription, and matches rows by the purge's rule).
// It returns the rows deleted.
func (c *Client) UnsubscribeAndEvict(id string) int {
	s := c.subs[id]
	c.Unsubscribe(id)
	if s == nil || len(s.Effective) == 0 {
		return 0
	}
	before := len(c.rows[s.Table])
	c.purge(s.Table, s.Effective)
	return before - len(c.rows[s.Table])
}

// Subscription returns a registered subscription, or nil.
func (c *Client) Subscription(id string) *Subscription { return c.subs[id] }

func cloneScopes(m map[string][]string) map[string][]string {
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Rows returns the replicated rows of a table (row id → row). The map is
// the client's own; do not modify it.
func (c *Client) Rows(table string) map[string]Row { return c.rows[table] }

// RowIDs returns the replicated row ids of a table in ascending order.
func (c *Client) RowIDs(table string) []string {
	ids := make([]string, 0, len(c.rows[table]))
	for id := range c.rows[table] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Get returns a replicated row decoded into column name → value.
func (c *Client) Get(table, rowID string) (map[string]rowcodec.Value, int64, bool) {
	r, ok := c.rows[table][rowID]
	if !ok {
		return nil, 0, false
	}
	codec := c.codecs[table]
	vals, err := codec.DecodeRow(r.Payload, nil)
	if err != nil {
		return nil, 0, false
	}
	out := make(map[string]rowcodec.Value, len(vals))
	for i, col := range codec.Columns() {
		out[col.Name] = vals[i]
	}
	return out, r.Version, true
}

// Upsert builds an upsert operation with a sparse payload of cols; a
// negative baseVersion sends none (insert or blind write).
func (c *Client) Upsert(table, rowID string, cols map[string]rowcodec.Value, baseVersion int64) (ssp2.PushOperation, error) {
	t := c.o.Schema.Table(table)
	if t == nil {
		return ssp2.PushOperation{}, fmt.Errorf("client: unknown table %q", table)
	}
	vals := make([]rowcodec.Value, len(t.Columns))
	for name, v := range cols {
		i := t.ColumnIndex(name)
		if i < 0 {
			return ssp2.PushOperation{}, fmt.Errorf("client: table %s has no column %q", table, name)
		}
		vals[i] = v
	}
	codec := c.codecs[table]
	var (
		payload []byte
		err     error
	)
	if c.o.WireVersion >= 3 {
		payload, err = codec.AppendSparse(nil, vals)
	} else {
		payload, err = codec.AppendRow(nil, vals)
	}
	if err != nil {
		return ssp2.PushOperation{}, fmt.Errorf("client: encode %s/%s: %w", table, rowID, err)
	}
	op := ssp2.PushOperation{Table: table, RowID: rowID, Op: ssp2.OpUpsert, Payload: payload}
	if baseVersion >= 0 {
		op.BaseVersion = ssp2.Some(baseVersion)
	}
	return op, nil
}

// Delete builds a delete operation; a negative baseVersion sends none.
func (c *Client) Delete(table, rowID string, baseVersion int64) ssp2.PushOperation {
	op := ssp2.PushOperation{Table: table, RowID: rowID, Op: ssp2.OpDelete}
	if baseVersion >= 0 {
		op.BaseVersion = ssp2.Some(baseVersion)
	}
	return op
}

// Queue adds a pending commit of ops and returns its client commit id. It
// is sent by the next Push or Sync, and again by every later one until a
// PUSH_RESULT for it arrives (replay under the same idempotency key).
func (c *Client) Queue(ops ...ssp2.PushOperation) string {
	c.seq++
	id := c.prefix + "-" + strconv.Itoa(c.seq)
	c.QueueWithID(id, ops...)
	return id
}

// QueueWithID adds a pending commit under a caller-chosen client commit id.
func (c *Client) QueueWithID(id string, ops ...ssp2.PushOperation) {
	c.pending = append(c.pending, &ssp2.PushCommit{ClientCommitID: id, Operations: append([]ssp2.PushOperation(nil), ops...)})
}

// Pending returns the client commit ids not yet acknowledged.
func (c *Client) Pending() []string {
	out := make([]string, len(c.pending))
	for i, p := range c.pending {
		out[i] = p.ClientCommitID
	}
	return out
}

// Result is what one request returned.
type Result struct {
	// Header is the RESP_HEADER.
	Header ssp2.RespHeader
	// Pushes are the PUSH_RESULT frames, in order.
	Pushes []*ssp2.PushResult
	// Sections counts the subscription sections per id.
	Sections map[string]Section
	// Message is the decoded response.
	Message *ssp2.Message
	// Lease is the LEASE frame (SPEC §7.3.2), nil when none.
	Lease *ssp2.Lease
}

// Section summarizes one subscription section of a response.
type Section struct {
	Status         ssp2.SubStatus
	Reason         string
	Bootstrap      bool
	Commits        int
	InlineSegments int
	SegmentRefs    []*ssp2.SegmentRef
	NextCursor     int64
	BootstrapState string
	Err            error
}

// Push sends the pending commits alone (no PULL_HEADER).
func (c *Client) Push(ctx context.Context) (*Result, error) {
	return c.exchange(ctx, false)
}

// Pull sends a pull of every subscription (and the pending commits, if
// any: a mixed request).
func (c *Client) Pull(ctx context.Context) (*Result, error) {
	return c.exchange(ctx, true)
}

// Sync is Pull: pending commits and the pull in one request.
func (c *Client) Sync(ctx context.Context) (*Result, error) { return c.exchange(ctx, true) }

// Settled reports whether no subscription has a bootstrap in progress.
func (c *Client) Settled() bool {
	for _, s := range c.subs {
		if s.BootstrapState != "" || (s.Cursor < 0 && s.Status != ssp2.SubRevoked) {
			return false
		}
	}
	return true
}

// PullUntilIdle pulls until every bootstrap completed and a pull brought
// no commit and no segment, at most maxRounds times (0: 10,000). It
// returns the number of pulls made.
func (c *Client) PullUntilIdle(ctx context.Context, maxRounds int) (int, error) {
	if maxRounds <= 0 {
		maxRounds = 10_000
	}
	for n := 1; n <= maxRounds; n++ {
		res, err := c.Pull(ctx)
		if err != nil {
			return n, err
		}
		busy := false
		for id, sec := range res.Sections {
			if sec.Err != nil {
				return n, fmt.Errorf("client: subscription %s: %w", id, sec.Err)
			}
			if sec.Commits > 0 || sec.InlineSegments > 0 || len(sec.SegmentRefs) > 0 || sec.BootstrapState != "" || sec.Status == ssp2.SubReset {
				busy = true
			}
		}
		if !busy && c.Settled() && len(c.pending) == 0 {
			return n, nil
		}
	}
	return maxRounds, fmt.Errorf("client: not idle after %d pulls", maxRounds)
}
