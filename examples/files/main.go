//go:build wasip1

package main

import (
	"structs"

	berm "github.com/berm-dev/berm/sdk"
)

// Each tool of berm.abi.json is an export named berm_tool_<name>, around
// Handle; Warm readies each while the host takes its snapshot.

func init() {
	var f files
	berm.Warm(f.read)
	berm.Warm(f.list)
	berm.Warm(f.search)
	berm.Warm(f.write)
}

//go:wasmexport berm_tool_read
func read() { berm.Handle(granted().read) }

//go:wasmexport berm_tool_list
func list() { berm.Handle(granted().list) }

//go:wasmexport berm_tool_search
func search() { berm.Handle(granted().search) }

//go:wasmexport berm_tool_write
func write() { berm.Handle(granted().write) }

// granted is the file system the deployment grants: its directories are
// WASI's preopens, which Go's syscall package reads at start but does not
// export, so they are read again here (a few calls, once per tool call).
func granted() files {
	var roots []string
	var name []byte
	for fd := int32(3); ; fd++ {
		var p prestat
		switch errno := fdPrestatGet(fd, &p); {
		case errno == errnoBADF:
			return files{roots: roots}
		case errno != 0 || p.typ != preopentypeDir:
			continue
		}
		if int(p.nameLen) > len(name) {
			name = make([]byte, p.nameLen)
		}
		if p.nameLen == 0 || fdPrestatDirName(fd, &name[0], p.nameLen) != 0 {
			continue
		}
		roots = append(roots, string(name[:p.nameLen]))
	}
}

// WASI preview 1's prestat: a tag, then the length of the directory's name.
type prestat struct {
	_       structs.HostLayout
	typ     uint8
	nameLen uint32
}

const (
	preopentypeDir = 0
	errnoBADF      = 8
)

//go:wasmimport wasi_snapshot_preview1 fd_prestat_get
//go:noescape
func fdPrestatGet(fd int32, p *prestat) uint32

//go:wasmimport wasi_snapshot_preview1 fd_prestat_dir_name
//go:noescape
func fdPrestatDirName(fd int32, path *byte, n uint32) uint32
