package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
)

// TestNewTouchesNothingUntilConnect: New leaves the file system alone,
// so a server can check the rest of its configuration first; Connect
// creates the file, and a failing Connect names the path and the cause.
func TestNewTouchesNothingUntilConnect(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		path    string
		wantErr string // empty: Connect creates the file
	}{
		{"a missing file in an existing directory", filepath.Join(dir, "new.db"), ""},
		{"a missing directory", filepath.Join(dir, "absent", "new.db"), "its directory " + filepath.Join(dir, "absent")},
		{"a directory in the file's place", dir, "it is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := listDir(t, dir)
			st, err := sqlite.New(sqlite.Options{Path: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			if after := listDir(t, dir); after != before {
				t.Fatalf("New changed %s: %q, was %q", dir, after, before)
			}
			err = st.Connect(t.Context())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(tc.path); err != nil {
					t.Fatalf("Connect did not create the file: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("Connect: %v, want the path and %q", err, tc.wantErr)
			}
		})
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}
