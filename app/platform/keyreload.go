package platform

import (
	"context"
	"crypto/sha256"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// KeyFileReloader is an authenticator that re-reads its key file
// (adapters/auth/jwt.Authenticator with --jwt-key-file).
type KeyFileReloader interface {
	ReloadKeyFile() (int, error)
}

// keyFile is one watched file.
type keyFile struct {
	flag, path string
	// load re-reads path and swaps its keys; it returns how many are in use.
	load func() (int, error)
	sum  [32]byte // of the content in use (or last refused)
}

// KeyReloader watches the key files.
type KeyReloader struct {
	log     *zap.Logger
	files   []*keyFile
	results *prometheus.CounterVec
	mu      sync.Mutex
}

// NewKeyReloader returns a reloader that watches nothing yet.
func NewKeyReloader(log *zap.Logger, reg prometheus.Registerer) (*KeyReloader, error) {
	r := &KeyReloader{log: log, results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "syncd_key_reloads_total",
		Help: "Key file changes seen, by flag and result: loaded (the keys in use were replaced) or refused (the file did not load; the keys in use were kept).",
	}, []string{"flag", "result"})}
	if err := reg.Register(r.results); err != nil {
		return nil, err
	}
	return r, nil
}

// Watch adds a file whose current content is in use; load re-reads and
// swaps it.
func (r *KeyReloader) Watch(flag, path string, load func() (int, error)) {
	f := &keyFile{flag: flag, path: path, load: load}
	if b, err := os.ReadFile(path); err == nil {
		f.sum = sha256.Sum256(b)
	}
	for _, res := range []string{"loaded", "refused"} {
		r.results.WithLabelValues(flag, res)
	}
	r.files = append(r.files, f)
}

// Check reads every watched file and reloads the ones that changed.
func (r *KeyReloader) Check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			r.log.Warn("key file unreadable; the keys in use are kept", zap.String("flag", f.flag), zap.Error(err))
			continue
		}
		sum := sha256.Sum256(b)
		if sum == f.sum {
			continue
		}
		f.sum = sum
		n, err := f.load()
		if err != nil {
			r.results.WithLabelValues(f.flag, "refused").Inc()
			r.log.Error("key file changed but does not load; the keys in use are kept", zap.String("flag", f.flag), zap.Error(err))
			continue
		}
		r.results.WithLabelValues(f.flag, "loaded").Inc()
		r.log.Info("key file reloaded", zap.String("flag", f.flag), zap.Int("keys", n))
	}
}

// Run checks every interval on clk (0: never on a timer) and on each
// signal of hup.
func (r *KeyReloader) Run(clk Clock, interval time.Duration, hup chan os.Signal, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer signal.Stop(hup)
	var tick chan struct{}
	if interval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tick = make(chan struct{})
		go func() {
			for clk.Sleep(ctx, interval) == nil {
				select {
				case tick <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case <-stop:
			return
		case <-tick:
			r.Check()
		case <-hup:
			r.Check()
		}
	}
}

// Watched is how many key files r watches.
func (r *KeyReloader) Watched() int { return len(r.files) }
