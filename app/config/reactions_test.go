package config_test

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
)

func TestReactionSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		wantErr string
		want    config.Reactions
	}{
		{name: "defaults: the spec's 30 and 90 days, hourly", want: config.Reactions{KeepCompleted: 720 * time.Hour, KeepDeadLetter: 2160 * time.Hour, PruneInterval: time.Hour}},
		{name: "flags", args: []string{"--reaction-keep-completed", "24h", "--reaction-keep-dead-letter", "48h", "--reaction-prune-interval", "0s"},
			want: config.Reactions{KeepCompleted: 24 * time.Hour, KeepDeadLetter: 48 * time.Hour}},
		{name: "environment", env: []string{"SYNCD_REACTION_KEEP_DEAD_LETTER=1h"},
			want: config.Reactions{KeepCompleted: 720 * time.Hour, KeepDeadLetter: time.Hour, PruneInterval: time.Hour}},
		{name: "zero completed retention", args: []string{"--reaction-keep-completed", "0s"}, wantErr: "--reaction-keep-completed"},
		{name: "negative dead-letter retention", args: []string{"--reaction-keep-dead-letter", "-1h"}, wantErr: "--reaction-keep-dead-letter"},
		{name: "negative interval", args: []string{"--reaction-prune-interval", "-1s"}, wantErr: "--reaction-prune-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadSettings(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if cfg.Reactions != tc.want {
				t.Fatalf("got %+v, want %+v", cfg.Reactions, tc.want)
			}
		})
	}
}
