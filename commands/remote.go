package commands

import (
	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
)

// serverFlags let deploy, ls, rm and inspect drive a berm server's control
// API instead of the local root.
func serverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server", Usage: "drive the berm server at `URL` (http://host:7777) instead of the local root", Sources: cli.EnvVars("BERM_SERVER")},
		&cli.StringFlag{Name: "token", Usage: "bearer token for --server", Sources: cli.EnvVars("BERM_TOKEN")},
	}
}

// remote is where a command acts: a server's control API, or (nil) the root.
type remote struct {
	server, token string
}

func readServerFlags(cmd *cli.Command) remote {
	return remote{server: cmd.String("server"), token: cmd.String("token")}
}

// client returns the control API client, or nil when acting on the root.
func (r remote) client() (*control.Client, error) {
	if r.server == "" {
		return nil, nil
	}
	return control.NewClient(r.server, r.token)
}
