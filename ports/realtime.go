package ports

import "context"

// RealtimeMessage is one WebSocket message of the realtime channel
// (SPEC §8): JSON control text, or a binary message whose first byte is
// the §8.7 channel tag.
type RealtimeMessage struct {
	Binary bool
	Data   []byte
}

// Close codes of the realtime channel (RFC 6455 §7.4.1).
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001 // the server drains
	CloseProtocolError = 1002 // a §8.7 framing violation
	ClosePolicy        = 1008 // a malformed control message, a slow consumer, a stalled message
	CloseTooBig        = 1009 // a message or a socket round past its size bound
	CloseInternal      = 1011
	CloseTryAgainLater = 1013
)

// RealtimeCloseError is a read the transport refused (a message past its
// size bound or its deadline, no room in the in-flight budget): the
// socket is to be closed with Code and Reason, a catalog code first.
type RealtimeCloseError struct {
	Code   int
	Reason string
}

func (e *RealtimeCloseError) Error() string { return e.Reason }

// RealtimeConn is one accepted realtime socket. Read is called from one
// goroutine; Write and Close may be called from any, but the realtime use
// case writes from one goroutine per connection.
type RealtimeConn interface {
	// Read blocks for the next client message; an error ends the
	// connection (closed, broken, ctx done).
	Read(ctx context.Context) (RealtimeMessage, error)
	// Write sends one message; it returns once the message was handed to
	// the socket, or with ctx's error.
	Write(ctx context.Context, m RealtimeMessage) error
	// Ping sends a ping and waits for its pong (Read must be running).
	Ping(ctx context.Context) error
	// Close closes the socket with a close code and a short reason.
	Close(code int, reason string) error
}

// ScopeRefresher re-resolves the registrations of a node's live realtime
// sessions (SPEC §8.7 host-initiated refresh): a host that changed an
// actor's memberships calls it instead of waiting for each client's next
// round. Sessions whose scopes can no longer be resolved (resolver error,
// unreadable client record) lose every registration, and with them their
// presence. It returns the number of sessions refreshed on this node; a
// host with several nodes calls it on each.
type ScopeRefresher interface {
	// RefreshScopes refreshes the partition's sessions, those of actorID
	// only when it is not empty.
	RefreshScopes(ctx context.Context, partition, actorID string) int
}
