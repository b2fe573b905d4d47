// Package yjsdiff_test checks syncd's yjs-doc merger (domain/yjs) against
// the reference itself: gen.mjs drives yjs from the npm registry (the
// version package-lock.json pins) under Node to build random documents and
// edit histories, and records what the reference merger returns for each
// (stored, incoming) pair; the test demands the same bytes.
//
// The Node packages are installed with `npm ci` into a cache directory
// outside the repository ($SYNCD_YJS_CACHE, default ~/.cache/syncd-yjs),
// keyed by the contents of this directory. Without Node and npm the test
// is skipped with a loud message, except under CI=true, where it fails.
//
// SYNCD_YJSDIFF_HISTORIES (default 120, about 3,300 cases; half under the
// race detector) and SYNCD_YJSDIFF_SEED (default 1) choose the run;
// SYNCD_YJSDIFF_INSTALL_ONLY=1 installs the packages and stops (CI warms
// the cache with it).
package yjsdiff_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/yjs"
	"github.com/syncd-dev/syncd/test/testenv"
)

var files = []string{"package.json", "package-lock.json", "gen.mjs"}

func TestMergeMatchesYjs(t *testing.T) {
	dir := reference(t)
	if os.Getenv("SYNCD_YJSDIFF_INSTALL_ONLY") == "1" {
		t.Logf("reference packages installed in %s", dir)
		return
	}
	histories := envInt(t, "SYNCD_YJSDIFF_HISTORIES", testenv.Scale(120, 2))
	seed := envInt(t, "SYNCD_YJSDIFF_SEED", 1)
	out := filepath.Join(t.TempDir(), "cases.jsonl")
	cmd := exec.Command("node", "gen.mjs", strconv.Itoa(seed), strconv.Itoa(histories), out)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gen.mjs: %v\n%s", err, stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var total, identical, bothFail, refused int
	kinds := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<28)
	for sc.Scan() {
		var c struct {
			K       string
			S, I, E *string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("case %d: %v", total+1, err)
		}
		total++
		kinds[c.K]++
		stored, incoming, want := b64(t, c.S), b64(t, c.I), b64(t, c.E)
		got, err := yjs.Merge(stored, incoming, yjs.Limits{})
		switch {
		case c.E == nil && err != nil:
			bothFail++
		case c.E == nil:
			t.Errorf("case %d (%s): the reference fails, syncd merged\n stored %s\nincoming %s", total, c.K, hex.EncodeToString(stored), hex.EncodeToString(incoming))
		case err != nil && c.K == "mutated":
			// Corrupted updates the reference still applies, which syncd
			// refuses (documented in bench/RESULTS.md): a merge failure.
			refused++
		case err != nil:
			t.Errorf("case %d (%s): %v\n stored %s\nincoming %s", total, c.K, err, hex.EncodeToString(stored), hex.EncodeToString(incoming))
		case !bytes.Equal(got, want):
			t.Errorf("case %d (%s): bytes differ\n stored %s\nincoming %s\n    got %s\n   want %s", total, c.K,
				hex.EncodeToString(stored), hex.EncodeToString(incoming), hex.EncodeToString(got), hex.EncodeToString(want))
		default:
			identical++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if total < histories*10 {
		t.Fatalf("only %d cases from %d histories", total, histories)
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	var mix []string
	for _, k := range names {
		mix = append(mix, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	t.Logf("seed %d: %d cases (%s): %d byte-identical, %d failed in both, %d corrupted updates refused",
		seed, total, strings.Join(mix, ", "), identical, bothFail, refused)
}

func b64(t *testing.T, p *string) []byte {
	if p == nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(*p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// reference returns a directory holding gen.mjs with the pinned packages
// installed, installing them on first use.
func reference(t *testing.T) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("the differential yjs test needs Node.js and npm in CI: %s", msg)
		}
		t.Logf("\n%s\n*** SKIPPING the differential test against yjs: %s\n%s", strings.Repeat("*", 78), msg, strings.Repeat("*", 78))
		t.Skip(msg)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable("%s is not on PATH", tool)
		}
	}
	h := sha256.New()
	contents := map[string][]byte{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		contents[name] = b
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	root := os.Getenv("SYNCD_YJS_CACHE")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			unavailable("no home directory for the package cache (set SYNCD_YJS_CACHE): %v", err)
		}
		root = filepath.Join(home, ".cache", "syncd-yjs")
	}
	dir := filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "yjs", "package.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(root, "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range contents {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		unavailable("npm ci failed: %v\n%s", err, out)
	}
	// Another run may have installed the same directory meanwhile.
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "yjs", "package.json")); statErr != nil {
			t.Fatal(err)
		}
	}
	return dir
}
