package config

import (
	"flag"
	"fmt"
	"strings"
)

// Fanout modes: how commit notices and realtime events reach the other
// syncd nodes.
const (
	// FanoutAuto is postgres when --database is PostgreSQL, local otherwise.
	FanoutAuto = "auto"
	// FanoutLocal delivers within this process only (one node).
	FanoutLocal = "local"
	// FanoutPostgres uses LISTEN/NOTIFY on the --database PostgreSQL.
	FanoutPostgres = "postgres"
	// FanoutNATS uses core NATS publish/subscribe on --nats-url.
	FanoutNATS = "nats"
)

// NATS holds the settings of --fanout nats.
type NATS struct {
	// URL is one NATS server URL or several, comma-separated; a URL may
	// carry user:password@ or token@.
	URL string
	// CredentialsFile is a NATS credentials (.creds) file.
	CredentialsFile string
	// TLSCAFile verifies the server; TLSCertFile and TLSKeyFile are a
	// client certificate.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// SubjectPrefix heads the subjects, before the deployment's hash.
	SubjectPrefix string
}

// DefaultNATS returns the reference settings.
func DefaultNATS() NATS { return NATS{SubjectPrefix: "syncd"} }

func (c *Config) fanoutFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Fanout, "fanout", c.Fanout,
		"how commits and realtime events reach other nodes: auto (postgres with a PostgreSQL --database, local otherwise), local (this process only), postgres (LISTEN/NOTIFY) or nats (core NATS on --nats-url)")
	fs.StringVar(&c.NATS.URL, "nats-url", c.NATS.URL, "--fanout nats: NATS server URL, or several comma-separated (nats://, tls://; user:password@ or token@ authenticates)")
	fs.StringVar(&c.NATS.CredentialsFile, "nats-credentials-file", c.NATS.CredentialsFile, "--fanout nats: NATS credentials file (user JWT and NKey seed)")
	fs.StringVar(&c.NATS.TLSCAFile, "nats-tls-ca-file", c.NATS.TLSCAFile, "--fanout nats: PEM CAs that verify the NATS server's certificate (default: the system's)")
	fs.StringVar(&c.NATS.TLSCertFile, "nats-tls-cert-file", c.NATS.TLSCertFile, "--fanout nats: PEM client certificate for NATS (with --nats-tls-key-file)")
	fs.StringVar(&c.NATS.TLSKeyFile, "nats-tls-key-file", c.NATS.TLSKeyFile, "--fanout nats: PEM key of --nats-tls-cert-file")
	fs.StringVar(&c.NATS.SubjectPrefix, "nats-subject-prefix", c.NATS.SubjectPrefix, "--fanout nats: subject prefix; the deployment (a hash of the database and schema) follows it")
}

// FanoutMode resolves --fanout auto against --database.
func (c Config) FanoutMode() string {
	if c.Fanout != FanoutAuto && c.Fanout != "" {
		return c.Fanout
	}
	if kind, _, err := ParseDatabase(c.Database); err == nil && kind == Postgres {
		return FanoutPostgres
	}
	return FanoutLocal
}

func (c Config) validateFanout() []error {
	var errs []error
	switch c.Fanout {
	case FanoutAuto, FanoutLocal:
	case FanoutPostgres:
		if kind, _, err := ParseDatabase(c.Database); err == nil && kind != Postgres {
			errs = append(errs, fmt.Errorf("--fanout postgres needs a postgres:// --database"))
		}
	case FanoutNATS:
		// The nodes that hear each other are those sharing a database;
		// its name and schema pick the subjects.
		if kind, _, err := ParseDatabase(c.Database); err == nil && kind != Postgres {
			errs = append(errs, fmt.Errorf("--fanout nats needs a postgres:// --database (the nodes share it)"))
		}
		if c.NATS.URL == "" {
			errs = append(errs, fmt.Errorf("--fanout nats needs --nats-url"))
		}
		if !validSubject(c.NATS.SubjectPrefix) {
			errs = append(errs, fmt.Errorf("--nats-subject-prefix %q: want dot-separated tokens without spaces, '*' or '>'", c.NATS.SubjectPrefix))
		}
		if (c.NATS.TLSCertFile == "") != (c.NATS.TLSKeyFile == "") {
			errs = append(errs, fmt.Errorf("--nats-tls-cert-file and --nats-tls-key-file go together"))
		}
	default:
		errs = append(errs, fmt.Errorf("--fanout %q: want auto, local, postgres or nats", c.Fanout))
	}
	if c.Fanout != FanoutNATS && (c.NATS.URL != "" || c.NATS.CredentialsFile != "" || c.NATS.TLSCAFile != "" || c.NATS.TLSCertFile != "" || c.NATS.TLSKeyFile != "") {
		errs = append(errs, fmt.Errorf("the --nats-* settings need --fanout nats"))
	}
	return errs
}

// validSubject reports whether s is a literal NATS subject: dot-separated
// non-empty tokens without whitespace or wildcards.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n\f\v*>") {
			return false
		}
	}
	return true
}

// redactNATSURL masks the password or token of every URL in a
// comma-separated --nats-url.
func redactNATSURL(v string) string {
	urls := strings.Split(v, ",")
	for i, u := range urls {
		scheme := strings.Index(u, "://")
		at := strings.LastIndex(u, "@")
		if scheme < 0 || at < scheme {
			continue
		}
		userinfo := u[scheme+3 : at]
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			urls[i] = u[:scheme+3] + user + ":xxxxx" + u[at:]
		} else {
			urls[i] = u[:scheme+3] + "xxxxx" + u[at:]
		}
	}
	return strings.Join(urls, ",")
}
