package ports

import "time"

// Clock is where the server reads the time: commit timestamps, last-seen
// stamps, segment and signed-URL expiry, retention windows. Production
// runs on the wall clock; a test host runs on a virtual clock that moves
// only when told to, so expiry and retention are testable without waiting.
type Clock interface {
	Now() time.Time
}
