package callout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	contract "github.com/syncd-dev/syncd/domain/callout"
	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/ports"
)

// leaseMargin is the time a reaction's lease outlasts its callout's
// timeout by, for recording the outcome.
const leaseMargin = 5 * time.Second

// ReactionOptions configure the reaction webhooks.
type ReactionOptions struct {
	Client *Client
	// Timeout bounds one delivery (--callout-reaction-timeout).
	Timeout time.Duration
	// Lease is how long the runner leases a claimed reaction before its
	// handler runs. A Timeout that does not fit in it with leaseMargin to
	// spare extends the lease first, so another worker never claims a
	// reaction whose webhook is still in flight.
	Lease time.Duration
}

// NewReactionHandlers builds a ports.ReactionHandler per type that
// delivers it as a webhook to BASE/reactions/<type>. The runner claims,
// leases, retries and dead-letters as it does for a Go handler: a 2xx
// answer with an empty body or {} completes the reaction; anything else
// fails the attempt — no answer in time, no connection, another status,
// another body — and the runner retries it with backoff until its
// attempts run out. A non-2xx answer may classify its failure
// ({"code", "permanent", "details"}); a permanent one dead-letters at once.
func NewReactionHandlers(o ReactionOptions, types []string) ([]ports.ReactionHandler, error) {
	if o.Client == nil || o.Timeout <= 0 || o.Lease <= 0 {
		return nil, errors.New("callout: reaction webhooks need a client, a timeout and the runner's lease")
	}
	out := make([]ports.ReactionHandler, len(types))
	for i, typ := range types {
		if !dompush.ReactionType(typ) {
			return nil, fmt.Errorf("callout: %q is not a reaction type (a letter, then letters, digits and . _ - : /, at most %d bytes)", typ, dompush.MaxReactionTypeBytes)
		}
		out[i] = &reactionHandler{c: o.Client, typ: typ, timeout: o.Timeout, lease: o.Lease}
	}
	return out, nil
}

type reactionHandler struct {
	c       *Client
	typ     string
	timeout time.Duration
	lease   time.Duration
}

func (h *reactionHandler) Type() string { return h.typ }

// reactionRequest is the body of a reaction webhook.
type reactionRequest struct {
	Type           string          `json:"type"`
	Version        int32           `json:"version"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Partition      string          `json:"partition"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"maxAttempts"`
	Payload        json.RawMessage `json:"payload"`
	Source         reactionSource  `json:"source"`
}

type reactionSource struct {
	ClientID       string `json:"clientId"`
	ClientCommitID string `json:"clientCommitId"`
	CommitSeq      int64  `json:"commitSeq"`
	CreatedAtMs    int64  `json:"createdAtMs"`
}

// reactionFailure is a non-2xx answer that classifies its failure.
type reactionFailure struct {
	Code      string          `json:"code"`
	Permanent bool            `json:"permanent"`
	Details   json.RawMessage `json:"details"`
}

// HandleReaction posts the delivery and reads the answer.
func (h *reactionHandler) HandleReaction(ctx context.Context, d ports.ReactionDelivery) error {
	if h.timeout+leaseMargin > h.lease && d.ExtendLease != nil {
		held, err := d.ExtendLease(ctx, h.timeout+leaseMargin)
		if err != nil {
			return fmt.Errorf("callout reaction %s: extend the lease: %w", h.typ, err)
		}
		if !held {
			return &ports.ReactionError{Code: "callout.lease_lost"}
		}
	}
	payload := d.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	in := reactionRequest{Type: d.Type, Version: d.Version, IdempotencyKey: d.IdempotencyKey, Partition: d.Partition,
		Attempt: d.Attempt, MaxAttempts: d.MaxAttempts, Payload: payload,
		Source: reactionSource{ClientID: d.Source.ClientID, ClientCommitID: d.Source.ClientCommitID,
			CommitSeq: d.Source.CommitSeq, CreatedAtMs: d.Source.CreatedAtMs}}
	cb := Callback{Name: "reaction", Path: contract.ReactionPath(h.typ), Timeout: h.timeout, Target: h.typ,
		Header: http.Header{
			contract.HeaderIdempotencyKey:  {contract.EscapeHeaderKey(d.IdempotencyKey)},
			contract.HeaderReactionAttempt: {strconv.Itoa(d.Attempt)},
		}}
	err := h.c.Call(ctx, cb, in, func(status int, body []byte) (Outcome, error) {
		if ok2xx(status) {
			if len(bytes.TrimSpace(body)) == 0 {
				return OutcomeOK, nil
			}
			var none struct{}
			if err := decodeStrict(body, &none); err != nil {
				return OutcomeMalformed, fmt.Errorf("a 2xx answer's body must be empty or {}: %w", err)
			}
			return OutcomeOK, nil
		}
		// A failure's code is code-like, as a reaction type is.
		var f reactionFailure
		if decodeStrict(body, &f) == nil && dompush.ReactionType(f.Code) {
			return OutcomeRefused, &ports.ReactionError{Code: f.Code, Details: f.Details, Permanent: f.Permanent}
		}
		return unexpected(status)
	})
	var o *Outage
	if errors.As(err, &o) {
		// The failure record keeps a code and plain details, never error
		// text: the client logged the cause.
		re := &ports.ReactionError{Code: "callout." + string(o.Outcome)}
		if o.Status != 0 {
			re.Details = json.RawMessage(`{"status":` + strconv.Itoa(o.Status) + `}`)
		}
		return re
	}
	return err
}
