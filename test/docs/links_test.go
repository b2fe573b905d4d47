// Package docs checks the repository's Markdown: every relative link
// reaches a file that exists, and every #fragment names a heading of its
// target as GitHub renders it. The README is a map into docs/; a section
// moved or renamed must not leave a link behind pointing at nothing.
package docs

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestRepositoryLinks checks every relative link of every Markdown file in
// the repository.
func TestRepositoryLinks(t *testing.T) {
	root := repoRoot(t)
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	// A wrong root or a walk that skipped too much would pass vacuously.
	for _, want := range []string{"README.md", "ARCHITECTURE.md", "CHANGELOG.md", "docs/limits.md", "bench/RESULTS.md"} {
		if !slices.Contains(files, want) {
			t.Fatalf("the walk of %s found no %s (found %v)", root, want, files)
		}
	}
	broken, checked, err := checkLinks(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link pattern no longer matches")
	}
	t.Logf("%d relative links in %d files", checked, len(files))
	for _, b := range broken {
		t.Error(b)
	}
}

// TestReadmeMapsEveryDoc keeps README.md the map of docs/: each file there
// is linked from it.
func TestReadmeMapsEveryDoc(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range links(string(readme)) {
		path, _, _ := strings.Cut(l.target, "#")
		linked[path] = true
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	for _, d := range docs {
		rel := "docs/" + filepath.Base(d)
		if !linked[rel] {
			t.Errorf("README.md does not link %s (add it to \"Where to read more\")", rel)
		}
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Running", "running"},
		{"JWT authentication", "jwt-authentication"},
		{"Events (embedding hosts)", "events-embedding-hosts"},
		{"Collaborative (CRDT) columns", "collaborative-crdt-columns"},
		{"Identifiers, lists and bodies", "identifiers-lists-and-bodies"},
		{"Dead-letter handling", "dead-letter-handling"},
		{"Realtime sockets (`GET /realtime`) and watch sockets (`GET /operations/realtime`)",
			"realtime-sockets-get-realtime-and-watch-sockets-get-operationsrealtime"},
		{"Bootstrap lanes (`app/pull`, SPEC §4.7, §5, §8.4)", "bootstrap-lanes-apppull-spec-47-5-84"},
		{"Wire-2 clients (`--min-wire-version 2`)", "wire-2-clients---min-wire-version-2"},
		{"`sync_leases` and the sweep", "sync_leases-and-the-sweep"},
		{"**Bold** and *emphasis*", "bold-and-emphasis"},
		{"A [linked](other.md#x) word", "a-linked-word"},
		{"Two  spaces", "two--spaces"},
		{"Ünïcode Straße", "ünïcode-straße"},
		{"What's new?", "whats-new"},
		{"", ""},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"levels and closing hashes", "# Title\n\n## Sub section ##\n###### Six\n####### seven is text\n", []string{"title", "sub-section", "six"}},
		{"duplicates take -1, -2", "# Notes\n## Notes\n### Notes\n", []string{"notes", "notes-1", "notes-2"}},
		{"a heading that spells a duplicate's suffix", "# a\n# a\n# a-1\n", []string{"a", "a-1", "a-1-1"}},
		{"fenced code is not a heading", "# Real\n```sh\n# a shell comment\n```\n~~~\n# tilde\n~~~\n", []string{"real"}},
		{"an indented fence inside a list", "1. step\n   ```sh\n   # comment\n   ```\n## After\n", []string{"after"}},
		{"hash without a space is text", "#hashtag\n", nil},
		{"up to three spaces of indent", "   # Indented\n", []string{"indented"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := anchors(tc.doc)
			var keys []string
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(keys, want) {
				t.Errorf("anchors = %v, want %v", keys, want)
			}
		})
	}
}

// TestCheckLinks runs the checker on a small tree: it must report every
// broken link and nothing else.
func TestCheckLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## Same\n\n## Same\n")
	write("bench/r.md", "# Results\n")
	write("node_modules/x/bad.md", "[gone](nowhere.md)\n")
	write("testdata/bad.md", "[gone](nowhere.md)\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md) [ok](docs/a.md#same-1) [ok](#top) [ok](bench/r.md#results) [ok](docs/)",
		"[ok, over two", "lines](docs/a.md#same)",
		"[ok](https://example.com/x.md#nope) [ok](mailto:a@b.c) [ok](<docs/a.md> \"title\")",
		"![ok](bench/r.md)",
		"`[in code](missing.md)` and ``[in `code`](missing.md)``",
		"```", "[in a fence](missing.md)", "```",
		"[missing file](docs/b.md)",
		"[missing anchor](docs/a.md#same-2)",
		"[missing local anchor](#bottom)",
		"[missing image](img.png)",
		"[escaped](docs/a%2Emd#a)",
		"[ref]: docs/none.md",
		"",
	}, "\n"))
	files, err := markdownFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "bench/r.md", "docs/a.md"}; !slices.Equal(files, want) {
		t.Fatalf("files = %v, want %v", files, want)
	}
	broken, checked, err := checkLinks(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if checked != 14 {
		t.Errorf("checked %d relative links, want 14", checked)
	}
	want := []string{
		`README.md:11: link "docs/b.md": no such file docs/b.md`,
		`README.md:12: link "docs/a.md#same-2": docs/a.md has no heading "same-2"`,
		`README.md:13: link "#bottom": README.md has no heading "bottom"`,
		`README.md:14: link "img.png": no such file img.png`,
		`README.md:16: link "docs/none.md": no such file docs/none.md`,
	}
	if !slices.Equal(broken, want) {
		t.Errorf("broken =\n%s\nwant\n%s", strings.Join(broken, "\n"), strings.Join(want, "\n"))
	}
}

