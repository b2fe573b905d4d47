package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// maxInspectBytes bounds what inspect reads.
const maxInspectBytes = 1 << 30

const inspectUsage = `Usage:
  syncd inspect [FILE|-]
  syncd inspect --table NAME --schema IR.json [FILE|-]

Reads an SSP2 envelope (magic SSP2) or an SSG2 rows segment (magic SSG2)
from FILE, or standard input when FILE is "-" or absent, and prints its
canonical JSON rendering (SPEC §11, the golden-vector form).

With --table and --schema the input is a bare sparse-row push payload,
decoded against that table of the schema IR (or of a column-table document
{"columns":[{name,type,nullable}],"primaryKey":…}).

Exit status: 0 on success, 1 when the input is invalid (the error code and
reason go to standard error), 2 on usage errors.

Flags:
`

// runInspect implements "syncd inspect".
func runInspect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("syncd inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", "", "decode a sparse-row push payload of this table")
	schemaPath := fs.String("schema", "", "schema IR (or column-table) JSON file for --table")
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), inspectUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 {
		_, _ = fmt.Fprintln(stderr, "syncd inspect: at most one input file")
		fs.Usage()
		return 2
	}
	if (*table == "") != (*schemaPath == "") {
		_, _ = fmt.Fprintln(stderr, "syncd inspect: --table and --schema go together")
		return 2
	}
	var codec *rowcodec.Codec
	if *table != "" {
		c, err := loadTableCodec(*schemaPath, *table)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "syncd inspect: %v\n", err)
			return 2
		}
		codec = c
	}
	input, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd inspect: %v\n", err)
		return 2
	}
	out, err := render(input, codec)
	if err != nil {
		code := syncerr.CodeOf(err)
		if code == "" {
			code = syncerr.InvalidRequest
		}
		reason := err.Error()
		var se *syncerr.Error
		if errors.As(err, &se) && se.Reason != "" {
			reason = se.Reason
		}
		_, _ = fmt.Fprintf(stderr, "%s: %s\n", code, reason)
		return 1
	}
	if _, err := stdout.Write(out); err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd inspect: %v\n", err)
		return 1
	}
	return 0
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if path != "" && path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInspectBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInspectBytes {
		return nil, fmt.Errorf("input exceeds %d bytes", maxInspectBytes)
	}
	return data, nil
}

// render decodes input and returns its rendering with a trailing newline.
func render(input []byte, codec *rowcodec.Codec) ([]byte, error) {
	var v canonjson.Value
	switch {
	case codec != nil:
		vals, err := codec.DecodeSparse(input, nil)
		if err != nil {
			return nil, err
		}
		v = rowcodec.RenderSparse(codec.Columns(), vals)
	case rowcodec.IsSegment(input):
		s, err := rowcodec.DecodeSegment(input)
		if err != nil {
			return nil, err
		}
		v = rowcodec.RenderSegment(s)
	case len(input) >= 3 && string(input[:3]) == "SSP":
		m, err := ssp2.Decode(input)
		if err != nil {
			return nil, err
		}
		return ssp2.RenderJSON(m), nil
	default:
		return nil, syncerr.Newf(syncerr.InvalidRequest, "input starts with neither the SSP2 nor the SSG2 magic")
	}
	return append(canonjson.Marshal(v, "  "), '\n'), nil
}

// loadTableCodec builds the row codec of one table from a schema IR file,
// or from a column-table document {"columns":[…],"primaryKey":…}.
func loadTableCodec(path, table string) (*rowcodec.Codec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Columns    []json.RawMessage `json:"columns"`
		PrimaryKey string            `json:"primaryKey"`
		Tables     json.RawMessage   `json:"tables"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if probe.Tables == nil && probe.Columns != nil {
		return columnTableCodec(data)
	}
	s, err := schema.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	t := s.Table(table)
	if t == nil {
		return nil, fmt.Errorf("%s: no table %q", path, table)
	}
	return rowcodec.New(t), nil
}

func columnTableCodec(data []byte) (*rowcodec.Codec, error) {
	var doc struct {
		Columns []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Nullable bool   `json:"nullable"`
		} `json:"columns"`
		PrimaryKey string `json:"primaryKey"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	cols := make([]schema.Column, len(doc.Columns))
	pk := -1
	for i, c := range doc.Columns {
		typ, ok := schema.ParseColumnType(c.Type)
		if !ok {
			return nil, fmt.Errorf("column %s: unknown type %q", c.Name, c.Type)
		}
		cols[i] = schema.Column{Name: c.Name, Type: typ, Nullable: c.Nullable}
		if c.Name == doc.PrimaryKey {
			pk = i
		}
	}
	if pk < 0 {
		return nil, fmt.Errorf("primary key %q is not a column", doc.PrimaryKey)
	}
	return rowcodec.NewColumns(cols, pk), nil
}
