//go:build wasip1

package main

import berm "github.com/berm-dev/berm/sdk"

// Each tool of berm.abi.json is an export named berm_tool_<name>, around
// Handle; Warm readies each while the host takes its snapshot.

func init() {
	berm.Warm(greetTool)
	berm.Warm(countTool)
	berm.Warm(nowTool)
}

//go:wasmexport berm_tool_greet
func greet() { berm.Handle(greetTool) }

//go:wasmexport berm_tool_count
func count() { berm.Handle(countTool) }

//go:wasmexport berm_tool_now
func now() { berm.Handle(nowTool) }
