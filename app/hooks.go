package app

import (
	"io"

	"github.com/syncd-dev/syncd/app/checkpoint"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/ports"
	"go.uber.org/fx"
)

// The hooks a host that embeds syncd plugs its own rules in with: each
// returns an fx.Option to pass to Options or Run beside the configuration.

// ProvideRowValidator registers a row validator constructor (SPEC §6.7).
func ProvideRowValidator(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.RowValidator)), fx.ResultTags(`group:"`+wiring.GroupRowValidators+`"`)))
}

// ProvideCRDTMerger registers a CRDT merger constructor (SPEC §5.10). A
// merger for a crdtType the server has built in ("yjs-doc") replaces the
// built-in one.
func ProvideCRDTMerger(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.CRDTMerger)), fx.ResultTags(`group:"`+wiring.GroupCRDTMergers+`"`)))
}

// ProvideCommitListener registers a listener of applied commits.
func ProvideCommitListener(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.CommitListener)), fx.ResultTags(`group:"`+wiring.GroupCommitListeners+`"`)))
}

// ProvideCommitValidator registers the whole-commit validator (SPEC §6.8).
func ProvideCommitValidator(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.CommitValidator))))
}

// ProvideReactionPlanner registers the durable reaction planner (SPEC §6.9).
func ProvideReactionPlanner(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.ReactionPlanner))))
}

// ProvideEventHook registers an event hook constructor (domain/event): the
// hook hears every operational event on a delivery goroutine of its own,
// never on the request path.
func ProvideEventHook(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.EventHook)), fx.ResultTags(`group:"`+wiring.GroupEventHooks+`"`)))
}

// WithEventHook registers a ready event hook, for a host that builds its
// hook before the graph:
//
//	app.WithEventHook(ports.EventHookFunc(func(ctx context.Context, r ports.EventRecord) { … }))
func WithEventHook(h ports.EventHook) fx.Option {
	return ProvideEventHook(func() ports.EventHook { return h })
}

// ProvideRemoteQuery registers a remote query constructor: a func
// returning an operations.Query (and optionally an error), whose
// parameters fx injects.
func ProvideRemoteQuery(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.ResultTags(`group:"`+wiring.GroupRemoteQueries+`"`)))
}

// ProvideRemoteCommand registers a remote command constructor: a func
// returning an operations.Command (and optionally an error).
func ProvideRemoteCommand(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.ResultTags(`group:"`+wiring.GroupRemoteCommands+`"`)))
}

// ProvideReactionHandler registers a durable reaction handler constructor.
func ProvideReactionHandler(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.ReactionHandler)), fx.ResultTags(`group:"`+wiring.GroupReactionHandlers+`"`)))
}

// WithBanner prints client instructions to w at start when the server runs
// the demo schema or --dev.
func WithBanner(w io.Writer) fx.Option { return fx.Supply(&platform.Banner{Out: w}) }

// WithCheckpointProgress registers a hook that hears every step of the
// backfills the graph's checkpoint runner (wiring.CheckpointModule) runs.
func WithCheckpointProgress(f func(checkpoint.Progress)) fx.Option {
	return fx.Supply(wiring.CheckpointProgress(f))
}
