// Command berm is the OS for agent harnesses: it deploys WebAssembly programs,
// runs their tools and serves them over MCP. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/berm-dev/berm/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a graceful end (a server finishes its calls
	// in flight); the second ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := commands.Main(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
