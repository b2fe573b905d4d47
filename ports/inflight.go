package ports

// Inflight is the node's bound on the request work and request memory it
// holds at once, shared by every transport: POST /sync bodies, socket
// rounds and socket messages draw on the same budget, so no transport is
// a way around it.
type Inflight interface {
	// Share starts an empty share for one request (or one socket's
	// message or round).
	Share() InflightShare
}

// InflightShare is one request's part of an Inflight bound. Reserve and
// Acquire refuse with a sync.rate_limited catalog error past the bound,
// never wait. Release returns everything; the share may then be used
// again.
type InflightShare interface {
	// Reserve takes n more bytes of the memory budget.
	Reserve(n int64) error
	// Unreserve gives back n of the bytes reserved.
	Unreserve(n int64)
	// Acquire takes one processing slot (a second call holds the same).
	Acquire() error
	// Release returns the bytes and the slot.
	Release()
}
