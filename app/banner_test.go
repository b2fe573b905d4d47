package app_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
)

// The start banner of a development setup says what a browser app needs:
// the base URL, the admitted wire versions, the allowed origins and who
// a request without identity headers acts as.
func TestBannerTellsABrowserAppWhatItNeeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(*config.Config)
		want    []string
		wantNot []string
	}{
		{"the bare demo", func(*config.Config) {},
			[]string{"SSP2 wire 3)", "Development authentication: send header X-Syncd-Actor"},
			[]string{"wire 3 and 2", "Browser apps", "act as"}},
		{"a browser app of wire 2 on another origin", func(c *config.Config) {
			c.Round.MinWireVersion = 2
			c.HTTP.CORSOrigins = "http://localhost:5173"
			c.DevAuth.Actor = "demo-user"
		}, []string{"SSP2 wire 3 and 2)", "Browser apps may call it from: http://localhost:5173", `Requests without it act as "demo-user" (--dev-actor).`}, nil},
		{"wire-1 producers admitted", func(c *config.Config) { c.Round.MinWireVersion = 1 },
			[]string{"SSP2 wire 3, 2 and 1)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.set(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			h := start(t, cfg, app.WithBanner(&out))
			h.app.RequireStop()
			got := out.String()
			if !strings.Contains(got, "http://"+h.listeners.Addr(platform.ServerSync).String()) {
				t.Fatalf("no base URL in the banner:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("banner lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("banner says %q:\n%s", w, got)
				}
			}
		})
	}
}
