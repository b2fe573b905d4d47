package platform

import (
	"testing"

	"github.com/syncd-dev/syncd/app/config"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name    string
		dev     bool
		level   string
		wantErr bool
	}{
		{"json info", false, "info", false},
		{"console debug", true, "debug", false},
		{"json error", false, "error", false},
		{"bad level", false, "loud", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Dev, cfg.LogLevel = tt.dev, tt.level
			log, err := NewLogger(cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && log.Core().Enabled(-2) {
				t.Fatal("below debug enabled")
			}
		})
	}
}
