package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"testing"
)

// fakeRows is a DirectReader over fixed rows; a nil cell is NULL, an
// int64 an integer and a string text.
type fakeRows [][]any

func (f fakeRows) ReadDirect(_ context.Context, _ string, _ []any, each func(DirectRow) error) error {
	for _, r := range f {
		if err := each(fakeRow(r)); err != nil {
			return err
		}
	}
	return nil
}

type fakeRow []any

func (r fakeRow) Int64(col int) (int64, bool) {
	v, ok := r[col].(int64)
	return v, ok
}

func (r fakeRow) Bytes(col int) []byte {
	switch v := r[col].(type) {
	case string:
		return []byte(v)
	case nil:
		return nil
	}
	panic("not text")
}

// A one-row read through the direct reader scans as database/sql's
// QueryRow would: NULLs into the Null types, the first row only, and no
// row or a NULL into a plain integer as an error.
func TestReadRowDirect(t *testing.T) {
	var (
		s1, s2 sql.NullString
		n1, n2 sql.NullInt64
		i      int
		i64    int64
	)
	dest := []any{&s1, &s2, &n1, &n2, &i, &i64}
	tests := []struct {
		name    string
		rows    fakeRows
		dest    []any
		wantErr bool
		noRows  bool
		check   func() bool
	}{
		{
			name: "values and NULLs",
			rows: fakeRows{{"epoch", nil, int64(7), nil, int64(1), int64(-3)}, {"second", "row", int64(0), int64(0), int64(0), int64(0)}},
			dest: dest,
			check: func() bool {
				return s1 == sql.NullString{String: "epoch", Valid: true} && !s2.Valid &&
					n1 == sql.NullInt64{Int64: 7, Valid: true} && !n2.Valid && i == 1 && i64 == -3
			},
		},
		{name: "empty text is not NULL", rows: fakeRows{{""}}, dest: []any{&s1}, check: func() bool { return s1.Valid && s1.String == "" }},
		{name: "no row", rows: nil, dest: dest, wantErr: true, noRows: true},
		{name: "NULL into an int", rows: fakeRows{{nil}}, dest: []any{&i}, wantErr: true},
		{name: "NULL into an int64", rows: fakeRows{{nil}}, dest: []any{&i64}, wantErr: true},
		{name: "unsupported destination", rows: fakeRows{{int64(1)}}, dest: []any{new(float64)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := readRowDirect(context.Background(), tt.rows, "SELECT", nil, tt.dest...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if errors.Is(err, sql.ErrNoRows) != tt.noRows {
				t.Fatalf("err %v, want sql.ErrNoRows %v", err, tt.noRows)
			}
			if tt.check != nil && !tt.check() {
				t.Fatalf("scanned %v %v %v %v %v %v", s1, s2, n1, n2, i, i64)
			}
		})
	}
}
