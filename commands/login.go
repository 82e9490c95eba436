package commands

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/berm-dev/berm/registry"
)

type loginOptions struct {
	username string
	reg      registryOptions
}

func newLoginCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "login",
		Usage:     "log in to an OCI registry (the password is read from stdin)",
		ArgsUsage: "REGISTRY",
		Description: `Checks the credentials against the registry, then keeps them as Docker does
(~/.docker/config.json, or the credential helper it names), where push, deploy
and inspect find them, and so do docker and oras.

   echo "$TOKEN" | berm login --username me ghcr.io`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "username", Aliases: []string{"u"}, Usage: "user name at the registry"},
		}, registryFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("login takes one REGISTRY")
			}
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := loginOptions{username: cmd.String("username"), reg: reg}
			return runLogin(ctx, e, opts, cmd.Args().First())
		},
	}
}

func runLogin(ctx context.Context, e *env, opts loginOptions, reg string) error {
	if opts.username == "" {
		return usagef("login needs --username")
	}
	password, err := readPassword(e)
	if err != nil {
		return err
	}
	if password == "" {
		return withHint(fmt.Errorf("login %s: no password on stdin", reg), "pipe it in: echo \"$TOKEN\" | berm login --username NAME %s", reg)
	}
	c, err := newRegistryClient(e, opts.reg)
	if err != nil {
		return err
	}
	if err := c.Login(ctx, registryHost(reg), opts.username, password); err != nil {
		if errors.Is(err, registry.ErrUnauthorized) {
			return withHint(err, "%s refused the user name or password", registryHost(reg))
		}
		return err
	}
	fmt.Fprintf(e.stdout, "logged in to %s\n", registryHost(reg))
	return nil
}

func newLogoutCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "logout",
		Usage:     "forget the credentials of an OCI registry",
		ArgsUsage: "REGISTRY",
		Description: `Removes what berm login (or docker login, or oras login) kept for REGISTRY.

   berm logout ghcr.io`,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("logout takes one REGISTRY")
			}
			return runLogout(ctx, e, cmd.Args().First())
		},
	}
}

func runLogout(ctx context.Context, e *env, reg string) error {
	c, err := newRegistryClient(e, registryOptions{})
	if err != nil {
		return err
	}
	if err := c.Logout(ctx, registryHost(reg)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "logged out of %s\n", registryHost(reg))
	return nil
}

// readPassword reads one line of stdin; on a terminal, without echoing it.
func readPassword(e *env) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(e.stderr, "password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		return string(b), err
	}
	// A password without a final newline is still a password: the error
	// (io.EOF) says nothing more than an empty line would. The read is
	// bounded: stdin may be a file or a device with no newline at all.
	line, _ := bufio.NewReader(io.LimitReader(e.stdin, maxPassword+2)).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if len(line) > maxPassword {
		return "", fmt.Errorf("password on stdin: over %d bytes", maxPassword)
	}
	return line, nil
}

// maxPassword is far past any registry's tokens.
const maxPassword = 64 << 10

// registryHost accepts a registry as Docker users write it, with a scheme or
// a path ("https://ghcr.io/"), and returns the host.
func registryHost(reg string) string {
	if _, rest, ok := strings.Cut(reg, "://"); ok {
		reg = rest
	}
	host, _, _ := strings.Cut(reg, "/")
	return host
}
