// Command chart draws bench/summary.svg from bench/summary.tsv: how many
// times the reference server's rate syncd reaches in each row of the
// side-by-side summary that opens bench/RESULTS.md.
//
//	go run ./bench/chart            # from the repository root
//	go run ./bench/chart -in F -out F
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	in := flag.String("in", "bench/summary.tsv", "the summary's figures")
	out := flag.String("out", "bench/summary.svg", "the chart to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	rows, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, render(rows), 0o644)
}

// row is one line of the summary: a workload, the unit of its rates, the
// reference's and syncd's rate.
type row struct {
	name, unit      string
	reference, mine float64
}

// parse reads the tab-separated summary: row, unit, reference, syncd and
// the engine's own limit (not charted); '#' lines are comments.
func parse(r io.Reader) ([]row, error) {
	var rows []row
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 4 {
			return nil, fmt.Errorf("line %d: want row, unit, reference, syncd (and engine), got %d fields", n, len(f))
		}
		ref, err1 := strconv.ParseFloat(f[2], 64)
		mine, err2 := strconv.ParseFloat(f[3], 64)
		if err := errors.Join(err1, err2); err != nil || ref <= 0 || mine <= 0 {
			return nil, fmt.Errorf("line %d: rates must be positive numbers (%v)", n, err)
		}
		rows = append(rows, row{name: f[0], unit: f[1], reference: ref, mine: mine})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no rows")
	}
	return rows, nil
}

// Layout of the chart, in SVG user units.
const (
	width   = 980
	labelW  = 200 // the row names
	barMaxW = 440 // the longest bar
	rowH    = 34
	top     = 48
	bottom  = 40
)

// render draws one horizontal bar per row, its length the ratio of
// syncd's rate to the reference's, with the 1× line where the reference
// stands.
func render(rows []row) []byte {
	most := 1.0
	for _, r := range rows {
		most = max(most, r.mine/r.reference)
	}
	scale := float64(barMaxW) / (float64(int(most)) + 1)
	height := top + rowH*len(rows) + bottom
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">syncd's rate as a multiple of the reference server's (medians of four rounds)</text>`+"\n", 12)
	for i, r := range rows {
		y := top + i*rowH
		ratio := r.mine / r.reference
		w := ratio * scale
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+18, html.EscapeString(r.name))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#2f6fb0"/>`+"\n", labelW, y+4, w, rowH-10)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.1f× (%s %s, reference %s)</text>`+"\n", float64(labelW)+w+6, y+18,
			ratio, num(r.mine), html.EscapeString(r.unit), num(r.reference))
	}
	// Ticks at every whole multiple, the reference's 1× drawn darker.
	axisY := top + rowH*len(rows)
	for k := 0; float64(k) <= most+1; k++ {
		x := float64(labelW) + float64(k)*scale
		stroke := "#cccccc"
		if k == 1 {
			stroke = "#b03a2e"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, top, x, axisY, stroke)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555555">%d×</text>`+"\n", x, axisY+16, k)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#b03a2e">reference</text>`+"\n", float64(labelW)+scale+4, top-6)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// num prints a rate with its significant digits and thousands separators.
func num(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
