package push

import (
	"strings"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// ReservedClientIDPrefix starts the client ids of server-authoritative
// remote commands (a JSON array ["remote-command", actor, client]); a
// client replica may not use it (SPEC §1.5).
const ReservedClientIDPrefix = `["remote-command",`

// DefaultMaxOperationsPerRequest is the reference operation cap (SPEC §6.1).
const DefaultMaxOperationsPerRequest = 500

// CheckClientID is the request-level clientId rule of SPEC §1.5: a client
// id in the reserved server-command namespace, or one already bound to a
// different actor in the partition, fails the whole request with
// sync.invalid_client_id. boundActor is the actor clientID is bound to
// in the partition (its first user, by push or pull), and bound reports
// whether it is bound.
func CheckClientID(clientID, actorID, boundActor string, bound bool) error {
	if strings.HasPrefix(clientID, ReservedClientIDPrefix) {
		return syncerr.Newf(syncerr.InvalidClientID, "client id uses the reserved remote-command namespace")
	}
	if bound && boundActor != actorID {
		return syncerr.Newf(syncerr.InvalidClientID, "client id is bound to another actor in this partition")
	}
	return nil
}

// CheckOperationCap is the request-level operation cap of SPEC §6.1:
// operations are counted across every PUSH_COMMIT of the request, and a
// request past limit is refused whole with sync.too_many_operations
// before any commit is attempted. limit ≤ 0 means
// DefaultMaxOperationsPerRequest.
func CheckOperationCap(perCommit []int, limit int) error {
	if limit <= 0 {
		limit = DefaultMaxOperationsPerRequest
	}
	total := 0
	for _, n := range perCommit {
		total += n
		if total > limit {
			return syncerr.Newf(syncerr.TooManyOperations, "request carries more than %d operations", limit)
		}
	}
	return nil
}

// EpochAdmission is the log-epoch decision for a request (SPEC §2.1).
type EpochAdmission uint8

// Epoch decisions.
const (
	// EpochMatch: the request's epoch is the partition's; proceed.
	EpochMatch EpochAdmission = iota + 1
	// EpochAcquire: the request carries no epoch. The response is
	// RESP_HEADER with the current epoch and resetRequired, then END.
	EpochAcquire
	// EpochMismatch: a log discontinuity. The same reset response, and
	// no other request work.
	EpochMismatch
)

// ResetRequired reports whether the response is the header-only reset.
func (a EpochAdmission) ResetRequired() bool { return a != EpochMatch }

// AdmitEpoch compares a request's logEpoch with the partition's current
// one. It runs before scope resolution, lease issuance, push, pull and
// client-record writes. A request without an epoch must carry no
// PUSH_COMMIT; either way its pushes are not applied, because the reset
// response processes nothing — the client replays its outbox once it
// holds the epoch.
func AdmitEpoch(requested string, hasRequested bool, current string) EpochAdmission {
	switch {
	case !hasRequested:
		return EpochAcquire
	case requested != current:
		return EpochMismatch
	}
	return EpochMatch
}
