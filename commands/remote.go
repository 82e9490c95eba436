package commands

import (
	"os"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
)

// serverFlags let deploy, ls, rm, inspect and search drive a berm server's
// control API instead of the local root, named by URL or by context.
// BERM_SERVER and BERM_CONTEXT are read by readServerFlags, not by cli:
// the environment ranks between the flags (contextPrecedence), which cli's
// sources cannot tell apart from the flags once parsed.
func serverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server", Usage: "drive the berm server at `URL` (http://host:7777) instead of the local root [$BERM_SERVER]"},
		&cli.StringFlag{Name: "context", Usage: "drive the server of the context `NAME` (berm context ls; local: the local root) [$BERM_CONTEXT]. First given wins: --server, --context, $BERM_SERVER, $BERM_CONTEXT, berm context use"},
		&cli.StringFlag{Name: "token", Usage: "bearer token for the server, instead of the context's", Sources: cli.EnvVars("BERM_TOKEN")},
	}
}

// remote is where a command acts: a server's control API, or (server "")
// the root.
type remote struct {
	server, token string
	context       string // the context that chose it, if one did ("local" for the root)
	from          string // the level of contextPrecedence that chose it; "" for none
	tokenGiven    bool   // token is --token's or BERM_TOKEN's, not the context's
	// err is a context that could not be resolved. client returns it, and
	// every command calls client before acting on the root or a server.
	err error
}

func readServerFlags(cmd *cli.Command) remote {
	r, err := resolveRemote(cmd.String("root"), serverChoice{
		flagServer:  cmd.String("server"),
		flagContext: cmd.String("context"),
		envServer:   os.Getenv("BERM_SERVER"),
		envContext:  os.Getenv("BERM_CONTEXT"),
		token:       cmd.String("token"),
	})
	if err != nil {
		return remote{err: err}
	}
	if r.server != "" && stateFlag(cmd) != "" {
		// A server acts on its own state; --state would be ignored.
		return remote{err: usagef("--state and a server (%s) both say where to act: give one (a server uses the state it was started with)", r.server)}
	}
	return r
}

// client returns the control API client, or nil when acting on the root.
func (r remote) client() (*control.Client, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.server == "" {
		return nil, nil
	}
	return control.NewClient(r.server, r.token)
}
