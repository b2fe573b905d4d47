package config

import (
	"flag"
	"fmt"
)

// Watches holds the bounds of the remote operations' live query watches
// (GET <mount>/operations/realtime, REMOTE.md §6). Their sockets count
// against --realtime-max-sockets and --realtime-max-sockets-per-actor
// with the realtime channel's.
type Watches struct {
	// MaxPerSocket bounds the active watches of one socket.
	MaxPerSocket int
	// MaxPerActor bounds the active watches of one actor on this node,
	// across its sockets.
	MaxPerActor int
	// Evaluations bounds the watch queries this node runs at once; the
	// reruns a commit wakes wait their turn.
	Evaluations int
}

// DefaultWatches returns the default bounds: the reference's 64 watches
// a socket, four sockets' worth an actor, two queries at once (SQLite's
// smallest read pool, a fraction of PostgreSQL's: the reruns a commit
// wakes queue behind each other, not in front of /sync's reads).
func DefaultWatches() Watches {
	return Watches{MaxPerSocket: 64, MaxPerActor: 256, Evaluations: 2}
}

func (w *Watches) flags(fs *flag.FlagSet) {
	fs.IntVar(&w.MaxPerSocket, "operations-max-watches", w.MaxPerSocket, "most live query watches on one operations socket; more are refused with operation.invalid_request")
	fs.IntVar(&w.MaxPerActor, "operations-max-watches-per-actor", w.MaxPerActor, "most live query watches of one actor on this node across its operations sockets; more are refused with operation.invalid_request")
	fs.IntVar(&w.Evaluations, "operations-watch-evaluations", w.Evaluations, "most live watch queries this node runs at once; the reruns a commit wakes wait their turn (identical watches of one caller share a run)")
}

func (w Watches) validate() []error {
	if w.MaxPerSocket < 1 || w.MaxPerActor < 1 || w.Evaluations < 1 {
		return []error{fmt.Errorf("--operations-max-watches, --operations-max-watches-per-actor and --operations-watch-evaluations must be positive")}
	}
	return nil
}
