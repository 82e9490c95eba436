package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/registry/index"
)

// configFile holds berm's settings, in the root.
const configFile = "config.toml"

// maxConfigFile is far past a few keys.
const maxConfigFile = 64 << 10

// configKeys are the keys config.toml may set, each with its check. A key
// this berm does not know (one a later berm wrote) is kept as it is.
var configKeys = map[string]struct {
	help  string
	check func(string) (string, error)
}{
	"index": {
		help:  "the index `berm search` reads: a git repository's https:// or file:// URL, or a local path",
		check: index.NormalizeURL,
	},
}

func newConfigCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "config",
		Usage:     "read or change berm's settings (config.toml in the root)",
		ArgsUsage: "get [KEY] | set KEY VALUE",
		Description: `Settings live in config.toml in the root (--root, BERM_ROOT or ~/.berm), one
key = "value" a line; set rewrites the file. An empty VALUE removes the key.
Keys:

   index   ` + configKeys["index"].help + `
           (BERM_INDEX overrides it, and search's --index both)

   berm config set index https://github.com/ORG/berm-index
   berm config set index ~/src/berm-index      # a local clone, made absolute
   berm config get index
   berm config get                             # every key that is set
   berm config set index ""                    # removes it`,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runConfig(ctx, e, cmd.String("root"), cmd.Args().Slice())
		},
		// get and set are subcommands too, so that `berm config set --help`
		// is help, not a help topic urfave cannot find.
		Commands: []*cli.Command{
			{Name: "get", Usage: "print KEY's value, or every key that is set", ArgsUsage: "[KEY]", Action: func(ctx context.Context, cmd *cli.Command) error {
				return runConfig(ctx, e, cmd.String("root"), append([]string{"get"}, cmd.Args().Slice()...))
			}},
			{Name: "set", Usage: "set KEY to VALUE (an empty VALUE removes it)", ArgsUsage: "KEY VALUE", Action: func(ctx context.Context, cmd *cli.Command) error {
				return runConfig(ctx, e, cmd.String("root"), append([]string{"set"}, cmd.Args().Slice()...))
			}},
		},
	}
}

func runConfig(_ context.Context, e *env, root string, args []string) error {
	if root == "" {
		return noRoot()
	}
	switch {
	case len(args) == 2 && args[0] == "get" || len(args) == 3 && args[0] == "set":
		if _, ok := configKeys[args[1]]; !ok {
			return usagef("config: no key %q (keys: %s)", args[1], strings.Join(knownKeys(), ", "))
		}
	case len(args) == 1 && args[0] == "get":
	default:
		return usagef("config takes get [KEY] or set KEY VALUE")
	}
	cfg, err := readConfig(root)
	if err != nil {
		return err
	}
	switch {
	case args[0] == "get" && len(args) == 1:
		var b bytes.Buffer
		if len(cfg) > 0 {
			if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
				return err
			}
		}
		_, err := e.stdout.Write(b.Bytes())
		return err
	case args[0] == "get":
		if v, ok := cfg[args[1]].(string); ok {
			fmt.Fprintln(e.stdout, v)
		}
		return nil
	}
	key, value := args[1], args[2]
	if value == "" {
		delete(cfg, key)
	} else {
		v, err := configKeys[key].check(value)
		if err != nil {
			return fmt.Errorf("config %s: %w", key, err)
		}
		cfg[key] = v
	}
	return writeConfig(root, cfg)
}

func knownKeys() []string {
	var keys []string
	for k := range configKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readConfig reads config.toml in root: empty when there is none. Each key
// berm knows must hold a string.
func readConfig(root string) (map[string]any, error) {
	path := filepath.Join(root, configFile)
	b, err := readSmallFile(path, maxConfigFile, "config file")
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{}
	if err := toml.Unmarshal(b, &cfg); err != nil {
		return nil, withHint(fmt.Errorf("%s: %w", path, err), "fix it, or remove it and use `berm config set`")
	}
	for k := range configKeys {
		if v, ok := cfg[k]; ok {
			if _, ok := v.(string); !ok {
				return nil, withHint(fmt.Errorf("%s: %s is not a string", path, k), "berm config set %s VALUE", k)
			}
		}
	}
	return cfg, nil
}

// configValue is key's value in root's config.toml, or "".
func configValue(root, key string) (string, error) {
	cfg, err := readConfig(root)
	if err != nil {
		return "", err
	}
	v, _ := cfg[key].(string)
	return v, nil
}

// writeConfig replaces config.toml in root, creating the root, through a
// temporary file renamed into place: a reader sees the old file or the new.
func writeConfig(root string, cfg map[string]any) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return err
	}
	return writeRootFile(root, configFile, b.Bytes())
}
