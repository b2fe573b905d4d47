package testcontrol

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

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
// feature exists. Methods of later features (blobs, presign, leases) are
// absent, and a call to one is answered as unsupported.
var methods = map[string]method{
	"setAllowedScopes":          setAllowedScopes,
	"setResolverFailing":        setResolverFailing,
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

// captureBackup snapshots the instance database into its directory.
func captureBackup(ctx context.Context, c *call) (any, error) {
	in := c.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, errors.New("instance closed")
	}
	path := filepath.Join(in.dir, "backup.db")
	_ = os.Remove(path)
	if _, err := in.live.store.DB().ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	in.backup = path
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
	if in.backup == "" {
		return nil, errors.New("captureBackup must run before restoreBackup")
	}
	if err := in.live.store.Close(); err != nil {
		return nil, fmt.Errorf("close the database: %w", err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(in.dbPath + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if err := copyFile(in.backup, in.dbPath); err != nil {
		return nil, err
	}
	live, err := in.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("reopen the restored database: %w", err)
	}
	in.live = live
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

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
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
	if !strings.HasPrefix(url, c.in.base+"/") {
		return map[string]any{"ok": false, "error": map[string]string{"code": string(syncerr.NotFound), "message": "not a URL of this instance"}}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.m.o.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return map[string]any{"ok": true, "bytes": map[string]string{"$b64": base64.StdEncoding.EncodeToString(body)}}, nil
	}
	var e map[string]any
	if json.Unmarshal(body, &e) != nil {
		e = map[string]any{"code": fmt.Sprintf("http.%d", resp.StatusCode), "message": string(body)}
	}
	return map[string]any{"ok": false, "error": e}, nil
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
