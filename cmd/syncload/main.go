// Command syncload is a load generator for SSP2 servers. It drives N
// virtual sync clients against one server URL over HTTP (POST /sync and
// GET /segments/{id}), speaking wire 2 or 3, and reports throughput,
// latency percentiles and errors per scenario:
//
//	syncload [flags] SCENARIO...
//
// Scenarios: push-pull, bootstrap-storm, catch-up, mixed-soak,
// maintenance-churn, slow-bodies, reconnect-storm, propagation, blobs
// (PUT and GET /blobs/{id}), operations (registered queries over POST
// /operations), engine-commit (the storage engine alone, no
// server), engine-http (the engine behind "syncload engine-serve", the
// thinnest HTTP server); "syncload -h" describes each. With --transport ws the clients run their rounds
// over the realtime socket (GET /realtime). The virtual clients are
// the project's Go client (package client); any protocol error
// fails the run: the exit status is 1 when a scenario recorded an error,
// 2 on usage errors.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/syncd-dev/syncd/domain/ssp2"
)

// options are the command line.
type options struct {
	url            string
	urls           []string // --url split: the clients take them in turn
	adminURL       string
	serverPID      int
	vus            int
	duration       time.Duration
	requests       int64
	dataset        int
	wire           int
	schemaPath     string
	table          string
	headers        headerList
	devHeaders     bool
	actorPrefix    string
	partition      string
	partitions     int
	projectPrefix  string
	stormProject   string
	ops            int
	maxOps         int
	rowsPerClient  int
	limitCommits   int
	limitRows      int
	maxPages       int
	accept         uint8
	images         bool
	signedURLs     bool
	external       bool
	inline         bool
	acceptEncoding string
	timeout        time.Duration
	prepareTimeout time.Duration
	maxErrors      int
	jsonOut        string
	cpuProfile     string
	runID          string
	slowConns      int
	slowDeclared   int64
	slowInterval   time.Duration
	transport      string
	idleSockets    int
	dialers        int
	engineDatabase string
	engineRead     bool
	blobBytes      int64
	operation      string
	operationParam string
	writeEvery     int
}

