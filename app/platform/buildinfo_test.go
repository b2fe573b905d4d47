package platform

import (
	"runtime/debug"
	"testing"
)

func TestBuildInfoFrom(t *testing.T) {
	vcs := &debug.BuildInfo{
		Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs.revision", Value: "vcsrev"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tagged := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}
	tests := []struct {
		name  string
		stamp Stamp
		info  *debug.BuildInfo
		want  BuildInfo
	}{
		{"nothing known", Stamp{}, nil, BuildInfo{Version: "dev"}},
		{"linker version only", Stamp{Version: "v1.2.3"}, nil, BuildInfo{Version: "v1.2.3"}},
		{"the stamp wins over vcs and is not mixed with it",
			Stamp{Version: "v1.2.3", Commit: "stamped", CommitAt: "2026-02-03T00:00:00Z"}, vcs,
			BuildInfo{Version: "v1.2.3", Commit: "stamped", CommitAt: "2026-02-03T00:00:00Z"}},
		{"a stamped dirty tree", Stamp{Version: "v1.2.3-dirty", Commit: "stamped", Modified: "true"}, nil,
			BuildInfo{Version: "v1.2.3-dirty", Commit: "stamped", Modified: true}},
		{"plain go build in a checkout falls back to vcs", Stamp{Version: "dev"}, vcs,
			BuildInfo{Version: "dev", Commit: "vcsrev", CommitAt: "2026-01-02T03:04:05Z", Modified: true}},
		{"go install of a tag names the module version", Stamp{Version: "dev"}, tagged, BuildInfo{Version: "v1.4.0"}},
		{"a linker version wins over the module version", Stamp{Version: "v2.0.0"}, tagged, BuildInfo{Version: "v2.0.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildInfoFrom(tt.stamp, tt.info); got != tt.want {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestBuildInfoStringCommit(t *testing.T) {
	tests := []struct {
		name string
		bi   BuildInfo
		want string
	}{
		{"unknown", BuildInfo{Version: "dev"}, "syncd dev\n  commit:   unknown\n"},
		{"stamped", BuildInfo{Version: "v1", Commit: "abc", CommitAt: "2026-01-02T03:04:05Z"},
			"syncd v1\n  commit:   abc\n  built from a commit of 2026-01-02T03:04:05Z\n"},
		{"modified", BuildInfo{Version: "v1", Commit: "abc", Modified: true}, "syncd v1\n  commit:   abc (modified)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.bi.String(); len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
				t.Fatalf("got\n%s\nwant a start of\n%s", got, tt.want)
			}
		})
	}
}
