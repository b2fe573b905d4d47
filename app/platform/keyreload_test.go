package platform_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/signedurl"
)

// The reloader swaps a watched file's keys when its content changes, and
// keeps the keys in use when the new content does not load.
func TestKeyReloaderSwapsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	urlFile, leaseFile := filepath.Join(dir, "url.keys"), filepath.Join(dir, "lease.keys")
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	write := func(p string, lines ...string) {
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(urlFile, a)
	write(leaseFile, a)
	signer, _ := signedurl.NewSigner([]byte(a))
	seals, _ := lease.NewKeySet([]byte(a))
	r, err := platform.NewKeyReloader(zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	reload := func(set func(...[]byte) error, p string) func() (int, error) {
		return func() (int, error) {
			loads++
			keys, err := platform.ReadKeyFile(p)
			if err != nil {
				return 0, err
			}
			return len(keys), set(keys...)
		}
	}
	r.Watch("--signed-url-key-file", urlFile, reload(signer.SetKeys, urlFile))
	r.Watch("--auth-lease-key-file", leaseFile, reload(seals.SetKeys, leaseFile))

	now := time.Unix(1000, 0)
	old, _ := signer.Mint("sha256:s", "d", "p", now, time.Minute)
	r.Check()
	if loads != 0 {
		t.Fatalf("unchanged files reloaded %d times", loads)
	}
	write(urlFile, b, a)
	write(leaseFile, b, a)
	r.Check()
	if loads != 2 || signer.Len() != 2 || seals.Len() != 2 {
		t.Fatalf("after the change: %d loads, %d and %d keys", loads, signer.Len(), seals.Len())
	}
	if _, err := signer.Verify(old, now); err != nil {
		t.Fatalf("a URL of the previous key: %v", err)
	}
	fresh, _ := signer.Mint("sha256:s", "d", "p", now, time.Minute)
	if only, _ := signedurl.NewSigner([]byte(b)); func() error { _, err := only.Verify(fresh, now); return err }() != nil {
		t.Fatal("new URLs are not signed with the new first key")
	}
	write(urlFile, "short")
	r.Check()
	if signer.Len() != 2 {
		t.Fatal("a file that does not load replaced the keys")
	}
	r.Check()
	if loads != 3 {
		t.Fatalf("a refused file is retried before it changes again: %d loads", loads)
	}
}
