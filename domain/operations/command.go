package operations

import "github.com/syncd-dev/syncd/domain/canonjson"

// CommandIdentity maps a command invocation to the ordinary push
// idempotency identity (REMOTE.md §3): the client id is the JSON array
// ["remote-command", actorID, clientID] and the client commit id the JSON
// array [operationID, requestID], both written as JSON.stringify writes
// them. The tuple keeps distinct ids from colliding through a delimiter
// and keeps two actors' equal client ids apart; ordinary client ids may
// not start with the array's prefix, so no commit takes a command's key.
func CommandIdentity(actorID, clientID, operationID, requestID string) (pushClientID, clientCommitID string) {
	return jsonArray("remote-command", actorID, clientID), jsonArray(operationID, requestID)
}

func jsonArray(items ...string) string {
	b := []byte{'['}
	for i, s := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = canonjson.AppendString(b, s)
	}
	return string(append(b, ']'))
}
