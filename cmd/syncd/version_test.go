package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionStampedByMakefile builds syncd once with the -ldflags the
// Makefile passes (print-ldflags, with pinned values) and checks that
// `syncd version` reports them: a renamed variable or a typo in the -X
// paths would otherwise leave release binaries printing "commit: unknown".
func TestVersionStampedByMakefile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	for _, tool := range []string{"make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not in PATH", tool)
		}
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	mk := exec.Command("make", "-s", "-C", filepath.Join("..", ".."), "print-ldflags",
		"VERSION=v0.0.0-stamped", "COMMIT="+commit, "COMMIT_TIME=2026-01-02T03:04:05Z", "MODIFIED=true")
	ldflags, err := mk.Output()
	if err != nil {
		t.Fatalf("make print-ldflags: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "syncd")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace(string(ldflags)), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("syncd version: %v", err)
	}
	for _, want := range []string{
		"syncd v0.0.0-stamped\n",
		"commit:   " + commit + " (modified)\n",
		"built from a commit of 2026-01-02T03:04:05Z\n",
		"cgo:      false\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}
