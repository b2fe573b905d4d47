// Package syncdproc runs "syncd serve" as a child process for tests and
// tools that need real processes: several nodes starting at once, or a
// server killed with SIGKILL and restarted. It builds the binary from this
// module, starts it on ephemeral ports, learns its addresses from the
// startup log line and waits for /readyz.
package syncdproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Package is the import path of the server binary.
const Package = "github.com/syncd-dev/syncd/cmd/syncd"

// Build compiles the server binary into dir and returns its path. It runs
// "go build" from the current directory, which must lie inside the module
// (as a test's working directory does).
func Build(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "syncd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, Package)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", Package, err, b)
	}
	return out, nil
}

// WatchSources makes go test's result cache depend on the module's Go
// sources and go.mod/go.sum. The binary comes from a child "go build",
// which the cache does not see, so a suite that runs it would otherwise
// replay a cached pass after the server changed; the cache does see the
// files a running test stats, so each source is statted once.
func WatchSources(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum" {
			_, err := os.Stat(p)
			return err
		}
		return nil
	})
}

// BuildTemp compiles the server binary into a new temporary directory
// named after prefix; remove deletes the directory.
func BuildTemp(ctx context.Context, prefix string) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	if path, err = Build(ctx, dir); err != nil {
		remove()
		return "", nil, err
	}
	return path, remove, nil
}

// Options configure Start.
type Options struct {
	// Binary is the syncd executable.
	Binary string
	// Args follow "serve"; Start adds --listen and --admin-listen on
	// 127.0.0.1:0 unless Args set them.
	Args []string
	// Stdin, when set, is the child's standard input (see Barrier).
	Stdin *os.File
	// Wrap, when set, runs the server through "sh -c 'read _; exec …'"
	// so that it starts only when Stdin reaches end of file.
	Wrap bool
	// Log, when set, receives every line the server writes to stderr.
	Log io.Writer
	// Env adds KEY=value entries to the test's own environment.
	Env []string
}

// Node is one running server process.
type Node struct {
	cmd     *exec.Cmd
	started chan struct{}
	exited  chan struct{}
	waitErr error

	mu       sync.Mutex
	syncURL  string
	adminURL string
	tail     []string
}

// Start launches the server. It returns once the process exists; use
// WaitReady to wait until it serves.
func Start(o Options) (*Node, error) {
	args := append([]string{"serve"}, o.Args...)
	if !hasFlag(o.Args, "--listen") {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	if !hasFlag(o.Args, "--admin-listen") {
		args = append(args, "--admin-listen", "127.0.0.1:0")
	}
	var cmd *exec.Cmd
	if o.Wrap {
		// "read" returns at end of file: every node sharing one pipe
		// is released by the same close.
		cmd = exec.Command("/bin/sh", append([]string{"-c", `read _ ; exec "$0" "$@"`, o.Binary}, args...)...)
	} else {
		cmd = exec.Command(o.Binary, args...)
	}
	if o.Stdin != nil {
		cmd.Stdin = o.Stdin
	}
	if len(o.Env) > 0 {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	n := &Node{cmd: cmd, started: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Binary, err)
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		n.scan(stderr, o.Log)
	}()
	go func() {
		<-lines // Wait closes the pipe: read it to the end first
		n.waitErr = cmd.Wait()
		close(n.exited)
	}()
	return n, nil
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// scan reads the JSON log lines, keeps the last ones for Tail and picks
// the addresses out of the "syncd started" line.
func (n *Node) scan(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if log != nil {
			_, _ = fmt.Fprintln(log, line)
		}
		n.mu.Lock()
		n.tail = append(n.tail, line)
		if len(n.tail) > 40 {
			n.tail = n.tail[1:]
		}
		n.mu.Unlock()
		var entry struct {
			Msg      string `json:"msg"`
			SyncURL  string `json:"sync_url"`
			AdminURL string `json:"admin_url"`
		}
		if !bytes.HasPrefix(bytes.TrimSpace([]byte(line)), []byte("{")) || json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		if entry.Msg == "syncd started" && entry.AdminURL != "" {
			n.mu.Lock()
			n.syncURL = strings.TrimSuffix(entry.SyncURL, "/sync")
			n.adminURL = entry.AdminURL
			n.mu.Unlock()
			close(n.started)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// PID is the server's process id.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// BaseURL is the sync API base (mount included), known once started.
func (n *Node) BaseURL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.syncURL
}

// AdminURL is the admin listener's base URL, known once started.
func (n *Node) AdminURL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.adminURL
}

// Tail returns the last log lines (for failure messages).
func (n *Node) Tail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.tail, "\n")
}

// Exited is closed when the process has ended.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// ExitError is the process's exit status once Exited is closed.
func (n *Node) ExitError() error {
	<-n.exited
	return n.waitErr
}

// ErrExited reports a server that ended while it was waited for.
var ErrExited = errors.New("syncd exited")

// WaitReady waits until /readyz answers 200, polling every interval. It
// fails when the process exits first or ctx ends.
func (n *Node) WaitReady(ctx context.Context, interval time.Duration) error {
	select {
	case <-n.started:
	case <-n.exited:
		return fmt.Errorf("%w before it listened (%v):\n%s", ErrExited, n.waitErr, n.Tail())
	case <-ctx.Done():
		return fmt.Errorf("syncd did not start: %w\n%s", ctx.Err(), n.Tail())
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.AdminURL()+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-n.exited:
			t.Stop()
			return fmt.Errorf("%w before it was ready (%v):\n%s", ErrExited, n.waitErr, n.Tail())
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("syncd not ready: %w\n%s", ctx.Err(), n.Tail())
		case <-t.C:
		}
	}
}

// Kill ends the process with SIGKILL (no shutdown code runs) and waits
// for it.
func (n *Node) Kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// Stop asks for a graceful shutdown (SIGTERM) and waits up to grace
// before killing; it returns the exit status of a graceful end.
func (n *Node) Stop(grace time.Duration) error {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-n.exited:
		return n.waitErr
	case <-t.C:
		n.Kill()
		return fmt.Errorf("syncd did not stop within %v after SIGTERM", grace)
	}
}

// Barrier releases several waiting processes at the same instant: give
// Reader() to each as Stdin (with Options.Wrap) and call Release.
type Barrier struct {
	r, w *os.File
}

// NewBarrier makes the shared pipe.
func NewBarrier() (*Barrier, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &Barrier{r: r, w: w}, nil
}

// Reader is the end the processes wait on.
func (b *Barrier) Reader() *os.File { return b.r }

// Release closes the pipe: every waiting process reads end of file at once.
func (b *Barrier) Release() {
	_ = b.w.Close()
	_ = b.r.Close()
}
