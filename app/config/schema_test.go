package config_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/config"
)

func TestSchemaWindowSettings(t *testing.T) {
	yml := writeYAML(t, "auth: dev\nschema:\n  - y3.json\n  - y2.json\n")
	for _, tc := range []struct {
		name       string
		args, env  []string
		wantErr    string
		wantFiles  []string
		wantWindow string
		wantDemo   bool
	}{
		{name: "the demo", wantDemo: true},
		{name: "one schema", args: []string{"--auth", "dev", "--schema", "v2.json"}, wantFiles: []string{"v2.json"}},
		{name: "repeated: current first", args: []string{"--auth", "dev", "--schema", "v3.json", "--schema", "v2.json", "--schema", "v1.json"},
			wantFiles: []string{"v3.json", "v2.json", "v1.json"}},
		{name: "a window file", args: []string{"--auth", "dev", "--schema-window", "window.txt"}, wantWindow: "window.txt"},
		{name: "a window file from the environment", env: []string{"SYNCD_AUTH=dev", "SYNCD_SCHEMA_WINDOW=w.json"}, wantWindow: "w.json"},
		{name: "a YAML list", args: []string{"--config", yml}, wantFiles: []string{"y3.json", "y2.json"}},
		{name: "the environment replaces the YAML list", args: []string{"--config", yml}, env: []string{"SYNCD_SCHEMA=e.json"}, wantFiles: []string{"e.json"}},
		{name: "flags replace the environment", args: []string{"--schema", "f3.json", "--schema", "f2.json"}, env: []string{"SYNCD_AUTH=dev", "SYNCD_SCHEMA=e.json"},
			wantFiles: []string{"f3.json", "f2.json"}},
		{name: "both ways at once", args: []string{"--auth", "dev", "--schema", "v3.json", "--schema-window", "w.txt"}, wantErr: "--schema and --schema-window are exclusive"},
		{name: "an empty older schema", args: []string{"--auth", "dev", "--schema", "v3.json", "--schema", ""}, wantErr: "an older schema needs a file"},
		{name: "a window needs --auth", args: []string{"--schema-window", "w.txt"}, wantErr: "--auth is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadSettings(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if !slices.Equal(cfg.SchemaFiles(), tc.wantFiles) || cfg.SchemaWindow.File != tc.wantWindow || cfg.DemoSchema() != tc.wantDemo {
				t.Fatalf("got --schema %v --schema-window %q (demo %t)", cfg.SchemaFiles(), cfg.SchemaWindow.File, cfg.DemoSchema())
			}
		})
	}
}

func TestSchemaWindowPrinted(t *testing.T) {
	res, err := config.Load([]string{"--auth", "dev", "--schema", "v3.json", "--schema", "v2.json"}, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.Config.Print(&out)
	if !strings.Contains(out.String(), "schema: v3.json, v2.json\n") || !strings.Contains(out.String(), "schema-window: \"\"\n") {
		t.Fatalf("printed:\n%s", out.String())
	}
}

func TestOneSchemaPrintedAsBefore(t *testing.T) {
	res, err := config.Load([]string{"--auth", "dev", "--schema", "v2.json"}, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.Config.Print(&out)
	if !strings.Contains(out.String(), "\nschema: \"v2.json\"\n") {
		t.Fatalf("printed:\n%s", out.String())
	}
}
