package vectortest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// recorder is a testing.TB that records whether a check skipped or
// failed the test it was given; the methods the checks never call are
// the nil embedded TB's, and panic.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()              {}
func (r *recorder) Skip(...any)          { r.skipped = true; runtime.Goexit() }
func (r *recorder) Skipf(string, ...any) { r.skipped = true; runtime.Goexit() }
func (r *recorder) Fatal(...any)         { r.failed = true; runtime.Goexit() }
func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	runtime.Goexit()
}

// outcome runs check against a recorder, as a test would call it.
func outcome(check func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() { defer close(done); check(r) }()
	<-done
	switch {
	case r.failed:
		return "fail"
	case r.skipped:
		return "skip"
	}
	return "pass"
}

// writeManifest writes a kind's manifest with n valid and m invalid cases.
func writeManifest(t *testing.T, dir string, n, m int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var cases, invalid string
	for i := range n {
		if i > 0 {
			cases += ","
		}
		cases += `{"name":"c"}`
	}
	for i := range m {
		if i > 0 {
			invalid += ","
		}
		invalid += `{"name":"i"}`
	}
	doc := `{"kind":"x","cases":[` + cases + `],"invalid":[` + invalid + `]}`
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Missing shared material skips, and fails under SYNCD_REQUIRE_SHARED=1
// (CI): a build without ../shared must not report every package ok. A
// vector set smaller than it is known to be fails either way.
func TestSharedMaterialFailsClosed(t *testing.T) {
	vectors := t.TempDir()
	writeManifest(t, filepath.Join(vectors, "v3", "request"), 5, 7)
	writeManifest(t, filepath.Join(vectors, "v3", "response"), 13, 1) // one case short
	gen := filepath.Join(vectors, "v3")
	for _, tc := range []struct {
		name             string
		check            func(tb testing.TB)
		optional, strict string // the outcome without and with SYNCD_REQUIRE_SHARED=1
	}{
		{"no vectors directory", func(tb testing.TB) { Dir(tb, "v2") }, "skip", "fail"},
		{"a generation's directory", func(tb testing.TB) { Dir(tb, "v3") }, "pass", "pass"},
		{"a complete set", func(tb testing.TB) { Load(tb, gen, "request") }, "pass", "pass"},
		{"a set one case short", func(tb testing.TB) { Load(tb, gen, "response") }, "fail", "fail"},
		{"a kind the generation holds, missing", func(tb testing.TB) { Load(tb, gen, "push") }, "skip", "fail"},
		{"a kind the generation never held", func(tb testing.TB) {
			if _, ok := Load(tb, filepath.Join(vectors, "v2"), "push"); ok {
				tb.Fatal("v2 push vectors loaded")
			}
		}, "pass", "pass"},
		{"a missing fixture", func(tb testing.TB) { Fixture(tb, "fixtures/none.ir.json") }, "skip", "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvVectorsDir, vectors)
			t.Setenv(EnvSharedDir, t.TempDir())
			t.Setenv(EnvRequire, "")
			if got := outcome(tc.check); got != tc.optional {
				t.Errorf("without %s: %s, want %s", EnvRequire, got, tc.optional)
			}
			t.Setenv(EnvRequire, "1")
			if got := outcome(tc.check); got != tc.strict {
				t.Errorf("with %s=1: %s, want %s", EnvRequire, got, tc.strict)
			}
		})
	}
}
