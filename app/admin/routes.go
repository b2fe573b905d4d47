package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/syncd-dev/syncd/ports"
)

// Partition is one entry of GET /admin/v1/partitions.
type Partition struct {
	Partition       string  `json:"partition"`
	Registered      bool    `json:"registered"`
	LogEpoch        string  `json:"logEpoch,omitempty"`
	EpochRequired   bool    `json:"epochRequired"`
	LastAuthAt      *string `json:"lastAuthenticatedAt"`
	MaxCommitSeq    int64   `json:"maxCommitSeq"`
	HorizonSeq      int64   `json:"horizonSeq"`
	RetainedCommits int64   `json:"retainedCommits"`
	ClientCount     int64   `json:"clientCount"`
}

// PartitionPage is the answer of GET /admin/v1/partitions.
type PartitionPage struct {
	Items      []Partition `json:"items"`
	NextCursor *string     `json:"nextCursor"`
}

func (h *Handler) partitions(ctx context.Context, q url.Values) (any, error) {
	if h.o.Reader == nil {
		return nil, errUnsupported
	}
	limit, err := limitParam(q)
	if err != nil {
		return nil, err
	}
	after, err := cursorParam(q)
	if err != nil {
		return nil, err
	}
	ps, err := h.o.Reader.AdminPartitions(ctx, ports.AdminPage{After: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := PartitionPage{Items: make([]Partition, 0, len(ps))}
	for _, p := range ps {
		out.Items = append(out.Items, Partition{
			Partition: p.Partition, Registered: p.Registered, LogEpoch: p.LogEpoch, EpochRequired: p.EpochRequired,
			LastAuthAt: timeOf(p.LastAuthenticatedAtMs), MaxCommitSeq: p.MaxCommitSeq, HorizonSeq: p.HorizonSeq,
			RetainedCommits: max(p.MaxCommitSeq-p.HorizonSeq, 0), ClientCount: p.ClientCount,
		})
	}
	if len(ps) == limit {
		out.NextCursor = encodeCursor(ps[len(ps)-1].Partition)
	}
	return out, nil
}

// Client is one client record (GET /admin/v1/clients, /admin/v1/client).
type Client struct {
	ClientID    string  `json:"clientId"`
	ActorID     string  `json:"actorId"`
	Cursor      int64   `json:"cursor"`
	WireVersion int     `json:"wireVersion"`
	UpdatedAt   *string `json:"updatedAt"`
	// LagCommits is how far the cursor is behind the partition's max
	// seq (absent when the log bounds are unknown).
	LagCommits        *int64          `json:"lagCommits,omitempty"`
	SubscriptionCount int             `json:"subscriptionCount"`
	Subscriptions     json.RawMessage `json:"subscriptions,omitempty"`
}

// ClientPage is the answer of GET /admin/v1/clients.
type ClientPage struct {
	Partition    string   `json:"partition"`
	MaxCommitSeq *int64   `json:"maxCommitSeq,omitempty"`
	Items        []Client `json:"items"`
	NextCursor   *string  `json:"nextCursor"`
}

// maxSeq is the partition's max commit seq, or nil without a log reader.
func (h *Handler) maxSeq(ctx context.Context, partition string) (*int64, error) {
	if h.o.Logs == nil {
		return nil, nil
	}
	b, err := h.o.Logs.LogBounds(ctx, partition)
	if err != nil {
		return nil, err
	}
	return &b.MaxSeq, nil
}

func clientOf(r ports.ClientRecord, maxSeq *int64, withSubs bool) Client {
	c := Client{ClientID: r.ClientID, ActorID: r.ActorID, Cursor: r.Cursor, WireVersion: r.WireVersion, UpdatedAt: timeOf(r.UpdatedAtMs)}
	if maxSeq != nil {
		lag := max(*maxSeq-r.Cursor, 0)
		c.LagCommits = &lag
	}
	// The record holds a JSON array; a malformed one counts as none.
	var subs []json.RawMessage
	if json.Unmarshal(r.Subscriptions, &subs) == nil {
		c.SubscriptionCount = len(subs)
	}
	if withSubs {
		c.Subscriptions = json.RawMessage("[]")
		if subs != nil {
			c.Subscriptions = json.RawMessage(r.Subscriptions)
		}
	}
	return c
}

func (h *Handler) clients(ctx context.Context, q url.Values) (any, error) {
	if h.o.Reader == nil {
		return nil, errUnsupported
	}
	partition, limit, err := partitionPage(q)
	if err != nil {
		return nil, err
	}
	after, err := cursorParam(q)
	if err != nil {
		return nil, err
	}
	rs, err := h.o.Reader.AdminClients(ctx, partition, ports.AdminPage{After: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	maxSeq, err := h.maxSeq(ctx, partition)
	if err != nil {
		return nil, err
	}
	out := ClientPage{Partition: partition, MaxCommitSeq: maxSeq, Items: make([]Client, 0, len(rs))}
	for _, r := range rs {
		out.Items = append(out.Items, clientOf(r, maxSeq, false))
	}
	if len(rs) == limit {
		out.NextCursor = encodeCursor(rs[len(rs)-1].ClientID)
	}
	return out, nil
}

// ClientDetail is the answer of GET /admin/v1/client.
type ClientDetail struct {
	Partition string `json:"partition"`
	Client
}

func (h *Handler) client(ctx context.Context, q url.Values) (any, error) {
	if h.o.Clients == nil {
		return nil, errUnsupported
	}
	partition, err := nameParam(q, "partition")
	if err != nil {
		return nil, err
	}
	id, err := nameParam(q, "clientId")
	if err != nil {
		return nil, err
	}
	r, err := h.o.Clients.GetClient(ctx, partition, id)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errNotFound
	}
	maxSeq, err := h.maxSeq(ctx, partition)
	if err != nil {
		return nil, err
	}
	return ClientDetail{Partition: partition, Client: clientOf(*r, maxSeq, true)}, nil
}

// Commit is one commit's metadata (GET /admin/v1/commits).
type Commit struct {
	Seq            int64    `json:"seq"`
	CreatedAt      *string  `json:"createdAt"`
	ActorID        string   `json:"actorId"`
	ClientID       string   `json:"clientId"`
	ClientCommitID string   `json:"clientCommitId"`
	ChangeCount    int64    `json:"changeCount"`
	Tables         []string `json:"tables"`
}

// CommitPage is the answer of GET /admin/v1/commits.
type CommitPage struct {
	Partition string   `json:"partition"`
	Items     []Commit `json:"items"`
	// NextAfter continues the range (pass it as after); null when the
	// range is exhausted.
	NextAfter *int64 `json:"nextAfter"`
}

func (h *Handler) commits(ctx context.Context, q url.Values) (any, error) {
	if h.o.Reader == nil {
		return nil, errUnsupported
	}
	partition, limit, err := partitionPage(q)
	if err != nil {
		return nil, err
	}
	after, err := seqParam(q, "after")
	if err != nil {
		return nil, err
	}
	through, err := seqParam(q, "through")
	if err != nil {
		return nil, err
	}
	if q.Has("through") && through <= after {
		return nil, &badRequest{"through", "must be greater than after"}
	}
	cs, err := h.o.Reader.AdminCommits(ctx, partition, ports.AdminCommitRange{AfterSeq: after, ThroughSeq: through, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := CommitPage{Partition: partition, Items: make([]Commit, 0, len(cs))}
	for _, c := range cs {
		tables := c.Tables
		if tables == nil {
			tables = []string{}
		}
		out.Items = append(out.Items, Commit{Seq: c.Seq, CreatedAt: timeOf(c.CreatedAtMs), ActorID: c.ActorID, ClientID: c.ClientID,
			ClientCommitID: c.ClientCommitID, ChangeCount: c.ChangeCount, Tables: tables})
	}
	if len(cs) == limit {
		last := cs[len(cs)-1].Seq
		if through == 0 || last < through {
			out.NextAfter = &last
		}
	}
	return out, nil
}

// ReactionCounts is the answer of GET /admin/v1/reactions: every status,
// zero included.
type ReactionCounts struct {
	Partition string           `json:"partition,omitempty"`
	Counts    map[string]int64 `json:"counts"`
	Total     int64            `json:"total"`
}

func (h *Handler) reactions(ctx context.Context, q url.Values) (any, error) {
	if h.o.Reader == nil {
		return nil, errUnsupported
	}
	partition := ""
	if q.Has("partition") {
		var err error
		if partition, err = nameParam(q, "partition"); err != nil {
			return nil, err
		}
	}
	m, err := h.o.Reader.AdminReactionCounts(ctx, partition)
	if err != nil {
		return nil, err
	}
	out := ReactionCounts{Partition: partition, Counts: map[string]int64{}}
	for _, st := range []ports.ReactionStatus{ports.ReactionPending, ports.ReactionLeased, ports.ReactionCompleted, ports.ReactionDeadLetter} {
		out.Counts[string(st)] = 0
	}
	for st, n := range m {
		out.Counts[string(st)] = n
		out.Total += n
	}
	return out, nil
}

// Reaction is one entry of GET /admin/v1/reactions/list: its lifecycle
// state, never its payload.
type Reaction struct {
	IdempotencyKey string          `json:"idempotencyKey"`
	Type           string          `json:"type"`
	Version        int32           `json:"version"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	AvailableAt    *string         `json:"availableAt"`
	LeaseExpiresAt *string         `json:"leaseExpiresAt"`
	CompletedAt    *string         `json:"completedAt"`
	LastFailure    json.RawMessage `json:"lastFailure"`
	ClientID       string          `json:"clientId"`
	ClientCommitID string          `json:"clientCommitId"`
	CommitSeq      int64           `json:"commitSeq"`
	CreatedAt      *string         `json:"createdAt"`
}

// ReactionPage is the answer of GET /admin/v1/reactions/list.
type ReactionPage struct {
	Partition  string     `json:"partition"`
	Items      []Reaction `json:"items"`
	NextCursor *string    `json:"nextCursor"`
}

// reactionList pages a partition's reactions oldest first, filtered by
// status and type (comma-separated lists).
func (h *Handler) reactionList(ctx context.Context, q url.Values) (any, error) {
	if h.o.Reactions == nil {
		return nil, errUnsupported
	}
	partition, limit, err := partitionPage(q)
	if err != nil {
		return nil, err
	}
	lq := ports.ReactionListQuery{Limit: limit, Types: listParam(q, "type")}
	for _, st := range listParam(q, "status") {
		switch s := ports.ReactionStatus(st); s {
		case ports.ReactionPending, ports.ReactionLeased, ports.ReactionCompleted, ports.ReactionDeadLetter:
			lq.Statuses = append(lq.Statuses, s)
		default:
			return nil, &badRequest{"status", "want pending, leased, completed or dead-letter"}
		}
	}
	if c := q.Get("cursor"); c != "" {
		var pos struct {
			At  int64  `json:"t"`
			Key string `json:"k"`
		}
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || len(b) > 2*maxNameBytes || json.Unmarshal(b, &pos) != nil || pos.Key == "" {
			return nil, &badRequest{"cursor", "not a cursor this API returned"}
		}
		lq.After = &ports.ReactionCursor{CreatedAtMs: pos.At, IdempotencyKey: pos.Key}
	}
	rs, err := h.o.Reactions.ListReactionPage(ctx, partition, lq)
	if err != nil {
		return nil, err
	}
	out := ReactionPage{Partition: partition, Items: make([]Reaction, 0, len(rs))}
	for _, r := range rs {
		item := Reaction{IdempotencyKey: r.IdempotencyKey, Type: r.Type, Version: r.Version, Status: string(r.Status),
			Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, AvailableAt: timeOf(r.AvailableAtMs), LeaseExpiresAt: timeOf(r.LeaseExpiresAt),
			CompletedAt: timeOf(r.CompletedAtMs), LastFailure: json.RawMessage("null"), ClientID: r.Source.ClientID,
			ClientCommitID: r.Source.ClientCommitID, CommitSeq: r.Source.CommitSeq, CreatedAt: timeOf(r.Source.CreatedAtMs)}
		if len(r.LastFailure) > 0 && json.Valid(r.LastFailure) {
			item.LastFailure = json.RawMessage(r.LastFailure)
		}
		out.Items = append(out.Items, item)
	}
	if len(rs) == limit {
		last := rs[len(rs)-1]
		b, _ := json.Marshal(struct {
			At  int64  `json:"t"`
			Key string `json:"k"`
		}{last.Source.CreatedAtMs, last.IdempotencyKey})
		c := base64.RawURLEncoding.EncodeToString(b)
		out.NextCursor = &c
	}
	return out, nil
}

// listParam splits a comma-separated parameter, dropping empty entries.
func listParam(q url.Values, name string) []string {
	var out []string
	for v := range strings.SplitSeq(q.Get(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// SegmentStats is the answer of GET /admin/v1/segments.
type SegmentStats struct {
	// Available is false when the segment store cannot report totals (a
	// host's own store, or no storage).
	Available           bool  `json:"available"`
	Segments            int64 `json:"segments"`
	Bytes               int64 `json:"bytes"`
	Publications        int64 `json:"publications"`
	ExpiredPublications int64 `json:"expiredPublications"`
}

func (h *Handler) segments(ctx context.Context, _ url.Values) (any, error) {
	if h.o.Segments == nil {
		return SegmentStats{}, nil
	}
	st, err := h.o.Segments.SegmentStats(ctx, h.o.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	return SegmentStats{Available: true, Segments: st.Segments, Bytes: st.Bytes, Publications: st.Publications,
		ExpiredPublications: st.ExpiredPublications}, nil
}

func (h *Handler) readiness(context.Context, url.Values) (any, error) {
	if h.o.Readiness == nil {
		return nil, errUnsupported
	}
	return h.o.Readiness(), nil
}

// partitionPage reads the partition and page size of a list in one.
func partitionPage(q url.Values) (partition string, limit int, err error) {
	if partition, err = nameParam(q, "partition"); err != nil {
		return "", 0, err
	}
	limit, err = limitParam(q)
	return partition, limit, err
}
