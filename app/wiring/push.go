package wiring

import (
	"github.com/syncd-dev/syncd/adapters/crdt/yjsdoc"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// Value groups of host hooks. Provide into them with the helpers below.
const (
	GroupRowValidators   = "syncd.row_validators"
	GroupCRDTMergers     = "syncd.crdt_mergers"
	GroupCommitListeners = "syncd.commit_listeners"
	// GroupCommitValidators holds the whole-commit validators of the
	// server's own rule sources (--rules, the callouts): the pipeline runs
	// the host's first, then these in order, and the first that does not
	// accept decides (push.CommitValidators).
	GroupCommitValidators = "syncd.commit_validators"
)

// PushModule provides the commit pipeline (SPEC §A.2) every write goes
// through: a round's push, server commits, remote commands and backfill
// batches; with the host's validators, mergers, reaction planner and
// commit listeners provided into the groups above (app.Provide*), and
// the whole-commit validators of GroupCommitValidators after the host's.
var PushModule = fx.Module("syncd.push",
	fx.Provide(NewPushPipeline),
)

// PushPipelineParams are the inputs of the commit pipeline.
type PushPipelineParams struct {
	fx.In
	Config          config.Config
	Log             *zap.Logger
	Clock           ports.Clock
	Readiness       *platform.Readiness
	Store           ports.Storage            `optional:"true"`
	Declarations    []checkpoint.Declaration `optional:"true"`
	RowValidators   []ports.RowValidator     `group:"syncd.row_validators"`
	Mergers         []ports.CRDTMerger       `group:"syncd.crdt_mergers"`
	CommitValidator ports.CommitValidator    `optional:"true"`
	// CommitValidators run after the host's CommitValidator.
	CommitValidators []ports.CommitValidator `group:"syncd.commit_validators"`
	ReactionPlanner  ports.ReactionPlanner   `optional:"true"`
	// RulesReactions is the planner of --rules' reactions; a host's
	// ReactionPlanner beside it stops the start.
	RulesReactions ports.ReactionPlanner  `name:"syncd.rules_reactions" optional:"true"`
	Blobs          ports.BlobChecker      `optional:"true"`
	Listeners      []ports.CommitListener `group:"syncd.commit_listeners"`
	Metrics        *platform.Metrics      `optional:"true"`
	Events         ports.EventSink        `optional:"true"`
}

// NewPushPipeline builds the commit pipeline; nil without storage.
func NewPushPipeline(p PushPipelineParams) (*push.Pipeline, error) {
	if p.Store == nil {
		return nil, nil
	}
	planner, err := reactionPlanner(p.ReactionPlanner, p.RulesReactions, p.Store)
	if err != nil {
		return nil, err
	}
	var pm *push.Metrics
	if p.Metrics != nil && p.Metrics.Registry != nil {
		if pm, err = push.NewMetrics(p.Metrics.Registry); err != nil {
			return nil, err
		}
	}
	return push.New(push.Options{
		Metrics:         pm,
		Schema:          p.Readiness.Schema,
		Store:           p.Store,
		Declarations:    p.Declarations,
		RowValidators:   p.RowValidators,
		CommitValidator: push.CommitValidators(append([]ports.CommitValidator{p.CommitValidator}, p.CommitValidators...)...),
		ReactionPlanner: planner,
		Mergers:         withBuiltinMergers(p.Mergers),
		Blobs:           p.Blobs,
		Listeners:       p.Listeners,
		Events:          p.Events,
		MaxOperations:   p.Config.Round.MaxOperations,
		Limits:          p.Config.Limits.Domain(),
		Log:             p.Log.Named("sync"),
		Now:             p.Clock.Now,
	})
}

// BuiltinMergers are the CRDT mergers the server ships: yjs-doc, the one
// crdtType SPEC §5.10.1 defines.
func BuiltinMergers() []ports.CRDTMerger {
	return []ports.CRDTMerger{yjsdoc.New(yjsdoc.Options{})}
}

// withBuiltinMergers adds the built-in mergers a host did not replace.
func withBuiltinMergers(host []ports.CRDTMerger) []ports.CRDTMerger {
	out := append([]ports.CRDTMerger(nil), host...)
	for _, b := range BuiltinMergers() {
		replaced := false
		for _, h := range host {
			replaced = replaced || (h != nil && h.Type() == b.Type())
		}
		if !replaced {
			out = append(out, b)
		}
	}
	return out
}