// headerList is a repeatable "Name: value" flag.
type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run0(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func parse(args []string, stderr io.Writer) (*options, []string, error) {
	o := &options{}
	fs := flag.NewFlagSet("syncload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8787", "base URL of the SSP2 server (its mount included); POST {url}/sync, GET {url}/segments/{id}; several comma-separated (nodes of one deployment): client i talks to the (i mod n)th, and propagation's receivers to the next one, so every pair crosses nodes")
	fs.StringVar(&o.adminURL, "admin-url", "", "admin listener of the server, to sample process_resident_memory_bytes from /metrics (e.g. http://127.0.0.1:8788)")
	fs.Int64Var(&o.blobBytes, "blob-bytes", 1<<20, "blobs: size of each blob uploaded and downloaded")
	fs.StringVar(&o.operation, "operation", "tasks.byProject", "operations: the registered query each client calls")
	fs.StringVar(&o.operationParam, "operation-param", "project", "operations: the query parameter that takes the client's scope value")
	fs.IntVar(&o.writeEvery, "write-every", 0, "operations: every Nth step pushes --ops upserts over the client's rows instead of querying (0: queries only)")
	fs.IntVar(&o.serverPID, "server-pid", 0, "pid of a server on this machine, to sample VmRSS/VmHWM from /proc")
	fs.IntVar(&o.vus, "vus", 10, "virtual clients")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each scenario runs")
	fs.Int64Var(&o.requests, "requests", 0, "stop a scenario after this many requests (0: only --duration)")
	fs.IntVar(&o.dataset, "dataset", 0, "bootstrap-storm: rows the storm project holds (checked when > 0); catch-up: commits to catch up on (0: 5000)")
	fs.IntVar(&o.wire, "wire", 3, "SSP2 wire version: 3, or 2 (the server needs --min-wire-version 2)")
	fs.StringVar(&o.schemaPath, "schema", "", "schema IR the server serves (default: the todos demo a bare `syncd serve` runs)")
	fs.StringVar(&o.table, "table", "", "table to load; its first scope pattern gives each client its scope value (default: the schema's first table scoped by a string column)")
	fs.Var(&o.headers, "H", "extra request header \"Name: value\" (repeatable), e.g. -H 'Authorization: Bearer TOKEN'")
	fs.BoolVar(&o.devHeaders, "dev-headers", true, "send development identity headers X-Syncd-Actor (one actor per client) and X-Syncd-Partition")
	fs.StringVar(&o.actorPrefix, "actor-prefix", "load-", "actor of client i is PREFIX+i")
	fs.StringVar(&o.partition, "partition", "", "X-Syncd-Partition (empty: the server's default)")
	fs.IntVar(&o.partitions, "partitions", 1, "spread the clients over this many partitions, named --partition (or \"load\") plus \"-\" and i mod N (push-pull, mixed-soak, maintenance-churn, propagation: the shared datasets of the other scenarios live in one partition)")
	fs.StringVar(&o.projectPrefix, "project-prefix", "load-", "scope value of client i is PREFIX+RUNID-i")
	fs.StringVar(&o.stormProject, "storm-project", "storm", "bootstrap-storm: the shared seeded scope value")
	fs.IntVar(&o.ops, "ops", 1, "upserts per pushed commit")
	fs.IntVar(&o.maxOps, "max-ops", 100, "catch-up: commits per seeding request")
	fs.IntVar(&o.rowsPerClient, "rows-per-client", 100, "distinct rows a client cycles its upserts over")
	fs.IntVar(&o.limitCommits, "limit-commits", 0, "PULL_HEADER limitCommits (0: server default)")
	fs.IntVar(&o.limitRows, "limit-rows", 0, "PULL_HEADER limitSnapshotRows (0: the Go client's default, the server's with --sqlite-images and 50000 without; -1: the server default)")
	fs.IntVar(&o.maxPages, "max-pages", 0, "PULL_HEADER maxSnapshotPages (0: server default)")
	fs.BoolVar(&o.external, "external-rows", true, "accept segment references (accept bit 1) besides inline rows")
	fs.BoolVar(&o.inline, "inline-rows", true, "accept inline rows segments (accept bit 0); false makes every bootstrap page a segment download")
	fs.BoolVar(&o.signedURLs, "signed-urls", false, "accept signed segment URLs (accept bit 3)")
	fs.BoolVar(&o.images, "sqlite-images", false, "accept sqlite-image segments (accept bit 2): tables larger than one page bootstrap as one image the client imports")
	fs.StringVar(&o.acceptEncoding, "accept-encoding", "identity", "Accept-Encoding of requests (identity, gzip, zstd)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.DurationVar(&o.prepareTimeout, "prepare-timeout", 5*time.Minute, "bound on a scenario's preparation (catch-up's writes)")
	fs.IntVar(&o.maxErrors, "max-errors", 100, "stop a scenario after this many errors (0: never)")
	fs.StringVar(&o.engineDatabase, "engine-database", "", "engine-commit: the database to commit on directly (a SQLite file path or a postgres:// URL)")
	fs.BoolVar(&o.engineRead, "engine-read", false, "engine-commit: follow each commit with a one-row read")
	fs.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file (\"-\": standard output)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile over the scenarios to this file (go tool pprof): where the loader's share of a shared machine goes")
	fs.StringVar(&o.runID, "run-id", "", "names this run's clients and projects (default: random)")
	fs.IntVar(&o.slowConns, "slow-conns", 1000, "slow-bodies: slow connections held open beside the clients")
	fs.Int64Var(&o.slowDeclared, "slow-declared-bytes", 16<<20, "slow-bodies: Content-Length each slow connection declares")
	fs.DurationVar(&o.slowInterval, "slow-interval", time.Second, "slow-bodies: pause between the bytes a slow connection sends")
	fs.StringVar(&o.transport, "transport", "http", "how the clients sync: http (POST /sync) or ws (rounds over their realtime socket, GET {url}/realtime)")
	fs.IntVar(&o.idleSockets, "idle-sockets", 0, "propagation: idle realtime sockets connected beside the measured pairs (each registered on a scope of its own); with --server-pid the server RSS they cost is reported")
	fs.IntVar(&o.dialers, "dialers", 16, "propagation: idle sockets connected concurrently while preparing")
	fs.Usage = func() {
		w := fs.Output()
		_, _ = fmt.Fprint(w, "Usage: syncload [flags] SCENARIO...\n\nScenarios:\n")
		for _, s := range scenarios() {
			_, _ = fmt.Fprintf(w, "  %-18s %s\n", s.name, s.about)
		}
		_, _ = fmt.Fprint(w, "\nExit status: 0 when every scenario ran without error, 1 on any protocol or transport error, 2 on usage errors.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	names := fs.Args()
	if len(names) == 0 {
		fs.Usage()
		return nil, nil, errors.New("name at least one scenario")
	}
	for _, n := range names {
		if findScenario(n) == nil {
			return nil, nil, fmt.Errorf("unknown scenario %q", n)
		}
		if n == "engine-commit" && o.engineDatabase == "" {
			return nil, nil, errors.New("engine-commit needs --engine-database")
		}
	}
	switch {
	case o.wire != 2 && o.wire != 3:
		return nil, nil, fmt.Errorf("--wire %d: want 2 or 3", o.wire)
	case o.vus < 1:
		return nil, nil, errors.New("--vus must be at least 1")
	case o.duration <= 0:
		return nil, nil, errors.New("--duration must be positive")
	case o.partitions < 1:
		return nil, nil, errors.New("--partitions must be at least 1")
	case o.ops < 1 || o.rowsPerClient < 1 || o.maxOps < 1:
		return nil, nil, errors.New("--ops, --rows-per-client and --max-ops must be positive")
	case o.transport != "http" && o.transport != "ws":
		return nil, nil, fmt.Errorf("--transport %q: want http or ws", o.transport)
	case o.idleSockets < 0 || o.dialers < 1:
		return nil, nil, errors.New("--idle-sockets must not be negative, --dialers must be positive")
	case o.operation == "" || o.operationParam == "":
		return nil, nil, errors.New("--operation and --operation-param must name a registered query and its parameter")
	case o.writeEvery < 0:
		return nil, nil, errors.New("--write-every must not be negative")
	case o.slowConns < 0 || o.slowDeclared < 1 || o.slowInterval <= 0:
		return nil, nil, errors.New("--slow-conns must not be negative, --slow-declared-bytes and --slow-interval must be positive")
	}
	for u := range strings.SplitSeq(o.url, ",") {
		if u = strings.TrimSpace(u); u != "" {
			o.urls = append(o.urls, u)
		}
	}
	if len(o.urls) == 0 {
		return nil, nil, errors.New("--url names no server")
	}
	o.url = o.urls[0]
	for _, h := range o.headers {
		if k, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(k) == "" {
			return nil, nil, fmt.Errorf("-H %q: want \"Name: value\"", h)
		}
	}
	if !o.inline && !o.external {
		return nil, nil, errors.New("--inline-rows=false needs --external-rows: a pull must accept rows one way")
	}
	if o.inline {
		o.accept |= ssp2.AcceptInlineRows
	}
	if o.external {
		o.accept |= ssp2.AcceptExternalRows
	}
	if o.signedURLs {
		o.accept |= ssp2.AcceptSignedURLs
	}
	if o.images {
		o.accept |= ssp2.AcceptSQLite
	}
	if o.runID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.runID = hex.EncodeToString(b[:])
	}
	return o, names, nil
}

// baseURL is the server of virtual client i: the --url list in turn.
func (e *env) baseURL(i int) string { return e.o.urls[i%len(e.o.urls)] }

// identity returns the request headers of virtual client i.
func (e *env) identity(i int) http.Header {
	h := http.Header{}
	if e.o.devHeaders {
		h.Set("X-Syncd-Actor", fmt.Sprintf("%s%d", e.o.actorPrefix, i))
		switch {
		case e.o.partitions > 1:
			base := e.o.partition
			if base == "" {
				base = "load"
			}
			h.Set("X-Syncd-Partition", fmt.Sprintf("%s-%d", base, i%e.o.partitions))
		case e.o.partition != "":
			h.Set("X-Syncd-Partition", e.o.partition)
		}
	}
	for _, kv := range e.o.headers {
		k, v, _ := strings.Cut(kv, ":")
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h
}

func run0(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "engine-serve" {
		return engineServe(ctx, args[1:], stdout, stderr)
	}
	o, names, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncload: %v\n", err)
		return 2
	}
	fx, err := loadFixture(o.schemaPath, o.table)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncload: %v\n", err)
		return 2
	}
	t, err := newHTTPTransport(o, fx)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncload: %v\n", err)
		return 2
	}
	defer t.Close()
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "syncload: %v\n", err)
			return 2
		}
		defer func() {
			if err := stop(); err != nil {
				_, _ = fmt.Fprintf(stderr, "syncload: cpu profile: %v\n", err)
			}
		}()
	}
	var results []*Result
	failed := false
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		sc := findScenario(name)
		e := newEnv(o, fx, t, o.runID, sc.kinds)
		r, err := run(ctx, e, sc)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "syncload: %v\n", err)
			failed = true
			continue
		}
		results = append(results, r)
		writeText(stdout, r)
		if r.Errors > 0 {
			failed = true
		}
	}
	if o.jsonOut != "" {
		if err := writeJSON(o.jsonOut, stdout, results); err != nil {
			_, _ = fmt.Fprintf(stderr, "syncload: %v\n", err)
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func writeText(w io.Writer, r *Result) {
	_, _ = fmt.Fprintf(w, "scenario %s: %d clients, wire %d, %.1fs, %s\n", r.Scenario, r.VUs, r.Wire, r.Seconds, r.URL)
	_, _ = fmt.Fprintf(w, "  %-10s %9s %10s %9s %9s %9s %9s %12s %10s\n", "op", "count", "per sec", "p50 ms", "p95 ms", "p99 ms", "max ms", "MB", "items")
	for _, op := range r.Ops {
		if op.Count == 0 {
			continue
		}
		_, _ = fmt.Fprintf(w, "  %-10s %9d %10.1f %9.2f %9.2f %9.2f %9.2f %12.1f %10d\n", op.Kind, op.Count, op.PerSecond,
			op.P50ms, op.P95ms, op.P99ms, op.MaxMs, float64(op.Bytes)/(1<<20), op.Items)
	}
	_, _ = fmt.Fprintf(w, "  requests %d (%.1f/s), errors %d\n", r.Requests, r.RequestsPerSec, r.Errors)
	for _, k := range sortedKeys(r.ErrorCodes) {
		_, _ = fmt.Fprintf(w, "    %-40s %d\n", k, r.ErrorCodes[k])
	}
	for _, s := range r.ErrorSamples {
		_, _ = fmt.Fprintf(w, "    e.g. %s\n", s)
	}
	if m := r.Memory; m != nil {
		_, _ = fmt.Fprintf(w, "  server RSS: start %s, peak %s, end %s (growth %+.1f MB)", mb(m.Start), mb(m.Peak), mb(m.End), float64(m.Growth)/(1<<20))
		if m.HWM > 0 {
			_, _ = fmt.Fprintf(w, ", VmHWM %s", mb(m.HWM))
		}
		_, _ = fmt.Fprintln(w)
		if m.ServerCPUSeconds > 0 {
			_, _ = fmt.Fprintf(w, "  CPU: server %.1fs (%.2f cores, %.0f µs per request), loader %.1fs (%.2f cores)\n",
				m.ServerCPUSeconds, m.ServerCPUSeconds/r.Seconds, 1e6*m.ServerCPUSeconds/max(float64(r.Requests), 1),
				m.LoaderCPUSeconds, m.LoaderCPUSeconds/r.Seconds)
		}
	}
	for k, v := range r.Notes {
		_, _ = fmt.Fprintf(w, "  %s: %v\n", k, v)
	}
}

func writeJSON(path string, stdout io.Writer, results []*Result) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// startCPUProfile profiles this process into path until the returned stop.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
