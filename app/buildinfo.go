package app

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

// ReadBuildInfo fills BuildInfo from the linker-set version and the
// module and VCS data Go embeds in every binary.
func ReadBuildInfo(version string) BuildInfo {
	bi := BuildInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if bi.Version == "" || bi.Version == "dev" {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			bi.Version = v
		}
	}
	if bi.Version == "" {
		bi.Version = "dev"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Commit = s.Value
		case "vcs.time":
			bi.CommitAt = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		case "CGO_ENABLED":
			bi.CGO = s.Value == "1"
		}
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
