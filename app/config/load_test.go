package config_test

import (
	"io"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/config"
)

// loadSettings loads args and env as `syncd serve` would. With wantErr
// it expects an error containing it and reports false; otherwise it
// fails on any error and returns the configuration.
func loadSettings(t *testing.T, args, env []string, wantErr string) (config.Config, bool) {
	t.Helper()
	res, err := config.Load(args, env, io.Discard)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want %q", err, wantErr)
		}
		return config.Config{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return res.Config, true
}
