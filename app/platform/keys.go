package platform

import (
	"errors"
	"os"
	"strings"
)

// ReadKeyFile reads a file of secret keys, one per line, newest first, so
// a key rotates without a restart of every peer at once: prepend the new
// key (the newest signs, every key verifies), roll the change out, and
// drop the old key once what it signed has expired. Blank lines and lines
// starting with '#' are skipped; a line's trailing CR is dropped.
func ReadKeyFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys = append(keys, []byte(line))
	}
	if len(keys) == 0 {
		return nil, errors.New(path + ": no key")
	}
	return keys, nil
}
