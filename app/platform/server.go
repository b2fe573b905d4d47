package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
)

// Listeners binds the configured listener addresses first thing at
// start, before the database is opened, and reports the addresses bound
// (useful with port 0). Each server takes its socket when it starts
// serving.
type Listeners struct {
	mu    sync.RWMutex
	addrs map[string]net.Addr
	// bound are the sockets no server has taken yet.
	bound map[string]net.Listener
}

// ListenersParams are the inputs of NewListeners.
type ListenersParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
}

// NewListeners binds --listen, --admin-listen and (when set)
// --test-control-listen in an OnStart hook; a busy, unknown or refused
// address fails the start, named by its flag. wiring.ChecksFirst constructs it
// before the storage, so the hook runs before the database is touched.
// Sockets no server took by the stop are closed then.
func NewListeners(p ListenersParams) *Listeners {
	l := &Listeners{addrs: map[string]net.Addr{}, bound: map[string]net.Listener{}}
	want := []struct{ name, addr string }{
		{ServerSync, p.Config.Listen},
		{ServerAdmin, p.Config.AdminListen},
	}
	if p.Config.TestControlListen != "" {
		want = append(want, struct{ name, addr string }{ServerTestControl, p.Config.TestControlListen})
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			for _, w := range want {
				if _, err := l.bind(ctx, w.name, w.addr); err != nil {
					l.closeUntaken()
					return err
				}
			}
			return nil
		},
		OnStop: func(context.Context) error {
			l.closeUntaken()
			return nil
		},
	})
	return l
}

// listenFlags name each server's address flag in bind errors.
var listenFlags = map[string]string{
	ServerSync:        "--listen",
	ServerAdmin:       "--admin-listen",
	ServerTestControl: "--test-control-listen",
}

// bind listens on addr for the named server and keeps the socket until
// a server takes it.
func (l *Listeners) bind(ctx context.Context, name, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		flag := listenFlags[name]
		if flag == "" {
			flag = name + " listener"
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err // "bind: address already in use" without the repeated address
		}
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	l.mu.Lock()
	l.addrs[name] = ln.Addr()
	l.bound[name] = ln
	l.mu.Unlock()
	return ln, nil
}

// take hands the named server its socket, binding addr now when start
// did not (a server outside the configured three).
func (l *Listeners) take(ctx context.Context, name, addr string) (net.Listener, error) {
	l.mu.Lock()
	ln, ok := l.bound[name]
	delete(l.bound, name)
	l.mu.Unlock()
	if ok {
		return ln, nil
	}
	if _, err := l.bind(ctx, name, addr); err != nil {
		return nil, err
	}
	return l.take(ctx, name, addr)
}

// closeUntaken closes the sockets no server took (a start that failed
// between binding and serving).
func (l *Listeners) closeUntaken() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, ln := range l.bound {
		_ = ln.Close()
		delete(l.bound, name)
	}
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
	ServerSync        = "sync"
	ServerAdmin       = "admin"
	ServerTestControl = "test-control"
)

// ServerParams are what RegisterServer needs from the graph.
type ServerParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Log        *zap.Logger
	Listeners  *Listeners
}

// RegisterServer serves on the socket NewListeners bound for name (or
// binds addr itself) in OnStart, in a goroutine, and shuts down gracefully in OnStop. If serving
// fails after start, the whole app shuts down with exit code 1.
func RegisterServer(p ServerParams, name, addr string, h http.Handler) {
	RegisterServerWith(p, name, addr, h, ServerOptions{IdleTimeout: 120 * time.Second})
}

// ServerOptions tune one listener.
type ServerOptions struct {
	// IdleTimeout closes keep-alive connections idle this long. There is
	// no server-wide read timeout: it would cut long responses and the
	// realtime route; the sync route bounds its body read itself.
	IdleTimeout time.Duration
	// Bound, when set, runs in OnStart once the socket accepts connections.
	Bound func()
}

// newHTTPServer builds the server of one listener.
func newHTTPServer(h http.Handler, o ServerOptions, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       o.IdleTimeout,
		ErrorLog:          zap.NewStdLog(log),
	}
}

// RegisterServerWith is RegisterServer with options.
func RegisterServerWith(p ServerParams, name, addr string, h http.Handler, o ServerOptions) {
	log := p.Log.With(zap.String("server", name))
	srv := newHTTPServer(h, o, log)
	done := make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			ln, err := p.Listeners.take(ctx, name, addr)
			if err != nil {
				close(done)
				return err
			}
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
