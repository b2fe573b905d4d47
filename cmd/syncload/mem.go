package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memWatch samples the server's resident memory during a run: from
// /proc/<pid>/status when --server-pid is given (same machine), else from
// process_resident_memory_bytes on the admin listener's /metrics.
type memWatch struct {
	pid      int
	metrics  string
	client   *http.Client
	mu       sync.Mutex
	first    int64
	last     int64
	peak     int64
	hwm      int64
	n        int
	failures int
	cpu0     float64 // server CPU seconds at the first sample
	cpu1     float64
	self0    float64 // the loader's own CPU seconds at the first sample
	self1    float64
}

// MemResult is the server memory over one run, in bytes.
type MemResult struct {
	Source string `json:"source"`
	Start  int64  `json:"startBytes"`
	Peak   int64  `json:"peakBytes"`
	End    int64  `json:"endBytes"`
	Growth int64  `json:"growthBytes"`
	// HWM is VmHWM, the process's peak RSS since it started (pid only).
	HWM     int64 `json:"vmHWMBytes,omitempty"`
	Samples int   `json:"samples"`
	// ServerCPUSeconds is the server's user+system CPU over the run and
	// LoaderCPUSeconds this process's (pid only).
	ServerCPUSeconds float64 `json:"serverCPUSeconds,omitempty"`
	LoaderCPUSeconds float64 `json:"loaderCPUSeconds,omitempty"`
}

func newMemWatch(o *options) *memWatch {
	m := &memWatch{pid: o.serverPID}
	if o.serverPID == 0 && o.adminURL != "" {
		m.metrics = strings.TrimRight(o.adminURL, "/") + "/metrics"
		m.client = &http.Client{Timeout: 2 * time.Second}
	}
	return m
}

func (m *memWatch) enabled() bool { return m.pid != 0 || m.metrics != "" }

func (m *memWatch) sample(ctx context.Context) {
	if !m.enabled() {
		return
	}
	var rss, hwm int64
	var err error
	var cpu, self float64
	if m.pid != 0 {
		rss, hwm, err = procStatus(m.pid)
		if err == nil {
			cpu, err = procCPU(m.pid)
		}
		self = selfCPU()
	} else {
		rss, err = m.scrape(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || rss == 0 {
		m.failures++
		return
	}
	if m.n == 0 {
		m.first = rss
		m.cpu0, m.self0 = cpu, self
	}
	m.cpu1, m.self1 = cpu, self
	m.n++
	m.last = rss
	m.peak = max(m.peak, rss)
	m.hwm = max(m.hwm, hwm)
}

// watch samples every second until ctx ends; the returned func waits for it.
func (m *memWatch) watch(ctx context.Context) func() {
	if !m.enabled() {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.sample(ctx)
			}
		}
	})
	return wg.Wait
}

func (m *memWatch) result() *MemResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == 0 {
		return nil
	}
	src := "admin /metrics process_resident_memory_bytes"
	if m.pid != 0 {
		src = fmt.Sprintf("/proc/%d/status", m.pid)
	}
	return &MemResult{Source: src, Start: m.first, Peak: m.peak, End: m.last, Growth: m.last - m.first, HWM: m.hwm, Samples: m.n,
		ServerCPUSeconds: m.cpu1 - m.cpu0, LoaderCPUSeconds: m.self1 - m.self0}
}

// procStatus reads VmRSS and VmHWM (bytes) of a local process.
func procStatus(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm, sc.Err()
}

func (m *memWatch) scrape(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.metrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return parseRSS(io.LimitReader(resp.Body, 8<<20))
}

// parseRSS finds process_resident_memory_bytes in a Prometheus text page.
func parseRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, err
			}
			return int64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no process_resident_memory_bytes in %s", "metrics")
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

// procCPU reads a local process's user+system CPU seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields count from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// utime and stime are fields 14 and 15 of the line (11 and 12 here).
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return (ut + st) / clockTicks, nil
}

// selfCPU returns this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
