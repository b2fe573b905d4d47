package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/reactions"
	"github.com/syncd-dev/syncd/ports"
)

// GroupReactionHandlers is the value group of durable reaction handlers.
const GroupReactionHandlers = "syncd.reaction_handlers"

// Reaction delivery cadence and retention (SPEC §6.9 defaults).
const (
	reactionPollInterval   = time.Second
	reactionPruneInterval  = time.Hour
	reactionKeepCompleted  = 30 * 24 * time.Hour
	reactionKeepDeadLetter = 90 * 24 * time.Hour
	reactionPruneLimit     = 1000
)

// ProvideReactionHandler registers a durable reaction handler constructor.
func ProvideReactionHandler(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.ReactionHandler)), fx.ResultTags(`group:"`+GroupReactionHandlers+`"`)))
}

type reactionRunnerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Log       *zap.Logger
	Clock     ports.Clock
	Store     ports.Storage           `optional:"true"`
	Handlers  []ports.ReactionHandler `group:"syncd.reaction_handlers"`
	Events    ports.EventSink         `optional:"true"`
}

// registerReactionRunner delivers reactions in the background when the
// host registered handlers. A storage without the reaction queue fails the
// start rather than silently never delivering.
func registerReactionRunner(p reactionRunnerParams) error {
	if p.Store == nil || len(p.Handlers) == 0 {
		return nil
	}
	q, ok := p.Store.(ports.ReactionQueue)
	if !ok {
		return errors.New("reaction handlers are registered but the storage cannot deliver reactions")
	}
	log := p.Log.Named("reactions")
	r, err := reactions.New(reactions.Options{Queue: q, Handlers: p.Handlers, Events: p.Events, Log: log, Now: p.Clock.Now})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() { runReactions(ctx, p.Store, q, r, p.Clock, log) })
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	})
	return nil
}

func runReactions(ctx context.Context, st ports.Storage, q ports.ReactionQueue, r *reactions.Runner, clk ports.Clock, log *zap.Logger) {
	tick := time.NewTicker(reactionPollInterval)
	defer tick.Stop()
	lastPrune := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		parts, err := st.ListPartitions(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("list partitions for reaction delivery", zap.Error(err))
			}
			continue
		}
		prune := clk.Now().Sub(lastPrune) >= reactionPruneInterval
		for _, part := range parts {
			for ctx.Err() == nil {
				n, err := r.RunOnce(ctx, part.Partition)
				if err != nil {
					if ctx.Err() == nil {
						log.Warn("reaction pass failed", zap.String("partition", part.Partition), zap.Error(err))
					}
					break
				}
				if n == 0 {
					break
				}
			}
			if prune && ctx.Err() == nil {
				now := clk.Now()
				if _, err := q.PruneReactions(ctx, part.Partition, ports.ReactionPrune{
					CompletedBeforeMs:  now.Add(-reactionKeepCompleted).UnixMilli(),
					DeadLetterBeforeMs: now.Add(-reactionKeepDeadLetter).UnixMilli(),
					Limit:              reactionPruneLimit,
				}); err != nil && ctx.Err() == nil {
					log.Warn("reaction retention pass failed", zap.String("partition", part.Partition), zap.Error(err))
				}
			}
		}
		if prune {
			lastPrune = clk.Now()
		}
	}
}

// ReactionsModule delivers durable reactions with the registered handlers.
var ReactionsModule = fx.Module("syncd.reactions", fx.Invoke(registerReactionRunner))
