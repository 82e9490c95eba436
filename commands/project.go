package commands

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// projectFile is a program's project file, in the directory berm runs in.
const projectFile = "berm.toml"

// maxProjectFile is far past what a project says.
const maxProjectFile = 64 << 10

// project is berm.toml: what `berm push` and `berm deploy` do without
// arguments.
type project struct {
	// path is where the file is, for messages.
	path string

	// Name is the name the program deploys under.
	Name string `toml:"name"`
	// Image is the reference it is pushed to (tag latest when it has none).
	Image string `toml:"image"`
	// Wasm is the built module, relative to berm.toml; NAME.wasm by default.
	Wasm string `toml:"wasm"`
	// Sandbox is what a deploy grants the program, in the keys of a WASI
	// sandbox: the flags of berm deploy add to it.
	Sandbox *sandboxTable `toml:"sandbox"`

	// Lang is what berm build builds: "go" (the default), "rust" or "c".
	Lang string `toml:"lang"`
	// The manifest of a Rust or C program, which berm build attaches; a Go
	// program registers the same with the SDK instead (berm.Usage,
	// berm.Syscalls, berm.Calls, berm.Tool).
	Usage    string        `toml:"usage"`
	Syscalls []string      `toml:"syscalls"`
	Calls    []string      `toml:"calls"`
	Tools    []projectTool `toml:"tools"`
}

// projectTool is one [[tools]] of berm.toml.
type projectTool struct {
	Name        string `toml:"name"`
	Description string `toml:"description"`
	// Parameters is the JSON Schema of the tool's arguments: a string of
	// JSON, or a TOML table; {"type":"object"} when absent.
	Parameters any `toml:"parameters"`
}

// sandboxTable is berm.toml's [sandbox].
type sandboxTable struct {
	Preopens []struct {
		HostPath  string `toml:"host_path"`
		GuestPath string `toml:"guest_path"`
		Perms     string `toml:"perms"`
	} `toml:"preopens"`
	Env        []string `toml:"env"`
	Args       []string `toml:"args"`
	InitialCwd string   `toml:"initial_cwd"`
	AllowHosts []string `toml:"allow_hosts"`
}

// grants reads [sandbox]; a relative host_path is relative to berm.toml,
// and with a remote server refused, since it names the server's directories.
func (p *project) grants(remote bool) (*sandbox.Grants, error) {
	t := p.Sandbox
	if t == nil {
		return nil, nil
	}
	bad := func(err error) error { return fmt.Errorf("%s: [sandbox]: %w", p.path, err) }
	g := &sandbox.Grants{Args: t.Args, Cwd: t.InitialCwd}
	for _, o := range t.Preopens {
		host := o.HostPath
		if host == "" {
			return nil, bad(errors.New("a preopen without host_path"))
		}
		if !filepath.IsAbs(host) {
			if remote {
				return nil, bad(fmt.Errorf("host_path %q: with --server, give the absolute path of the server's directory", host))
			}
			host = filepath.Join(filepath.Dir(p.path), host)
		}
		var write bool
		switch o.Perms {
		case "", "read_only":
		case "read_write":
			write = true
		default:
			return nil, bad(fmt.Errorf("perms %q: want \"read_only\" or \"read_write\"", o.Perms))
		}
		clean, err := sandbox.NewDir(host, o.GuestPath, write)
		if err != nil {
			return nil, bad(err)
		}
		if !remote {
			clean = resolveLinks(clean)
		}
		g.Dirs = append(g.Dirs, clean)
	}
	for _, s := range t.Env {
		e, err := sandbox.ParseEnv(s)
		if err != nil {
			return nil, bad(err)
		}
		g.Env = append(g.Env, e)
	}
	for _, s := range t.AllowHosts {
		h, err := sandbox.ParseHost(s)
		if err != nil {
			return nil, bad(err)
		}
		g.Hosts = append(g.Hosts, h)
	}
	if g.IsZero() {
		return nil, nil
	}
	return g, nil
}

// readProject reads berm.toml from dir.
func readProject(dir string) (*project, error) {
	path := filepath.Join(dir, projectFile)
	b, err := readSmallFile(path, maxProjectFile, "project file")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, withHint(fmt.Errorf("no %s in %s", projectFile, dir),
			"give the arguments, or write a berm.toml with name, image and wasm (see --help)")
	}
	if err != nil {
		return nil, err
	}
	var p project
	dec := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			return nil, fmt.Errorf("%s: %s", path, strict.String())
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.path = path
	if p.Name != "" {
		if err := manifest.CheckProgramName(p.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if p.Wasm == "" {
		if p.Name == "" {
			return nil, withHint(fmt.Errorf("%s: neither wasm nor name is set", path), "set wasm = \"NAME.wasm\", the built module")
		}
		p.Wasm = p.Name + ".wasm"
	}
	if !filepath.IsAbs(p.Wasm) {
		p.Wasm = filepath.Join(dir, p.Wasm)
	}
	return &p, nil
}

// need checks that the keys a command uses are set.
func (p *project) need(keys ...string) error {
	for _, k := range keys {
		if (k == "name" && p.Name == "") || (k == "image" && p.Image == "") {
			return withHint(fmt.Errorf("%s: %s is missing", p.path, k), "%s", projectHelp[k])
		}
	}
	return nil
}

var projectHelp = map[string]string{
	"name":  "set name = \"NAME\", the program name it deploys under",
	"image": "set image = \"host/repo\", where berm push puts it",
}

// module reads the built module berm.toml names.
func (p *project) module() ([]byte, error) {
	if !isFile(p.Wasm) {
		return nil, withHint(fmt.Errorf("%s: no such file (wasm in %s)", p.Wasm, p.path),
			"build the module first, or point wasm in berm.toml at it")
	}
	return readImageFile(p.Wasm)
}
