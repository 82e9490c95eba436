// Package commands is the berm command line: each file defines one command's
// flags, checks its arguments, calls the packages that do the work, and prints.
//
//	os.Exit(commands.Main(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
package commands
