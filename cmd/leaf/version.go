package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release, set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/leaf
var version = "dev"

// buildVersion is version, or the module version when the binary was built
// by 'go install module@version' without -ldflags.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
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
