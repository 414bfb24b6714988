// Command specsweep runs speculative-decoding parameter sweeps of SGLang servers.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/specsweep/specsweep/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal the commands wind down (stop load, restore units); a second one
		// gets the default action: exit at once.
		<-ctx.Done()
		stop()
	}()
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin})
	stop()
	os.Exit(code)
}
