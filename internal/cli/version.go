package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

func versionCmd() command {
	return newCommand("version", "", "Print specsweep's version (also --version).", versionRun).
		withExamples("specsweep version")
}

type versionOptions struct{}

func (o *versionOptions) flags(fs *flag.FlagSet) {}

func (o *versionOptions) args(pos []string) error { return noArgs(pos) }

// versionRun prints the build's version.
func versionRun(ctx context.Context, env Env, o *versionOptions) error {
	fmt.Fprintln(env.Stdout, "specsweep", Version())
	return nil
}

// version is set at link time (-X .../internal/cli.version=...) by the Makefile.
var version = ""

// Version reports the build's version: the link-time value, else the module version.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
