//go:build wasip1

package main

import berm "github.com/berm-dev/berm/sdk"

// Each tool of berm.abi.json is an export named berm_tool_<name>, around
// Handle; Warm readies it while the host takes its snapshot.

func init() { berm.Warm(fetchTool) }

//go:wasmexport berm_tool_fetch
func fetch() { berm.Handle(fetchTool) }
