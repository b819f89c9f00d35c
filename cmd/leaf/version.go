package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release, set at build time; the Makefile, the Dockerfile
// and scripts/build-static.sh stamp 'git describe --tags --always --dirty':
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/leaf
var version = "dev"

// buildVersion is the version this binary reports.
func buildVersion() string {
	module := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		module = bi.Main.Version
	}
	return pickVersion(version, module)
}

// pickVersion chooses between the stamped version (-X main.version) and the
// main module's version from the build info. A stamp wins: someone chose it
// (a release, the image's VERSION), while the module version of a build in
// a checkout is only what the go command derived from the VCS, a
// pseudo-version. Without a stamp the module version serves when it is one
// ('go install module@v1.2.3'); "(devel)", which every build with
// -buildvcs=false reports, and "" are not.
func pickVersion(stamped, module string) string {
	if stamped != "" && stamped != "dev" {
		return stamped
	}
	if module != "" && module != "(devel)" {
		return module
	}
	return "dev"
}

func (a *app) versionCmd(_ context.Context, args []string) error {
	fs := newFlagSet("version")
	pos, err := a.parseFlags(fs, "Usage: leaf version\n\nPrints the version, the Go toolchain and, when the build recorded them, the VCS revision and time.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "leaf %s\n", buildVersion())
	fmt.Fprintf(a.stdout, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		if vcs["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(a.stdout, "%s: %s\n", orDefault(vcs["vcs"], "vcs"), rev)
	}
	if t := vcs["vcs.time"]; t != "" {
		fmt.Fprintf(a.stdout, "time: %s\n", t)
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
