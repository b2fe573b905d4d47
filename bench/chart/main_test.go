package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The committed chart is the one the committed figures draw: change
// bench/summary.tsv, run `go run ./bench/chart`, commit both.
func TestCommittedChartIsCurrent(t *testing.T) {
	f, err := os.Open("../summary.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rows, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../summary.svg")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(render(rows), committed) {
		t.Fatal("bench/summary.svg is not what bench/summary.tsv draws: run `go run ./bench/chart` and commit it")
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		in   string
		rows int
		err  string
	}{
		{"rows and comments", "# c\nA\treq/s\t10\t50\t7\n\nB\tx/s\t1.5\t3\t\n", 2, ""},
		{"too few fields", "A\treq/s\t10\n", 0, "want row, unit"},
		{"not a number", "A\treq/s\tten\t50\n", 0, "positive numbers"},
		{"a zero rate", "A\treq/s\t0\t50\n", 0, "positive numbers"},
		{"nothing", "# only\n", 0, "no rows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := parse(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(rows) != tc.rows {
				t.Fatalf("%d rows, err %v", len(rows), err)
			}
		})
	}
}

// A bar's length is its ratio: twice the reference is twice the 1× mark.
func TestBarsAreRatios(t *testing.T) {
	svg := string(render([]row{{"a", "r/s", 100, 200}, {"b", "r/s", 100, 400}}))
	for _, want := range []string{"2.0× (200 r/s, reference 100)", "4.0× (400 r/s, reference 100)", ">reference<"} {
		if !strings.Contains(svg, want) {
			t.Fatalf("chart lacks %q:\n%s", want, svg)
		}
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{13.5: "13.5", 614: "614", 4741: "4,741", 1234567: "1,234,567"} {
		if got := num(in); got != want {
			t.Fatalf("num(%v) = %s, want %s", in, got, want)
		}
	}
}
