package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
)

// Listeners reports the addresses the servers bound (useful with port 0).
type Listeners struct {
	mu    sync.RWMutex
	addrs map[string]net.Addr
}

// NewListeners returns an empty address book.
func NewListeners() *Listeners { return &Listeners{addrs: map[string]net.Addr{}} }

func (l *Listeners) set(name string, a net.Addr) {
	l.mu.Lock()
	l.addrs[name] = a
	l.mu.Unlock()
}

// Addr returns the bound address of the named server ("sync" or "admin"),
// or nil before it started.
func (l *Listeners) Addr(name string) net.Addr {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.addrs[name]
}

// Server names.
const (
	ServerSync  = "sync"
	ServerAdmin = "admin"
)

// serverParams are what registerServer needs from the graph.
type serverParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Log        *zap.Logger
	Listeners  *Listeners
}

// registerServer binds addr in OnStart (so a busy port fails the start),
// serves in a goroutine, and shuts down gracefully in OnStop. If serving
// fails after start, the whole app shuts down with exit code 1.
func registerServer(p serverParams, name, addr string, h http.Handler) {
	registerServerWith(p, name, addr, h, serverOptions{IdleTimeout: 120 * time.Second})
}

// serverOptions tune one listener.
type serverOptions struct {
	// IdleTimeout closes keep-alive connections idle this long. There is
	// no server-wide read timeout: it would cut long responses and the
	// realtime route; the sync route bounds its body read itself.
	IdleTimeout time.Duration
	// Bound, when set, runs in OnStart once the socket accepts connections.
	Bound func()
}

// newHTTPServer builds the server of one listener.
func newHTTPServer(h http.Handler, o serverOptions, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       o.IdleTimeout,
		ErrorLog:          zap.NewStdLog(log),
	}
}

// registerServerWith is registerServer with options.
func registerServerWith(p serverParams, name, addr string, h http.Handler, o serverOptions) {
	log := p.Log.With(zap.String("server", name))
	srv := newHTTPServer(h, o, log)
	done := make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", addr)
			if err != nil {
				close(done)
				return err
			}
			p.Listeners.set(name, ln.Addr())
			log.Info("listening", zap.String("addr", ln.Addr().String()))
			if o.Bound != nil {
				o.Bound()
			}
			go func() {
				defer close(done)
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("server failed", zap.Error(err))
					_ = p.Shutdowner.Shutdown(fx.ExitCode(1))
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			if err != nil {
				_ = srv.Close()
			}
			select {
			case <-done:
			case <-ctx.Done():
			}
			return err
		},
	})
}
