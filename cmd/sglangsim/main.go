// Command sglangsim is a stand-in for SGLang's launch_server: it takes the
// same flags, starts, serves and stops like SGLang, and streams tokens at the
// speed of a performance model of speculative decoding. Run under the name
// nvidia-smi (a symlink or a copy) it is a stand-in for nvidia-smi, answering
// from the simulated host's GPUs and the running simulated servers. See
// docs/sglangsim.md.
package main

import (
	"os"
	"path/filepath"

	"github.com/specsweep/specsweep/sim"
)

func main() {
	if filepath.Base(os.Args[0]) == "nvidia-smi" {
		os.Exit(sim.NvidiaSMI(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(sim.MainEnv(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}