// repoRoot is the directory above the test's holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// markdownFiles lists the .md files under root, slash-separated and
// relative to it, sorted; dependencies, fixtures and VCS data are not ours.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

// checkLinks answers one line per broken relative link of files, and how
// many relative links it checked.
func checkLinks(root string, files []string) (broken []string, checked int, err error) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := cache[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		cache[rel] = anchors(string(b))
		return cache[rel], nil
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, 0, err
		}
		for _, l := range links(string(b)) {
			if external(l.target) {
				continue
			}
			checked++
			rawPath, rawFrag, _ := strings.Cut(l.target, "#")
			fail := func(format string, args ...any) {
				broken = append(broken, fmt.Sprintf("%s:%d: link %q: %s", f, l.line, l.target, fmt.Sprintf(format, args...)))
			}
			p, err := url.PathUnescape(rawPath)
			if err != nil {
				fail("bad escape: %v", err)
				continue
			}
			frag, err := url.PathUnescape(rawFrag)
			if err != nil {
				fail("bad escape: %v", err)
				continue
			}
			target := f
			switch {
			case p == "":
			case strings.HasPrefix(p, "/"): // GitHub resolves these from the repository root
				target = strings.TrimPrefix(p, "/")
			default:
				target = filepath.ToSlash(filepath.Join(filepath.Dir(f), p))
			}
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
			if errors.Is(err, fs.ErrNotExist) {
				fail("no such file %s", target)
				continue
			}
			if err != nil {
				return nil, 0, err
			}
			if frag == "" || info.IsDir() || !strings.HasSuffix(target, ".md") {
				continue // line anchors of source files are GitHub's, not headings
			}
			a, err := anchorsOf(target)
			if err != nil {
				return nil, 0, err
			}
			if !a[frag] {
				fail("%s has no heading %q", target, frag)
			}
		}
	}
	return broken, checked, nil
}

type link struct {
	target string
	line   int
}

var (
	// inlineLink is [text](target) or ![alt](target), the target bare or
	// in <>, optionally followed by a title. Text may span lines.
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// refDef is a reference definition: [label]: target.
	refDef = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)`)
)

// links finds the links of a Markdown document outside fenced code blocks
// and code spans, with the line each starts on.
func links(doc string) []link {
	text := stripCodeSpans(strings.Join(blankFences(strings.Split(doc, "\n")), "\n"))
	var out []link
	add := func(start int, target string) {
		target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
		out = append(out, link{target: target, line: 1 + strings.Count(text[:start], "\n")})
	}
	for _, m := range inlineLink.FindAllStringSubmatchIndex(text, -1) {
		add(m[0], text[m[4]:m[5]])
	}
	for _, m := range refDef.FindAllStringSubmatchIndex(text, -1) {
		add(m[0], text[m[2]:m[3]])
	}
	slices.SortStableFunc(out, func(a, b link) int { return a.line - b.line })
	return out
}

// external reports whether a target has a scheme (http, https, mailto, ...)
// or is protocol-relative: those are not checked.
func external(target string) bool {
	return strings.HasPrefix(target, "//") || scheme.MatchString(target)
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// blankFences replaces the lines of fenced code blocks (``` or ~~~, the
// fence lines included) with empty lines, keeping line numbers.
func blankFences(lines []string) []string {
	out := make([]string, len(lines))
	var fence string // the open fence's run of ` or ~; empty outside
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " \t")
		run := fenceRun(trimmed)
		switch {
		case fence == "" && run != "":
			fence = run
		case fence != "" && run != "" && run[0] == fence[0] && len(run) >= len(fence) && strings.TrimSpace(trimmed[len(run):]) == "":
			fence = ""
		case fence == "":
			out[i] = l
		}
	}
	return out
}

// fenceRun is the run of three or more backticks or tildes s starts with.
func fenceRun(s string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(s) && s[n] == c {
			n++
		}
		if n >= 3 {
			return s[:n]
		}
	}
	return ""
}

// stripCodeSpans blanks code spans (a run of n backticks up to the next
// run of exactly n), keeping newlines so offsets still give line numbers.
// A run with no closing run is literal text.
func stripCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := runLen(b, i)
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := runLen(b, j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

func runLen(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] == '`' {
		n++
	}
	return n
}

// atxHeading is "#" to "######", then a space or the end, up to three
// spaces in. Setext headings (underlined) are not used in this repository.
var atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)

// anchors is the set of heading anchors GitHub gives a document: each
// heading's slug, a repeated slug suffixed -1, -2, ... in order.
func anchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range blankFences(strings.Split(doc, "\n")) {
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		base := slug(m[2])
		s := base
		for {
			if _, dup := seen[s]; !dup {
				break
			}
			seen[base]++
			s = fmt.Sprintf("%s-%d", base, seen[base])
		}
		seen[s] = 0
		out[s] = true
	}
	return out
}

var mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor for a heading: the rendered text (code spans
// without their backticks, links as their text) lowercased, punctuation
// other than hyphens and underscores removed, each space a hyphen.
func slug(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
