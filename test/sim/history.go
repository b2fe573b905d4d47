package sim

import (
	"fmt"
	"math/rand/v2"
)

// StepKind is what one step of a history does.
type StepKind uint8

// Step kinds.
const (
	// StepWrite: a client queues a commit of one to three operations in
	// its outbox (sent by its next sync, online or not).
	StepWrite StepKind = iota + 1
	// StepSync: an online client sends its outbox and pulls (a lost
	// request or response at the step's network fault).
	StepSync
	// StepPush: an online client sends its outbox alone (a push-only
	// request).
	StepPush
	// StepTick: the virtual clock moves, now and then past the retention
	// active window.
	StepTick
	StepOffline
	StepOnline
	// StepSubscribe, StepUnsubscribe change a client's subscriptions (an
	// unsubscription evicts its rows, §4.8).
	StepSubscribe
	StepUnsubscribe
	// StepGrant, StepRevoke change an actor's grant of a workspace.
	StepGrant
	StepRevoke
	// StepFault: a storage fault is armed, then an online client syncs.
	StepFault
	// StepPrune: a retention pass down to the active clients' floors.
	StepPrune
	// StepWake: a queued commit notice is delivered (in any order, or
	// dropped) and wakes an online client, which syncs.
	StepWake
	// StepRestart: the server restarts cleanly over its database.
	StepRestart
	// StepCheckpoint: every online client syncs until idle, faults off,
	// then every invariant is checked.
	StepCheckpoint
	// StepRotate: the partition's log epoch rotates, as a backup restore
	// does (§2.1): every client resets and bootstraps again, keeping its
	// outbox.
	StepRotate
)

var stepNames = map[StepKind]string{
	StepWrite: "write", StepSync: "sync", StepPush: "push", StepTick: "tick", StepOffline: "offline", StepOnline: "online",
	StepSubscribe: "subscribe", StepUnsubscribe: "unsubscribe", StepGrant: "grant", StepRevoke: "revoke", StepFault: "fault",
	StepPrune: "prune", StepWake: "wake", StepRestart: "restart", StepCheckpoint: "checkpoint", StepRotate: "rotate",
}

func (k StepKind) String() string { return stepNames[k] }

// Step is one step of a history. What it touches (rows, versions, which
// notice) is decided when it runs, from its own Seed against the state of
// the moment: dropping other steps (shrinking) never changes a step's own
// random choices.
type Step struct {
	Kind   StepKind
	Client int
	Fault  FaultKind
	Net    netFault
	Seed   uint64
}

func (s Step) String() string {
	out := fmt.Sprintf("%s c%d", s.Kind, s.Client+1)
	if s.Fault != 0 {
		out += " fault=" + s.Fault.String()
	}
	switch s.Net {
	case netLoseRequest:
		out += " net=lose-request"
	case netLoseResponse:
		out += " net=lose-response"
	}
	return out
}

var stepWeights = []struct {
	kind   StepKind
	weight int
}{
	{StepWrite, 30}, {StepSync, 22}, {StepPush, 4}, {StepTick, 8}, {StepOffline, 3}, {StepOnline, 5},
	{StepSubscribe, 4}, {StepUnsubscribe, 2}, {StepGrant, 2}, {StepRevoke, 2}, {StepFault, 9}, {StepPrune, 4},
	{StepWake, 3}, {StepRestart, 1}, {StepRotate, 1},
}

var faultKinds = []FaultKind{FaultStatement, FaultRead, FaultAfterCommit, FaultCrash, FaultRecordWrite, FaultPrune}

// Generate returns the history of o.Seed: o.Steps steps, a checkpoint
// every o.CheckpointEvery of them.
func Generate(o Options) []Step {
	o = o.withDefaults()
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed))
	total := 0
	for _, w := range stepWeights {
		total += w.weight
	}
	steps := make([]Step, 0, o.Steps)
	for i := range o.Steps {
		st := Step{Client: rng.IntN(o.Clients), Seed: rng.Uint64()}
		if o.CheckpointEvery > 0 && i > 0 && i%o.CheckpointEvery == 0 {
			st.Kind = StepCheckpoint
			steps = append(steps, st)
			continue
		}
		n := rng.IntN(total)
		for _, w := range stepWeights {
			if n < w.weight {
				st.Kind = w.kind
				break
			}
			n -= w.weight
		}
		switch st.Kind {
		case StepSync:
			switch n := rng.IntN(20); {
			case n == 0:
				st.Net = netLoseRequest
			case n < 3:
				st.Net = netLoseResponse
			}
		case StepFault:
			st.Fault = faultKinds[rng.IntN(len(faultKinds))]
		}
		steps = append(steps, st)
	}
	return steps
}
