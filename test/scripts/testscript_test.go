// Package scripts_test checks the repository's shell entry points.
//
// scripts/test starts a throwaway PostgreSQL cluster when it finds the
// server binaries; these tests point it at fake initdb and pg_ctl
// programs that log what they were asked to do, end the script the way a
// closed pipe or a hang-up would, and require that the cluster was stopped
// and its directory deleted on every such exit.
package scripts_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const fakeInitdb = `#!/bin/sh
while [ $# -gt 0 ]; do
	case "$1" in -D) mkdir -p "$2"; shift ;; esac
	shift
done
`

// fakePgCtl records "start DIR" and "stop DIR" and keeps a postmaster.pid
// in DIR while "running", as the real one does.
const fakePgCtl = `#!/bin/sh
d=""; action=""
while [ $# -gt 0 ]; do
	case "$1" in -D) d="$2"; shift ;; start|stop) action="$1" ;; esac
	shift
done
echo "$action $d" >> "$FAKEPG_LOG"
case "$action" in
start)
	echo 1 > "$d/postmaster.pid"
	# A start that timed out leaves a running postmaster behind.
	[ -z "$FAKEPG_START_FAILS" ] || exit 1
	;;
stop) rm -f "$d/postmaster.pid" ;;
esac
`

// testExec stands in for the test binary (go test -exec): it says it runs,
// then waits for the release file before printing, so the test decides
// what the script's output stream looks like while go test is under way.
const testExec = `#!/bin/sh
echo running >> "$FAKEPG_LOG"
while [ ! -f "$FAKEPG_RELEASE" ]; do sleep 0.05; done
echo "output after the release"
sleep 1
echo "more output"
`

type fixture struct {
	dir, log, release, exec string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	if os.Geteuid() == 0 {
		// The script runs the server binaries as the postgres user.
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skip("running as root without a postgres user: scripts/test cannot start a cluster here")
		}
	}
	// Readable by the postgres user, unlike t.TempDir's 0700 directories.
	dir, err := os.MkdirTemp("", "syncd-scripttest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := fixture{
		dir:     dir,
		log:     filepath.Join(dir, "pg.log"),
		release: filepath.Join(dir, "release"),
		exec:    filepath.Join(dir, "testexec"),
	}
	for name, body := range map[string]string{"initdb": fakeInitdb, "pg_ctl": fakePgCtl, "testexec": testExec} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.log, 0o666); err != nil {
		t.Fatal(err)
	}
	return f
}

// command runs scripts/test on one small package with the fake cluster,
// in its own process group, as a terminal's job would be.
func (f fixture) command(t *testing.T, extraEnv ...string) *exec.Cmd {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "test"), "-count=1", "-exec", f.exec, "./domain/syncerr")
	cmd.Dir = root
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SYNCD_TEST_POSTGRES_URL", "SYNCD_REQUIRE_POSTGRES", "SYNCD_REQUIRE_SHARED", "RACE", "GO_TEST_FLAGS", "TMPDIR":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "SYNCD_TEST_PG_BIN="+f.dir, "FAKEPG_LOG="+f.log, "FAKEPG_RELEASE="+f.release, "TMPDIR="+f.dir)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// waitLog polls the fake cluster's log until it has a line starting with
// prefix; the deadline only bounds a hung run, it asserts nothing.
func (f fixture) waitLog(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if f.hasLine(t, prefix) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %q line in the fake cluster's log:\n%s", prefix, f.read(t))
}

func (f fixture) read(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f fixture) hasLine(t *testing.T, prefix string) bool {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader([]byte(f.read(t))))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return true
		}
	}
	return false
}

// requireStopped checks that the cluster started was stopped and its
// directory deleted.
func (f fixture) requireStopped(t *testing.T) {
	t.Helper()
	var started string
	sc := bufio.NewScanner(bytes.NewReader([]byte(f.read(t))))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "start "); ok {
			started = d
		}
	}
	if started == "" {
		t.Fatalf("the script never started the fake cluster:\n%s", f.read(t))
	}
	if !f.hasLine(t, "stop "+started) {
		t.Errorf("the cluster in %s was never stopped:\n%s", started, f.read(t))
	}
	if _, err := os.Stat(filepath.Dir(started)); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there (stat: %v)", filepath.Dir(started), err)
	}
}

func TestScriptStopsClusterWhenOutputCloses(t *testing.T) {
	f := newFixture(t)
	cmd := f.command(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	// Read what the script says until go test is running, then close the
	// reading end, as `./scripts/test | head` does.
	go func() { _, _ = io.Copy(io.Discard, io.LimitReader(r, 1)) }()
	f.waitLog(t, "running")
	_ = r.Close()
	if err := os.WriteFile(f.release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	f.requireStopped(t)
}

func TestScriptStopsClusterOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			if signal.Ignored(sig) {
				// Ignored on entry (nohup ignores SIGHUP), the signal stays
				// ignored in every child: bash cannot trap it, so it never
				// reaches the script.
				t.Skipf("%s is ignored by this process and so by the script", sig)
			}
			f := newFixture(t)
			cmd := f.command(t)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f.waitLog(t, "running")
			// The whole job gets the signal, as from a terminal.
			if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
				t.Fatal(err)
			}
			err := waitBounded(cmd, scriptExitWithin)
			if errors.Is(err, errStillRunning) {
				t.Fatalf("the script was still running %s after %s:\n%s", scriptExitWithin, sig, out.String())
			}
			if err == nil {
				t.Errorf("the script exited 0 after %s", sig)
			}
			f.requireStopped(t)
			if t.Failed() {
				fmt.Fprintf(os.Stderr, "script output:\n%s\n", out.String())
			}
		})
	}
}

// scriptExitWithin is how long a signalled script may take to stop its
// cluster and exit; one that takes longer is killed and the test fails
// then, not at the package's timeout.
const scriptExitWithin = time.Minute

var errStillRunning = errors.New("still running")

// waitBounded waits for cmd to exit; past d it kills cmd's process group
// and reports errStillRunning.
func waitBounded(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return errStillRunning
	}
}

func TestScriptStopsClusterWhoseStartFailed(t *testing.T) {
	f := newFixture(t)
	cmd := f.command(t, "FAKEPG_START_FAILS=1")
	if err := os.WriteFile(f.release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Without a database the script goes on and skips the PostgreSQL tests.
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/test: %v\n%s", err, out.String())
	}
	f.requireStopped(t)
}
