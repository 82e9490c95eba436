package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
	code := commands.Main(ctx, multiCall(os.Args), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// multiCall makes bermd ARGS berm serve ARGS: one binary is both the CLI and
// the daemon, so `bermd &` and a service manager's ExecStart=bermd need no
// subcommand. The name is compared without .exe and without case, as
// Windows names files.
func multiCall(args []string) []string {
	if len(args) == 0 {
		return args
	}
	name := filepath.Base(args[0])
	if ext := filepath.Ext(name); strings.EqualFold(ext, ".exe") {
		name = strings.TrimSuffix(name, ext)
	}
	if !strings.EqualFold(name, "bermd") {
		return args
	}
	return append([]string{args[0], "serve"}, args[1:]...)
}
