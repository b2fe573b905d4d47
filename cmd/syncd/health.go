package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const defaultAdminListen = "127.0.0.1:8788"

// runHealth implements "syncd health": one GET of the admin listener's
// /readyz, exit 0 on 200 and 1 otherwise. It exists for container health
// checks: the scratch image has no shell or curl.
func runHealth(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("syncd health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "readiness URL (default http://ADDR/readyz, ADDR from SYNCD_ADMIN_LISTEN, an unspecified host read as 127.0.0.1, or "+defaultAdminListen+")")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long (not ready)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *timeout <= 0 {
		_, _ = fmt.Fprintln(stderr, "syncd health: takes only --url and a positive --timeout")
		return 2
	}
	if *url == "" {
		*url = "http://" + dialable(lookupEnv(environ, "SYNCD_ADMIN_LISTEN", defaultAdminListen)) + "/readyz"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := checkReady(ctx, *url); err != nil {
		_, _ = fmt.Fprintf(stderr, "syncd health: not ready: %v\n", err)
		return 1
	}
	_, _ = fmt.Fprintln(stdout, "ready")
	return 0
}

func checkReady(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// No proxy from the environment: the admin listener is local.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// dialable turns a listen address into one to connect to: a listener on
// all interfaces (":8788", "0.0.0.0:8788", "[::]:8788") answers on loopback.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// lookupEnv reads key from environ (KEY=VALUE entries, the last wins).
func lookupEnv(environ []string, key, def string) string {
	v := def
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key && val != "" {
			v = val
		}
	}
	return v
}
