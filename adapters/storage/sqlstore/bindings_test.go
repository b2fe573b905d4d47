package sqlstore

import (
	"fmt"
	"strings"
	"testing"
)

func TestBindingCache(t *testing.T) {
	var c bindingCache
	if _, ok := c.get("p", "c"); ok {
		t.Fatal("empty cache answered")
	}
	c.put("p", "c", "alice")
	tests := []struct {
		partition, client string
		want              string
		ok                bool
	}{
		{"p", "c", "alice", true},
		{"q", "c", "", false},
		// Key parts stay apart: no concatenation can alias another key.
		{"p\x00c", "", "", false},
		{"", "p\x00c", "", false},
	}
	for _, tt := range tests {
		if got, ok := c.get(tt.partition, tt.client); got != tt.want || ok != tt.ok {
			t.Errorf("get(%q, %q) = %q, %v; want %q, %v", tt.partition, tt.client, got, ok, tt.want, tt.ok)
		}
	}
	// Oversize ids are never kept, so the cache's memory stays bounded.
	long := strings.Repeat("x", bindingKeyMax+1)
	c.put("p", long, "alice")
	c.put("p", "c2", long)
	for _, k := range []string{long, "c2"} {
		if _, ok := c.get("p", k); ok {
			t.Errorf("oversize entry %.10q kept", k)
		}
	}
	// A full cache starts over rather than growing.
	for i := range bindingCacheMax + 1 {
		c.put("p", fmt.Sprint("k", i), "bob")
	}
	if n := len(c.m); n > bindingCacheMax {
		t.Fatalf("cache holds %d entries, bound %d", n, bindingCacheMax)
	}
	if got, ok := c.get("p", fmt.Sprint("k", bindingCacheMax)); !ok || got != "bob" {
		t.Fatalf("latest entry after a reset = %q, %v", got, ok)
	}
}
