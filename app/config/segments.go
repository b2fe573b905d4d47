package config

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Segment store kinds.
const (
	SegmentStoreDB = "db"
	SegmentStoreFS = "fs"
)

// Segments are the segment cache and download settings (SPEC §5).
type Segments struct {
	// Store is where built segments live: db (tables in the sync
	// database) or fs (a directory, see Dir).
	Store string
	// Dir is the directory of --segment-store fs.
	Dir string
	// TTL is a publication's lifetime (SPEC §5.1 default 24 h).
	TTL time.Duration
	// SweepInterval is how often expired segments are forgotten (0 never).
	SweepInterval time.Duration
	// SignedURLKeyFile holds the HMAC key of native signed URLs (at least
	// 32 bytes); empty turns signed URLs off.
	SignedURLKeyFile string
	// SignedURLTTL is a signed URL's lifetime (at most 15 minutes).
	SignedURLTTL time.Duration
	// PublicURL is the externally visible base URL of the sync API,
	// mount included, that signed URLs start with (e.g.
	// https://sync.example.com/api). Required with a signed-URL key.
	PublicURL string
	// Images builds SQLite-image segments (SPEC §5.3) for clients that
	// accept them; off, stored images are still served.
	Images bool
	// ImageDir holds the scratch files of images being built (""
	// the system temporary directory).
	ImageDir string
}

// DefaultSegments returns the reference defaults.
func DefaultSegments() Segments {
	return Segments{Store: SegmentStoreDB, TTL: 24 * time.Hour, SweepInterval: 10 * time.Minute, SignedURLTTL: 5 * time.Minute, Images: true}
}

func (s *Segments) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.Store, "segment-store", s.Store, "where bootstrap segments are stored: db (the sync database) or fs (--segment-dir)")
	fs.StringVar(&s.Dir, "segment-dir", s.Dir, "directory of --segment-store fs")
	fs.DurationVar(&s.TTL, "segment-ttl", s.TTL, "lifetime of a built segment before clients must re-pull")
	fs.DurationVar(&s.SweepInterval, "segment-sweep-interval", s.SweepInterval, "how often expired segments are deleted (0 never)")
	fs.StringVar(&s.SignedURLKeyFile, "signed-url-key-file", s.SignedURLKeyFile, "file holding the HMAC key (32+ bytes) of segment signed URLs; empty disables signed URLs")
	fs.DurationVar(&s.SignedURLTTL, "signed-url-ttl", s.SignedURLTTL, "lifetime of a segment signed URL (at most 15m)")
	fs.StringVar(&s.PublicURL, "public-url", s.PublicURL, "external base URL of the sync API including the mount, used in signed URLs")
	fs.BoolVar(&s.Images, "image-segments", s.Images, "build sqlite-image bootstrap segments for clients that accept them (false: serve stored images and the rows lane)")
	fs.StringVar(&s.ImageDir, "image-dir", s.ImageDir, "directory for the scratch files of sqlite images being built (default: the system temporary directory)")
}

func (s Segments) validate() []error {
	var errs []error
	switch s.Store {
	case SegmentStoreDB:
	case SegmentStoreFS:
		if s.Dir == "" {
			errs = append(errs, fmt.Errorf("--segment-store fs needs --segment-dir"))
		}
	default:
		errs = append(errs, fmt.Errorf("--segment-store %q: want db or fs", s.Store))
	}
	if s.TTL <= 0 {
		errs = append(errs, fmt.Errorf("--segment-ttl must be positive"))
	}
	if s.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("--segment-sweep-interval must not be negative"))
	}
	if s.SignedURLTTL <= 0 || s.SignedURLTTL > 15*time.Minute {
		errs = append(errs, fmt.Errorf("--signed-url-ttl %s: want more than 0 and at most 15m", s.SignedURLTTL))
	}
	if s.SignedURLKeyFile != "" && s.PublicURL == "" {
		errs = append(errs, fmt.Errorf("--signed-url-key-file needs --public-url (the base signed URLs start with)"))
	}
	// Settings the chosen store or a disabled feature would ignore.
	if s.Dir != "" && s.Store != SegmentStoreFS {
		errs = append(errs, fmt.Errorf("--segment-dir only applies to --segment-store fs (--segment-store is %s)", s.Store))
	}
	if s.SignedURLKeyFile == "" {
		if s.PublicURL != "" {
			errs = append(errs, fmt.Errorf("--public-url is only used by signed URLs, which are off without --signed-url-key-file"))
		}
		if s.SignedURLTTL != DefaultSegments().SignedURLTTL {
			errs = append(errs, fmt.Errorf("--signed-url-ttl is only used by signed URLs, which are off without --signed-url-key-file"))
		}
	}
	if s.ImageDir != "" && !s.Images {
		errs = append(errs, fmt.Errorf("--image-dir only applies with --image-segments"))
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Path, "/") {
			errs = append(errs, fmt.Errorf("--public-url %q: want http(s)://host[/mount] without a trailing slash, query or fragment", s.PublicURL))
		}
	}
	return errs
}
