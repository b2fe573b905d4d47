package sqlstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// held builds the commits of seqs, one upsert each of rowBytes bytes.
func heldCommits(rowBytes int, seqs ...int64) []appended {
	out := make([]appended, len(seqs))
	for i, seq := range seqs {
		out[i] = heldForm(seq, ports.NewCommit{ActorID: "a", ClientID: "c", ClientCommitID: fmt.Sprint(seq), Changes: []commit.Change{{
			Table: "t", RowID: fmt.Sprint("r", seq), Op: commit.OpUpsert, RowVersion: 1,
			Scopes: map[string]string{"o": "x"}, Row: []byte(strings.Repeat("x", rowBytes)),
		}}})
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// span is the range (lo, hi] held for partition, or "none".
func span(r *recentLog, partition string) string {
	p := r.parts[partition]
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("(%d, %d]", p.lo, p.hi())
}

func TestRecentLogRange(t *testing.T) {
	type add struct {
		partition, epoch string
		seqs             []int64
		rowBytes         int
	}
	tests := []struct {
		name string
		// bound is the memory bound in commits of 200 bytes, beside one
		// partition's entry (0: the default).
		bound float64
		adds  []add
		want  map[string]string
	}{
		{"consecutive commits extend the range", 0,
			[]add{{"p", "e", []int64{1, 2}, 10}, {"p", "e", []int64{3}, 10}},
			map[string]string{"p": "(0, 3]"}},
		{"a gap starts afresh at the commit after it", 0,
			[]add{{"p", "e", []int64{1, 2}, 10}, {"p", "e", []int64{5, 6}, 10}},
			map[string]string{"p": "(4, 6]"}},
		{"a late group older than the range is ignored", 0,
			[]add{{"p", "e", []int64{1}, 10}, {"p", "e", []int64{4, 5}, 10}, {"p", "e", []int64{2, 3}, 10}},
			map[string]string{"p": "(3, 5]"}},
		{"a reused seq starts afresh", 0,
			[]add{{"p", "e", []int64{1, 2, 3}, 10}, {"p", "e", []int64{2}, 10}},
			map[string]string{"p": "(1, 2]"}},
		{"another epoch starts afresh", 0,
			[]add{{"p", "e", []int64{1, 2}, 10}, {"p", "f", []int64{3}, 10}},
			map[string]string{"p": "(2, 3]"}},
		{"no epoch drops the partition", 0,
			[]add{{"p", "e", []int64{1, 2}, 10}, {"p", "", []int64{3}, 10}},
			map[string]string{"p": "none"}},
		{"partitions are apart", 0,
			[]add{{"p", "e", []int64{1}, 10}, {"q", "e", []int64{7}, 10}, {"p", "e", []int64{2}, 10}},
			map[string]string{"p": "(0, 2]", "q": "(6, 7]"}},
		{"a partition holds at most recentMaxCommits", 0,
			[]add{{"p", "e", seqRange(1, recentMaxCommits+5), 1}},
			map[string]string{"p": fmt.Sprintf("(5, %d]", recentMaxCommits+5)}},
		{"a commit too large to hold: the range starts after it", 4,
			[]add{{"p", "e", []int64{1}, 10}, {"p", "e", []int64{2}, 2000}, {"p", "e", []int64{3}, 10}},
			map[string]string{"p": "(2, 3]"}},
		{"over the bound, the least recently added partition goes first", 4.5,
			[]add{{"p", "e", []int64{1}, 200}, {"q", "e", []int64{1, 2}, 200}, {"q", "e", []int64{3, 4}, 200}},
			map[string]string{"p": "none", "q": "(0, 4]"}},
		{"then the oldest commits of the one added to", 4.5,
			[]add{{"p", "e", []int64{1, 2, 3, 4, 5}, 200}},
			map[string]string{"p": "(1, 5]"}},
	}
	one := heldSize(&heldCommits(200, 1)[0].c)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecentLog(0)
			if tc.bound > 0 {
				r = newRecentLog(int64(tc.bound*float64(one)) + recentPartBytes)
			}
			for _, a := range tc.adds {
				r.add(a.partition, a.epoch, heldCommits(a.rowBytes, a.seqs...))
			}
			for p, want := range tc.want {
				if got := span(r, p); got != want {
					t.Errorf("%s holds %s, want %s", p, got, want)
				}
			}
			sum := int64(len(r.parts)) * recentPartBytes
			for _, p := range r.parts {
				for _, h := range p.commits[p.head:] {
					sum += h.size
				}
				if int64(len(p.commits)-p.head) != p.hi()-p.lo {
					t.Errorf("%s: %d commits for %s", p.partition, len(p.commits)-p.head, span(r, p.partition))
				}
			}
			if sum != r.bytes || r.bytes > r.maxBytes {
				t.Errorf("bytes %d, counted %d, bound %d", r.bytes, sum, r.maxBytes)
			}
		})
	}
}

