package commands

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	sdk "github.com/berm-dev/berm/sdk"
)

// Version is the binary's version; releases set it with
// -ldflags "-X github.com/berm-dev/berm/commands.Version=v1.2.3".
var Version = ""

type versionOutput struct {
	Version    string `json:"version"`
	ABIVersion int    `json:"abi_version"`
	SDKVersion string `json:"sdk_version"`
	Go         string `json:"go"`
}

func newVersionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the versions of berm, of the program ABI it implements and of the Go guest SDK",
		Description: `A program built for another ABI version is refused at deploy.

   berm version
   berm version --json | jq -r .abi_version`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print as JSON"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usagef("version takes no arguments")
			}
			return runVersion(ctx, e, cmd.Bool("json"))
		},
	}
}

func runVersion(_ context.Context, e *env, asJSON bool) error {
	out := versionOutput{Version: binaryVersion(), ABIVersion: manifest.ABIVersion, SDKVersion: sdk.Version}
	if info, ok := debug.ReadBuildInfo(); ok {
		out.Go = info.GoVersion
	}
	if asJSON {
		return writeJSON(e, out)
	}
	fmt.Fprintf(e.stdout, "berm %s\nabi  %d\nsdk  %s\ngo   %s\n", out.Version, out.ABIVersion, out.SDKVersion, out.Go)
	return nil
}

func binaryVersion() string {
	if Version != "" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
