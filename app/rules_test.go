package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/ports"
)

type hostPlanner struct{}

func (hostPlanner) PlanReactions(context.Context, ports.CommitValidation) ([]ports.PlannedReaction, error) {
	return nil, nil
}

// TestRulesReactionsBesideHostPlanner: reaction rules in --rules and a
// planner the program registers would both plan; the start says so
// instead of running one of them.
func TestRulesReactionsBesideHostPlanner(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte("reactions:\n  - {name: done, table: todos, type: todos.completed, payload: '{}'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Rules.File = file
	a := fx.New(app.Options(cfg, platform.ReadBuildInfo("test"), zap.NewNop(), wiring.StorageModule,
		app.ProvideReactionPlanner(func() hostPlanner { return hostPlanner{} })), fx.NopLogger)
	err := a.Err()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err = a.Start(ctx); err == nil {
			_ = a.Stop(ctx)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "the rules file has reactions, and the program registered its own reaction planner") {
		t.Fatalf("err = %v", err)
	}
	// Either alone starts.
	for _, opts := range [][]fx.Option{nil, {app.ProvideReactionPlanner(func() hostPlanner { return hostPlanner{} })}} {
		c := testConfig(t)
		if opts == nil {
			c.Rules.File = file
		}
		start(t, c, append(opts, wiring.StorageModule)...).app.RequireStop()
	}
}
