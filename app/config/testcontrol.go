package config

import (
	"flag"
	"fmt"
	"net"
	"strings"
)

func (c *Config) testControlFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TestControlListen, "test-control-listen", c.TestControlListen,
		"host:port of the conformance test-control plane (loopback only; unauthenticated, for conformance harnesses); empty disables it")
}

// IsLoopbackLiteral reports whether addr's host is written as a loopback
// literal: 127.0.0.1, ::1 or localhost. The test-control plane takes
// nothing else, not even another 127/8 address or a name that resolves to
// one, so where it listens is obvious from the command line.
func IsLoopbackLiteral(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	switch strings.ToLower(host) {
	case "127.0.0.1", "::1", "localhost":
		return true
	}
	return false
}

func (c *Config) validateTestControl() []error {
	a := c.TestControlListen
	if a == "" {
		return nil
	}
	var errs []error
	if _, _, err := net.SplitHostPort(a); err != nil {
		return []error{fmt.Errorf("--test-control-listen %q: want host:port", a)}
	}
	if !IsLoopbackLiteral(a) {
		errs = append(errs, fmt.Errorf("--test-control-listen %s: the test-control plane has no authentication and lets any caller create servers, grant scopes and move their clocks; "+
			"it listens only on 127.0.0.1, ::1 or localhost", a))
	}
	if (a == c.Listen || a == c.AdminListen) && !strings.HasSuffix(a, ":0") {
		errs = append(errs, fmt.Errorf("--test-control-listen %s must differ from --listen and --admin-listen", a))
	}
	return errs
}
