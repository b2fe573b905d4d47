// Package sim is a deterministic simulation harness: from one seed it
// generates a history of simulated clients (the Go client, each with its
// own replica) writing, syncing, going offline, losing requests and
// answers, and changing subscriptions and grants, while syncd's round,
// push, pull and segment use cases serve them in process, on a virtual
// clock, over a storage decorator that injects faults at seeded points
// (faults.go). An oracle model of the spec (model.go) decides every
// commit in the order the server committed them; the runner checks every
// answer, section, retained commit, row and replica against it
// (runner.go, clientops.go, check.go). A failing history shrinks
// (shrink.go) and replays with cmd/syncsim. docs/correctness.md says what
// is checked and what it found.
package sim
