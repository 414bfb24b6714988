package cli

import "runtime/debug"

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