// Windows are answered only inside the range and epoch held, and a
// window's commits are the held ones, by seq.
func TestRecentLogWindow(t *testing.T) {
	r := newRecentLog(0)
	r.add("p", "e", heldCommits(10, 4, 5, 6, 7))
	tests := []struct {
		epoch          string
		after, through int64
		want           []int64 // nil: not held
	}{
		{"e", 3, 7, []int64{4, 5, 6, 7}},
		{"e", 5, 6, []int64{6}},
		{"e", 2, 7, nil},
		{"e", 3, 8, nil},
		{"f", 3, 7, nil},
		{"", 3, 7, nil},
	}
	for _, tc := range tests {
		w := ports.CommitWindow{Table: "t", ScopeFilter: map[string][]string{"o": {"x"}}, AfterSeq: tc.after, ThroughSeq: tc.through, LimitChanges: 100}
		got, ok := r.window("p", tc.epoch, w)
		if ok != (tc.want != nil) {
			t.Errorf("(%d, %d] at %q: held %v", tc.after, tc.through, tc.epoch, ok)
			continue
		}
		var seqs []int64
		for _, c := range got {
			seqs = append(seqs, c.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.want) && ok {
			t.Errorf("(%d, %d]: seqs %v, want %v", tc.after, tc.through, seqs, tc.want)
		}
	}
	// A commit's bytes are its own copy: the caller's may be reused.
	row := []byte("abc")
	h := heldForm(9, ports.NewCommit{Changes: []commit.Change{{Table: "t", RowID: "r", Op: commit.OpUpsert, Scopes: map[string]string{"o": "x"}, Row: row}}})
	row[0] = 'z'
	if string(h.c.Changes[0].Row) != "abc" {
		t.Fatalf("held row %q follows the caller's bytes", h.c.Changes[0].Row)
	}
}

// A window from memory keeps, in seq order, each commit's changes to the
// table that the filter matches, drops commits left without any, and
// stops at the first commit that reaches the change limit, as the log's
// window read does.
func TestRecentLogWindowFilters(t *testing.T) {
	change := func(table, row, org, team string) commit.Change {
		sc := map[string]string{"org": org}
		if team != "" {
			sc["team"] = team
		}
		return commit.Change{Table: table, RowID: row, Op: commit.OpUpsert, RowVersion: 1, Scopes: sc, Row: []byte(row)}
	}
	log := [][]commit.Change{
		{change("t", "1a", "a", "x"), change("t", "1b", "b", "x")},                             // seq 1
		{change("u", "2a", "a", "x")},                                                          // seq 2: another table
		{change("t", "3a", "a", "y"), change("u", "3b", "a", "y"), change("t", "3c", "a", "")}, // seq 3
		{change("t", "4a", "b", "x")},                                                          // seq 4
		{change("t", "5a", "a", "x"), change("t", "5b", "a", "x")},                             // seq 5
	}
	r := newRecentLog(0)
	var cs []appended
	for i, chs := range log {
		cs = append(cs, heldForm(int64(i+1), ports.NewCommit{ActorID: "a", Changes: chs}))
	}
	r.add("p", "e", cs)
	tests := []struct {
		name   string
		table  string
		filter map[string][]string
		limit  int
		want   string // seq:rows per kept commit
	}{
		{"one value", "t", map[string][]string{"org": {"a"}}, 100, "1:1a 3:3a,3c 5:5a,5b"},
		{"two values", "t", map[string][]string{"org": {"a", "b"}}, 100, "1:1a,1b 3:3a,3c 4:4a 5:5a,5b"},
		{"two variables", "t", map[string][]string{"org": {"a"}, "team": {"x"}}, 100, "1:1a 5:5a,5b"},
		{"a variable the change lacks", "t", map[string][]string{"org": {"a"}, "team": {"y", "z"}}, 100, "3:3a"},
		{"another table", "u", map[string][]string{"org": {"a"}}, 100, "2:2a 3:3b"},
		{"nothing matches", "t", map[string][]string{"org": {"c"}}, 100, ""},
		{"the limit ends after the commit reaching it", "t", map[string][]string{"org": {"a"}}, 2, "1:1a 3:3a,3c"},
		{"a limit of one", "t", map[string][]string{"org": {"a"}}, 1, "1:1a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := r.window("p", "e", ports.CommitWindow{Table: tt.table, ScopeFilter: tt.filter, AfterSeq: 0, ThroughSeq: 5, LimitChanges: tt.limit})
			if !ok {
				t.Fatal("not answered from memory")
			}
			var parts []string
			for _, c := range got {
				var rows []string
				for _, ch := range c.Changes {
					rows = append(rows, ch.RowID)
				}
				parts = append(parts, fmt.Sprintf("%d:%s", c.Seq, strings.Join(rows, ",")))
			}
			if g := strings.Join(parts, " "); g != tt.want {
				t.Fatalf("got %q, want %q", g, tt.want)
			}
			if len(got) > 0 && cap(got[0].Changes) != len(got[0].Changes) {
				t.Fatal("a commit's changes are not capped: an append would write into the next commit's")
			}
		})
	}
}

// BenchmarkRecentWindow is a push-pull pull answered from memory: the
// window spans the commits of every client since the last pull, and one of
// them is the pulling client's scope's (50 clients, one commit each).
func BenchmarkRecentWindow(b *testing.B) {
	for _, clients := range []int{10, 50} {
		b.Run(fmt.Sprint("clients=", clients), func(b *testing.B) {
			r := newRecentLog(0)
			cs := make([]appended, 0, 1000)
			for seq := int64(1); seq <= 1000; seq++ {
				cs = append(cs, heldForm(seq, ports.NewCommit{ActorID: "a", Changes: []commit.Change{{
					Table: "t", RowID: fmt.Sprint("r", seq), Op: commit.OpUpsert, RowVersion: 1,
					Scopes: map[string]string{"o": fmt.Sprint("p", seq%int64(clients))}, Row: []byte("row"),
				}}}))
			}
			r.add("p", "e", cs)
			w := ports.CommitWindow{Table: "t", ScopeFilter: map[string][]string{"o": {"p0"}}, LimitChanges: 1000,
				AfterSeq: 1000 - int64(clients), ThroughSeq: 1000}
			b.ReportAllocs()
			for b.Loop() {
				if out, ok := r.window("p", "e", w); !ok || len(out) != 1 {
					b.Fatalf("%d commits, %v", len(out), ok)
				}
			}
		})
	}
}
