// Command sglangsim is a stand-in for SGLang's launch_server: it takes the
// same flags, starts, serves and stops like SGLang, and streams tokens at the
// speed of a performance model of speculative decoding. See docs/sglangsim.md.
package main

import (
	"os"

	"github.com/specsweep/specsweep/sim"
)

func main() {
	os.Exit(sim.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
