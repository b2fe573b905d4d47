package platform

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// BuildInfo describes the running binary.
type BuildInfo struct {
	Version   string
	Commit    string
	CommitAt  string
	Modified  bool
	GoVersion string
	Platform  string
	CGO       bool
}

// Stamp is what the linker set with -ldflags -X (the Makefile does; see
// cmd/syncd). Empty fields fall back to the data Go embeds.
type Stamp struct {
	Version  string
	Commit   string
	CommitAt string
	// Modified is "true" when the tree had uncommitted changes.
	Modified string
}

// ReadBuildInfo fills BuildInfo from a linker-set version alone and the
// module and VCS data Go embeds in every binary.
func ReadBuildInfo(version string) BuildInfo {
	return ReadStampedBuildInfo(Stamp{Version: version})
}

// ReadStampedBuildInfo fills BuildInfo from the linker stamp, falling
// back to the module and VCS data Go embeds.
func ReadStampedBuildInfo(s Stamp) BuildInfo {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	bi := buildInfoFrom(s, info)
	bi.GoVersion = runtime.Version()
	bi.Platform = runtime.GOOS + "/" + runtime.GOARCH
	return bi
}

// buildInfoFrom merges the stamp with Go's build info (nil when the
// binary has none). A stamped commit wins over vcs.*, and then none of
// vcs.* is used: Go's VCS stamping is off with -buildvcs=false and in
// linked git worktrees (golang/go#58218), where it may even describe an
// enclosing repository, so the two sources are never mixed.
func buildInfoFrom(s Stamp, info *debug.BuildInfo) BuildInfo {
	bi := BuildInfo{Version: s.Version}
	if s.Commit != "" {
		bi.Commit, bi.CommitAt, bi.Modified = s.Commit, s.CommitAt, s.Modified == "true"
	}
	if info != nil {
		if bi.Version == "" || bi.Version == "dev" {
			if v := info.Main.Version; v != "" && v != "(devel)" {
				bi.Version = v
			}
		}
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				if s.Commit == "" {
					bi.Commit = kv.Value
				}
			case "vcs.time":
				if s.Commit == "" {
					bi.CommitAt = kv.Value
				}
			case "vcs.modified":
				if s.Commit == "" {
					bi.Modified = kv.Value == "true"
				}
			case "CGO_ENABLED":
				bi.CGO = kv.Value == "1"
			}
		}
	}
	if bi.Version == "" {
		bi.Version = "dev"
	}
	return bi
}

// String renders the build info for `syncd version`.
func (b BuildInfo) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "syncd %s\n", b.Version)
	commit := b.Commit
	if commit == "" {
		commit = "unknown"
	}
	if b.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(&sb, "  commit:   %s\n", commit)
	if b.CommitAt != "" {
		fmt.Fprintf(&sb, "  built from a commit of %s\n", b.CommitAt)
	}
	fmt.Fprintf(&sb, "  go:       %s\n", b.GoVersion)
	fmt.Fprintf(&sb, "  platform: %s\n", b.Platform)
	fmt.Fprintf(&sb, "  cgo:      %v\n", b.CGO)
	fmt.Fprintf(&sb, "  protocol: SSP2 wire 3\n")
	return sb.String()
}
