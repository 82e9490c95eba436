package commands

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	sdk "github.com/berm-dev/berm/sdk"
)

// Version, Commit and Date describe the build; releases set them (see
// .goreleaser.yaml) with
//
//	-ldflags "-X github.com/berm-dev/berm/commands.Version=v1.2.3
//	  -X github.com/berm-dev/berm/commands.Commit=<full hash>
//	  -X github.com/berm-dev/berm/commands.Date=2006-01-02T15:04:05Z"
//
// Date is the commit's time, not the build's, so that two builds of one
// commit are the same bytes. Unset, they come from the module version and
// the VCS stamp that go build records, when there are any.
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

type versionOutput struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	Date       string `json:"date,omitempty"`
	ABIVersion int    `json:"abi_version"`
	SDKVersion string `json:"sdk_version"`
	Go         string `json:"go"`
}

func newVersionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the versions of berm, of the program ABI it implements and of the Go guest SDK",
		Description: `A program built for another ABI version is refused at deploy. A release
also prints the commit it was built from (rev) and that commit's date.

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
	out.Commit, out.Date = buildCommit()
	if info, ok := debug.ReadBuildInfo(); ok {
		out.Go = info.GoVersion
	}
	if asJSON {
		return writeJSON(e, out)
	}
	fmt.Fprintf(e.stdout, "berm %s\n", out.Version)
	if out.Commit != "" {
		fmt.Fprintf(e.stdout, "rev  %s\n", out.Commit)
	}
	if out.Date != "" {
		fmt.Fprintf(e.stdout, "date %s\n", out.Date)
	}
	fmt.Fprintf(e.stdout, "abi  %d\nsdk  %s\ngo   %s\n", out.ABIVersion, out.SDKVersion, out.Go)
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

// buildCommit returns the commit and its date: the stamped ones, or those
// go build records from a checkout (vcs.revision and vcs.time; a modified
// work tree marks the commit "+dirty"). go install of a module version
// records neither.
func buildCommit() (commit, date string) {
	if Commit != "" || Date != "" {
		return Commit, Date
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", ""
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			date = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if commit != "" && dirty {
		commit += "+dirty"
	}
	return commit, date
}
